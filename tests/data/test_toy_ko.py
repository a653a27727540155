"""The toy-ko generator: gold alignments fit the tokens, splits are disjoint and reproducible."""

from attnkit.data import toy_ko
from attnkit.data.tasks import load_task

LEXICON = {
    en: ko
    for en, ko in [
        *toy_ko.FOOD,
        *toy_ko.DRINK,
        *toy_ko.TEXT,
        *toy_ko.THING,
        *toy_ko.ANIMALS,
        *[(sg, ko) for sg, _, ko in toy_ko.PEOPLE],
        *[(pl, ko) for _, pl, ko in toy_ko.PEOPLE],
        *toy_ko.PLACES,
    ]
}
UNALIGNED = {"a", "an", "the", "to", "in", "at"}


def test_the_brief_example() -> None:
    sentences = {" ".join(e.src): e for e in toy_ko.generate(5000, 0)}
    e = sentences["I am a student"]
    assert e.tgt == ["나는", "학생", "이다"]
    assert e.links == [(0, 0), (1, 2), (3, 1)]  # I-나는, am-이다, student-학생; "a" unaligned


def test_gold_alignments_are_consistent_with_tokens() -> None:
    for e in toy_ko.generate(2000, 3):
        assert e.links == sorted(set(e.links))
        for i, j in e.links:
            assert 0 <= i < len(e.src) and 0 <= j < len(e.tgt)
            # a content noun aligns to a Korean token that starts with its translation
            if e.src[i] in LEXICON:
                assert e.tgt[j].startswith(LEXICON[e.src[i]]), (e, i, j)
        aligned_src = {i for i, _ in e.links}
        aligned_tgt = {j for _, j in e.links}
        # every Korean token is aligned; every English token is, except function words
        assert aligned_tgt == set(range(len(e.tgt))), e
        for i, w in enumerate(e.src):
            assert i in aligned_src or w in UNALIGNED, (e, w)


def test_particles_follow_the_final_consonant() -> None:
    assert toy_ko.topic("학생") == "학생은" and toy_ko.topic("친구") == "친구는"
    assert toy_ko.obj("책") == "책을" and toy_ko.obj("사과") == "사과를"
    assert toy_ko.subject("의사") == "의사가" and toy_ko.subject("선생님") == "선생님이"


def test_splits_are_disjoint_and_deterministic() -> None:
    a = load_task("toy-ko", seed=5, train_size=600, valid_size=100, test_size=100)
    b = load_task("toy-ko", seed=5, train_size=600, valid_size=100, test_size=100)
    assert a == b
    keys = [{" ".join(e.src) for e in split} for split in (a.train, a.valid, a.test)]
    assert [len(k) for k in keys] == [600, 100, 100]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    c = load_task("toy-ko", seed=6, train_size=600, valid_size=100, test_size=100)
    assert c.test != a.test


def test_the_task_has_several_patterns() -> None:
    ex = toy_ko.generate(1000, 0)
    tgt = [" ".join(e.tgt) for e in ex]
    assert any(t.endswith("이다") for t in tgt)  # copula
    assert any(t.endswith("아니다") for t in tgt)  # negated copula
    assert any("것이다" in t for t in tgt)  # future
    assert any("에서" in t for t in tgt) and any(t.split()[0] in ("어제", "내일") for t in tgt)
    assert len({len(e.src) for e in ex}) >= 5
