"""``attnkit experiment coref``: the gendered translation and its minimal pairs, the tensors,
the head measurements on hand-made weights, the checks on synthetic numbers (all three
outcomes), bad settings, and the quick run's files."""

import json
from pathlib import Path

import pytest
import torch

from attnkit.data.coref import (
    FAMOUS,
    FILLERS,
    GENDER,
    famous,
    gender,
    minimal_pairs,
    noun_pairs,
    nouns,
    pair_items,
    pair_split,
    sentence,
    translate,
)
from attnkit.experiments import evidence as ev
from attnkit.experiments.coref import QUICK, CorefConfig, rejudge, run_experiment
from attnkit.experiments.coref.checks import FOLLOWS, SCOPE, checks_of, judge, scope
from attnkit.experiments.coref.data import BOS, encode, target_ids
from attnkit.experiments.coref.measure import best_head, keys_of, masses, pair_rates
from attnkit.experiments.coref.report import report

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_the_famous_pair_translates_with_il_and_elle() -> None:
    tired, wide = famous()
    assert " ".join(translate(tired)) == "le animal didn't cross la rue because il was too tired"
    assert " ".join(translate(wide)) == "le animal didn't cross la rue because elle was too wide"


def test_every_noun_has_a_gender_and_articles_agree() -> None:
    assert set(nouns()) <= set(GENDER) and {g for _, g in GENDER.values()} == {"m", "f"}
    train, _, test = pair_split(0)
    for item in pair_items(test[:6], fillers=2, seed=3):
        out = translate(item)
        assert len(out) == len(item.tokens)
        for i, w in enumerate(item.tokens):
            if w == "the":
                noun = next(x for x in item.tokens[i + 1 :] if x in GENDER)
                assert out[i] == {"m": "le", "f": "la"}[gender(noun)]
        assert out[item.pronoun] == {"m": "il", "f": "elle"}[gender(item.noun)]
    with pytest.raises(ValueError, match="no gender"):
        gender("unicorn")


def test_minimal_pairs_flip_only_the_adjective_and_the_referent() -> None:
    _, _, test = pair_split(0)
    pairs = minimal_pairs(test, fillers=2, seed=5)
    assert len(pairs) == sum(5 * (6 if p[0] == "cross" else 5) for p in test)
    differ = 0
    for a, b in pairs:
        diff = [i for i, (x, y) in enumerate(zip(a.tokens, b.tokens, strict=True)) if x != y]
        assert diff == [len(a.tokens) - 1]  # the adjective, and nothing else
        assert (a.referent, a.other) == (b.other, b.referent) and a.slot == 1 and b.slot == 2
        ta, tb = translate(a), translate(b)
        changed = [i for i, (x, y) in enumerate(zip(ta, tb, strict=True)) if x != y]
        assert set(changed) <= {a.pronoun, len(a.tokens) - 1}  # only "it" depends on it
        if gender(a.noun) != gender(b.noun):
            differ += 1
            # one il and one elle: any rule blind to the referent gets exactly one right
            assert {ta[a.pronoun], tb[b.pronoun]} == {"il", "elle"}
        else:
            assert ta[a.pronoun] == tb[b.pronoun]
    assert 0 < differ < len(pairs)


def test_fillers_shift_the_nouns_but_not_the_reading() -> None:
    plain = sentence(FAMOUS[0])
    filled = sentence(FAMOUS[0], "sadly ,", ("young brown", "red"))
    assert filled.noun == plain.noun == "animal" and filled.slot == plain.slot == 1
    assert filled.referent == plain.referent + 4 and filled.pronoun == plain.pronoun + 5
    with pytest.raises(ValueError, match="fillers"):
        sentence(FAMOUS[0], "", ("tired", ""))
    counts = {len(x.tokens) for x in pair_items(noun_pairs()[:3], ("",), fillers=2, seed=1)}
    assert counts == {11, 12, 13, 14, 15}  # 0..2 fillers before each of two nouns
    assert pair_items(noun_pairs()[:3], fillers=2, seed=1) == pair_items(
        noun_pairs()[:3], fillers=2, seed=1)  # fmt: skip
    assert set(FILLERS).isdisjoint(
        {w for f in __import__("attnkit.data.coref", fromlist=["FRAMES"]).FRAMES
         for w in (*f.picks_first, *f.picks_second, *f.first, *f.second)})  # fmt: skip


def test_the_noun_pair_split_holds_out_unseen_pairs_of_seen_words() -> None:
    train, valid, test = pair_split(4)
    assert not (set(train) & set(valid) or set(train) & set(test) or set(valid) & set(test))
    assert set(train) | set(valid) | set(test) == set(noun_pairs())
    assert FAMOUS[0][:3] in test and valid and len(test) > len(valid)
    seen = {n for p in train for n in p[1:]}
    assert all(set(p[1:]) <= seen for p in valid + test if p != FAMOUS[0][:3])
    assert pair_split(4) == (train, valid, test) and pair_split(5) != (train, valid, test)
    with pytest.raises(ValueError, match="sum below 1"):
        pair_split(0, 0.5, 0.5)


def test_encode_teacher_forces_the_gendered_target_and_marks_the_phrases() -> None:
    a = sentence(FAMOUS[0], "", ("young", ""))  # the young animal ... the street
    b = sentence(FAMOUS[1])
    batch = encode([a, b])
    ids = target_ids()
    assert batch.src.shape == batch.tgt_out.shape == (2, 12)
    assert batch.tgt_in[:, 0].tolist() == [BOS, BOS]
    assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])
    assert int(batch.tgt_out[0, a.pronoun]) == ids["il"]
    assert int(batch.tgt_out[1, b.pronoun]) == ids["elle"] and int(batch.tgt_out[1, -1]) == 0
    assert batch.referent_phrase[0].nonzero().flatten().tolist() == [0, 1, 2]  # the young animal
    assert batch.other_phrase[0].nonzero().flatten().tolist() == [5, 6]  # the street
    assert batch.referent_phrase[1].nonzero().flatten().tolist() == [4, 5]
    assert batch.differ.tolist() == [True, True]


def test_masses_and_top_nouns_on_hand_made_weights() -> None:
    batch = encode([sentence(FAMOUS[0]), sentence(FAMOUS[1])])  # it at 7; nouns at 1 and 5
    s = batch.src.shape[1]
    w = torch.zeros(2, 1, 2, s, s)
    w[0, 0, 0, 7, [0, 1, 4, 5]] = torch.tensor([0.1, 0.3, 0.05, 0.35])  # phrase 0.4 vs 0.4
    w[1, 0, 0, 7, [0, 1, 4, 5]] = torch.tensor([0.1, 0.1, 0.2, 0.6])
    w[:, 0, 1, 7, 0] = 1.0  # head 1: all on "the" of noun 1
    w[:, 0, :, 3] = 0.5  # a row that is not the pronoun's: ignored
    r, o = masses(w, *keys_of("enc-self", "phrase", batch))  # (B, L, H)
    assert torch.allclose(r[:, 0, 0], torch.tensor([0.4, 0.8]))
    assert torch.allclose(o[:, 0, 0], torch.tensor([0.4, 0.2]))
    assert torch.allclose(r[:, 0, 1], torch.tensor([1.0, 0.0]))
    rn, on = masses(w, *keys_of("enc-self", "noun", batch))
    assert torch.allclose(rn[:, 0, 0], torch.tensor([0.3, 0.6]))
    assert torch.allclose(on[:, 0, 0], torch.tensor([0.35, 0.1]))
    q, right, _ = keys_of("dec-self", "noun", batch)  # target word j is fed at j + 1
    assert right[0].nonzero().flatten().tolist() == [2] and q.tolist() == [7, 7]
    with pytest.raises(ValueError, match="unknown attention"):
        keys_of("memory", "noun", batch)


def test_pair_rates_follow_and_flip() -> None:
    # 4 pairs, L = 1, H = 3: head 0 right in both always; head 1 always the first noun (right
    # in sentence a, wrong in b): never flips; head 2 wrong in both: flips, the wrong way
    a = torch.tensor([[[True, True, False]]] * 4)
    b = torch.tensor([[[True, False, False]]] * 4)
    picks = torch.stack([a, b], dim=1).flatten(0, 1)  # (8, 1, 3) interleaved
    follows, flips = pair_rates(picks)
    assert follows.tolist() == [[1.0, 0.0, 0.0]] and flips.tolist() == [[1.0, 0.0, 1.0]]
    coin = torch.rand(20000, 1, 1, generator=torch.Generator().manual_seed(0)) < 0.5
    f, fl = pair_rates(coin)
    assert abs(float(f) - 0.25) < 0.02 and abs(float(fl) - 0.5) < 0.02
    assert best_head(torch.tensor([[0.1, 0.2], [0.9, 0.3]])) == (1, 0)
    with pytest.raises(ValueError, match="two by two"):
        pair_rates(picks[:3])


ACC, FOLLOW, CONTROL = [0.97, 0.99, 0.95, 0.98, 0.96], [0.8, 0.85, 0.75, 0.9, 0.82], [0.0] * 5


def test_checks_reproduced_when_a_head_follows_in_most_pairs() -> None:
    checks = checks_of(ACC, FOLLOW, [0.0, 0.01, 0.0, 0.02, 0.0])
    assert ev.verdict_of(checks) == ev.REPRODUCED
    assert [c.kind for c in checks] == ["design", "design", "design", "claim"]


def test_checks_not_reproduced_when_no_head_follows() -> None:
    v = ev.verdict_of(checks_of(ACC, [0.01, 0.02, 0.0, 0.05, 0.03], CONTROL))
    assert v.startswith("NOT REPRODUCED") and "follows the referent" in v


def test_checks_inconclusive_when_the_interval_straddles_the_threshold() -> None:
    v = ev.verdict_of(checks_of(ACC, [0.05, 0.45, 0.2, 0.35, 0.25], CONTROL))  # around 0.25
    assert v.startswith("INCONCLUSIVE") and "holds both" in v


def test_checks_inconclusive_when_the_model_has_not_learnt_the_task() -> None:
    v = ev.verdict_of(checks_of([0.55, 0.6, 0.5, 0.58, 0.62], [0.0] * 5, CONTROL))
    assert v.startswith("INCONCLUSIVE") and "not learned" in v  # never NOT REPRODUCED
    v = ev.verdict_of(checks_of([0.99, 0.3, 0.99, 0.99, 0.99], FOLLOW, CONTROL))
    assert v.startswith("INCONCLUSIVE") and "above chance" in v  # mean 0.85: not learned


def test_checks_inconclusive_when_the_measure_is_at_its_ceiling_untrained() -> None:
    v = ev.verdict_of(checks_of(ACC, FOLLOW, [0.7, 0.8, 0.75, 0.9, 0.6]))
    assert v.startswith("INCONCLUSIVE") and "untrained control" in v
    assert FOLLOWS == 0.25  # chance: a coin per sentence


def test_scope_holds_the_verdict_without_an_ablation_whichever_way_the_rate_falls() -> None:
    """An existence claim needs the encoder forced to route and an ablation: without one the
    verdict is INCONCLUSIVE, both where the head follows and where it does not."""
    for follows in (FOLLOW, [0.01, 0.02, 0.0, 0.05, 0.03]):
        numbers = {"accuracy": ACC, "follows": follows, "control": CONTROL}
        v = ev.verdict_of(judge(numbers))
        assert v.startswith("INCONCLUSIVE: ") and "no ablation was run" in v, v
    c = scope(None)
    assert (c.name, c.kind, c.outcome) == (SCOPE, "design", ev.INCONCLUSIVE)


def test_scope_reads_an_ablation_on_its_interval() -> None:
    assert scope([0.20, 0.25, 0.18, 0.30, 0.22]).outcome == ev.PASS  # the head matters
    assert scope([0.05, -0.04, 0.02, -0.03, 0.01]).outcome == ev.INCONCLUSIVE  # holds 0
    numbers = {"accuracy": ACC, "follows": FOLLOW, "control": CONTROL,
               "ablation": [0.20, 0.25, 0.18, 0.30, 0.22]}  # fmt: skip
    assert ev.verdict_of(judge(numbers)) == ev.REPRODUCED


def test_the_committed_run_reads_as_its_page_says() -> None:
    """docs/experiments/coref.json: its checks are today's (``rejudge``) of its own per-seed
    numbers, the run's own verdict kept, and the page quotes the verdict."""
    docs = Path(__file__).parents[2] / "docs" / "experiments"
    result = json.loads((docs / "coref.json").read_text())
    again = rejudge(result)
    assert again["checks"] == result["checks"] and again["verdict"] == result["verdict"]
    assert result["verdict"] == ev.verdict_of([scope(None)])
    assert result["verdict_as_run"].startswith("NOT REPRODUCED: ")
    claim = [c for c in result["checks"] if c["kind"] == "claim"]
    assert [c["outcome"] for c in claim] == [ev.FAIL]  # the rate, reported beside the scope
    page = (docs / "coref.md").read_text()
    assert "| verdict | | **INCONCLUSIVE**" in page
    assert f"verdict: {result['verdict']}" in page
    assert "added after the run" in page


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"seeds": 1}, "--seeds"),
        ({"dim": 30, "heads": 4}, "divisible"),
        ({"lr": 0.0}, "--lr"),
        ({"test_fraction": 1.0}, "--test-fraction"),
        ({"valid_fraction": 0.5, "test_fraction": 0.5}, "leave some"),
        ({"batch_size": 0}, "--batch-size"),
        ({"openers": 6}, "--openers"),
        ({"fillers": 7}, "--fillers"),
    ],
)
def test_bad_settings_fail_clearly(kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CorefConfig(**kw)


def test_quick_run_writes_the_tables_maps_and_checks(tmp_path: Path) -> None:
    cfg = CorefConfig(**QUICK)
    result = run_experiment(cfg, tmp_path, say=lambda _: None)
    lines: list[str] = []
    report(result, tmp_path, say=lines.append)
    first = result["seeds"][0]
    (l, h) = first["chosen"]["enc-self"]["head"]
    for f, (adj, noun) in zip(first["famous"], (("tired", "animal"), ("wide", "street")),
                              strict=True):  # fmt: skip
        assert f["tokens"][-1] == adj and f["tokens"][f["referent"]] == noun
        row = f["weights"][l][h][f["pronoun"]]
        assert f["right_noun"] == pytest.approx(row[f["referent"]], abs=1e-4)
        assert f["right"] == pytest.approx(row[f["referent"] - 1] + row[f["referent"]], abs=1e-3)
    rows = (tmp_path / "coref.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + cfg.seeds * (cfg.enc_layers + 2 * cfg.dec_layers) * cfg.heads
    saved = json.loads((tmp_path / "coref.json").read_text())
    assert [c["name"] for c in saved["checks"]] == [c["name"] for c in result["checks"]]
    assert saved["verdict"] == ev.verdict_of([ev.Check(**{**c, "ci": tuple(c["ci"])})
                                              for c in saved["checks"]])  # fmt: skip
    assert "it (... too tired)" in (tmp_path / "coref.html").read_text()
    assert (tmp_path / "coref-famous.png").read_bytes()[:4] == b"\x89PNG"
    assert any(line.startswith("verdict: ") for line in lines)
