"""The coref task: every template's gold referent is right by construction, the famous two
sentences come out word for word, the held-out split holds only unseen combinations, and the
seq2seq pairs replace the pronoun by its noun."""

import pytest

from attnkit.data import coref
from attnkit.data.coref import FRAMES, Frame, combinations, famous, held_out, sentence
from attnkit.data.tasks import load_task

# Written by hand from the meaning of each sentence, not from the frames' adjective lists:
# (frame, noun 1, noun 2, adjective) -> the noun "it" means.
BY_HAND = {
    ("cross", "dog", "road", "scared"): "dog",
    ("cross", "dog", "road", "icy"): "road",
    ("fit", "trophy", "suitcase", "big"): "trophy",
    ("fit", "trophy", "suitcase", "small"): "suitcase",
    ("lift", "crane", "piano", "weak"): "crane",
    ("lift", "crane", "piano", "heavy"): "piano",
    ("pour", "honey", "jar", "sticky"): "honey",
    ("pour", "honey", "jar", "narrow"): "jar",
    ("stay-on", "vase", "shelf", "wobbly"): "vase",
    ("stay-on", "vase", "shelf", "tilted"): "shelf",
    ("catch", "dog", "fox", "slow"): "dog",
    ("catch", "dog", "fox", "fast"): "fox",
}


def test_every_template_resolves_it_as_written_by_hand() -> None:
    assert {c[0] for c in BY_HAND} == {f.name for f in FRAMES}  # every template is checked
    for combo, noun in BY_HAND.items():
        for opener in coref.OPENERS:
            item = sentence(combo, opener)
            assert item.tokens[item.pronoun] == "it"
            assert item.noun == noun, (combo, opener)
            assert {item.tokens[item.referent], item.tokens[item.other]} == set(combo[1:3])


def test_every_combination_points_at_the_slot_its_adjective_picks() -> None:
    combos = combinations()
    assert len(combos) == len(set(combos))
    for combo in combos:
        name, n1, n2, adj = combo
        f = coref.frame(name)
        item = sentence(combo, "in the end ,")
        words = list(item.tokens)
        assert words.count("it") == 1 and words.count(n1) == 1 and words.count(n2) == 1
        want = n1 if adj in f.picks_first else n2
        assert adj in f.picks_first + f.picks_second
        assert item.noun == want and words[item.other] == (n2 if want == n1 else n1)
        assert (item.referent < item.other) == (item.slot == 1) == (want == n1)
        assert words[-1] == adj and words[:4] == ["in", "the", "end", ","]


def test_the_famous_sentences() -> None:
    tired, wide = famous()
    assert " ".join(tired.tokens) == "the animal didn't cross the street because it was too tired"
    assert " ".join(wide.tokens) == "the animal didn't cross the street because it was too wide"
    assert (tired.pronoun, tired.referent, tired.other) == (7, 1, 5)
    assert (wide.pronoun, wide.referent, wide.other) == (7, 5, 1)


def test_held_out_combinations_are_never_trained_on() -> None:
    train, test = held_out(3, 0.25)
    assert not set(train) & set(test)
    assert set(train) | set(test) == set(combinations())
    assert set(coref.FAMOUS) <= set(test)
    seen = {w for c in train for w in c[1:]}
    assert all(set(c[1:]) <= seen for c in test)  # unseen combinations of seen words
    assert 0.2 < len(test) / len(combinations()) < 0.3
    assert held_out(3, 0.25) == (train, test) and held_out(4, 0.25) != (train, test)


def test_the_seq2seq_task_replaces_it_by_its_noun() -> None:
    s = load_task("coref", seed=1, train_size=300, valid_size=30, test_size=100)
    assert (len(s.train), len(s.valid), len(s.test)) == (300, 30, 100)
    _, test_combos = held_out(1)
    held = {tuple(coref.to_example(x).src) for x in coref.items(test_combos)}
    assert all(tuple(e.src) in held for e in s.test)
    assert not any(tuple(e.src) in held for e in s.train + s.valid)
    for e in s.train[:50] + s.test[:50]:
        p = e.src.index("it")
        assert len(e.src) == len(e.tgt) and "it" not in e.tgt
        assert [w for i, w in enumerate(e.src) if i != p] == [
            w for i, w in enumerate(e.tgt) if i != p
        ]
        ref = [i for i, j in e.links if j == p and i != p]
        assert len(ref) == 1 and e.src[ref[0]] == e.tgt[p]  # the target noun is the referent


def test_bad_requests_say_what_to_do() -> None:
    with pytest.raises(ValueError, match="held-out ones"):
        load_task("coref", train_size=100, valid_size=10, test_size=10**6)
    with pytest.raises(ValueError, match="not an adjective"):
        sentence(("cross", "dog", "road", "heavy"))
    with pytest.raises(ValueError, match="two different words"):
        sentence(("catch", "dog", "dog", "fast"))
    with pytest.raises(ValueError, match="unknown coref frame"):
        sentence(("jump", "dog", "road", "icy"))
    with pytest.raises(ValueError, match="fraction"):
        held_out(0, 1.0)
    with pytest.raises(ValueError, match="cannot pick both"):
        Frame("x", "the {n1} saw the {n2} as it was {adj}", ("a",), ("b",), ("c",), ("c",))
    with pytest.raises(ValueError, match="pronoun"):
        Frame("x", "the {n1} saw the {n2} as {adj}", ("a",), ("b",), ("c",), ("d",))
