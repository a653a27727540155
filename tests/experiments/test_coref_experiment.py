"""``attnkit experiment coref``: the gendered tags and their minimal pairs, the tensors, the
head measurements on hand-made weights, the head ablation against a layer recomputed by hand
(float64), early stopping, the checks on synthetic numbers (all three outcomes), bad
settings, and the quick run's files."""

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from _refusals import refused

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
from attnkit.experiments.coref.checks import ABLATION_NAME, COIN, FOLLOWS_NAME, judge
from attnkit.experiments.coref.data import TAGS, encode
from attnkit.experiments.coref.jobs import ablation_of
from attnkit.experiments.coref.measure import best_head, keys_of, margin, masses, pair_rates
from attnkit.experiments.coref.models import ablated, build, fit, zero_head
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


def test_encode_tags_the_pronoun_and_marks_the_phrases() -> None:
    a = sentence(FAMOUS[0], "", ("young", ""))  # the young animal ... the street
    b = sentence(FAMOUS[1])
    batch = encode([a, b])
    assert batch.src.shape == (2, 12) and batch.lengths.tolist() == [12, 11]
    assert int(batch.src[1, -1]) == 0  # padding
    assert [TAGS[t] for t in batch.tag.tolist()] == ["il", "elle"]  # animal m, rue f
    assert batch.pronoun.tolist() == [a.pronoun, b.pronoun] == [8, 7]
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
    r, o = masses(w, *keys_of("phrase", batch))  # (B, L, H)
    assert torch.allclose(r[:, 0, 0], torch.tensor([0.4, 0.8]))
    assert torch.allclose(o[:, 0, 0], torch.tensor([0.4, 0.2]))
    assert torch.allclose(r[:, 0, 1], torch.tensor([1.0, 0.0]))
    rn, on = masses(w, *keys_of("noun", batch))
    assert torch.allclose(rn[:, 0, 0], torch.tensor([0.3, 0.6]))
    assert torch.allclose(on[:, 0, 0], torch.tensor([0.35, 0.1]))
    q, right, _ = keys_of("noun", batch)
    assert right[0].nonzero().flatten().tolist() == [1] and q.tolist() == [7, 7]
    with pytest.raises(ValueError, match="unknown span"):
        keys_of("article", batch)


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


def test_the_margin_is_zero_for_every_head_that_ignores_the_referent() -> None:
    """margin = follows − anti-follows: 1 for a head that always follows, −1 for one always
    on the other noun, and 0 in expectation for a coin, for a head that always picks the
    first noun, and for one that picks the first noun in 90% of sentences at random: their
    choices do not depend on the referent, whatever their flip rates (a coin flips 50%,
    the first-noun head never). The 25% line of an earlier design failed the 90% head
    (follows 9%) and the first-noun head, and asked a coin for more than chance."""
    g = torch.Generator().manual_seed(0)
    n = 40000
    first = torch.rand(2 * n, generator=g) < 0.9  # picks noun 1 in 90% of sentences
    ref_is_first = torch.arange(2 * n) % 2 == 0  # the referent is noun 1 in a, noun 2 in b
    heads = torch.stack([
        torch.ones(2 * n, dtype=torch.bool),  # always the referent
        ~torch.ones(2 * n, dtype=torch.bool),  # always the other noun
        torch.rand(2 * n, generator=g) < 0.5,  # a coin
        ref_is_first,  # always noun 1: right in a, wrong in b
        first == ref_is_first,  # noun 1 in 90%, by chance
    ], dim=-1)[:, None, :]  # (2N, 1, 5): True = top noun is the referent
    follows, flips = pair_rates(heads)
    m = margin(follows, flips)[0]
    assert m[0] == 1.0 and m[1] == -1.0
    assert m[2:].abs().max() < 0.02, m
    assert follows[0, 4] < 0.12 and flips[0, 3] == 0.0  # under the old line, "not following"


def _tagger(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build(dim=8, heads=2, layers=2, ff=16).double().eval()


def _layer_by_hand(layer: torch.nn.Module, x: torch.Tensor, lengths: torch.Tensor,
                   heads: int, zero: int | None) -> torch.Tensor:  # fmt: skip
    """One pre-norm encoder layer from Vaswani et al. (2017)'s equations, written apart from
    attnkit: x + MultiHead(LN(x)), then + FFN(LN(.)); head ``zero``'s output removed from
    the concatenation before W^O."""
    b, s, d = x.shape
    dh = d // heads
    a = layer.attn
    h = F.layer_norm(x, (d,), layer.res1.norm.weight, layer.res1.norm.bias)
    q, k, v = (F.linear(h, p.weight, p.bias).view(b, s, heads, dh).transpose(1, 2)
               for p in (a.q_proj, a.k_proj, a.v_proj))  # (B, H, S, Dh) each
    scores = q @ k.transpose(-1, -2) / math.sqrt(dh)  # (B, H, S, S)
    real = torch.arange(s)[None, :] < lengths[:, None]  # (B, S) keys that may be attended
    scores = scores.masked_fill(~real[:, None, None, :], float("-inf"))
    ctx = scores.softmax(-1) @ v  # (B, H, S, Dh)
    heads_out = [ctx[:, i] if i != zero else torch.zeros_like(ctx[:, i]) for i in range(heads)]
    y = x + F.linear(torch.cat(heads_out, dim=-1), a.out_proj.weight, a.out_proj.bias)
    g = F.layer_norm(y, (d,), layer.res2.norm.weight, layer.res2.norm.bias)
    return y + layer.ffn.w2(F.relu(layer.ffn.w1(g)))


def test_zeroing_a_head_equals_the_layer_recomputed_without_that_head() -> None:
    """float64: under ``ablated(model, l, h)`` layer l's output equals the layer recomputed by
    hand with head h's output removed; it differs from the intact layer, and the hook is gone
    after the block."""
    model = _tagger()
    batch = encode([sentence(FAMOUS[0], "sadly ,", ("young", "")), sentence(FAMOUS[1])])
    seen: dict[str, torch.Tensor] = {}

    def keep(_: torch.nn.Module, args: tuple, out: tuple) -> None:
        seen["in"], seen["out"] = args[0], out[0]

    for layer in range(2):
        handle = model.layers[layer].register_forward_hook(keep)
        intact, _ = model(batch.src, batch.lengths, batch.pronoun)
        x, out_intact = seen["in"], seen["out"]
        for head in range(2):
            with ablated(model, layer, head):
                logits, _ = model(batch.src, batch.lengths, batch.pronoun)
            real = torch.arange(x.shape[1])[None, :] < batch.lengths[:, None]  # (B, S)
            by_hand = _layer_by_hand(model.layers[layer], x, batch.lengths, 2, head)
            assert torch.allclose(seen["out"][real], by_hand[real], atol=1e-12)
            assert not torch.allclose(seen["out"][real], out_intact[real], atol=1e-6)
            assert not torch.allclose(logits, intact, atol=1e-9)
        again, _ = model(batch.src, batch.lengths, batch.pronoun)
        assert torch.equal(again, intact)  # the hook was removed
        intact_by_hand = _layer_by_hand(model.layers[layer], x, batch.lengths, 2, None)
        assert torch.allclose(out_intact[real], intact_by_hand[real], atol=1e-12)
        handle.remove()
    with pytest.raises(ValueError, match="0 <= head < 2"):
        zero_head(torch.zeros(3, 8), 2, 2)
    with pytest.raises(ValueError, match="layers 0 to 1"), ablated(model, 2, 0):
        pass


def test_zero_head_zeroes_exactly_that_heads_columns() -> None:
    ctx = torch.arange(1.0, 13.0).view(1, 12)  # 3 heads of width 4
    out = zero_head(ctx, 1, 3)
    assert out[0, :4].tolist() == ctx[0, :4].tolist() and out[0, 8:].tolist() == ctx[0, 8:].tolist()
    assert out[0, 4:8].tolist() == [0.0] * 4


def test_fit_stops_on_the_plateau_and_marks_a_run_the_cap_cut() -> None:
    """With lr 0 the validation loss never falls after the first validation: the run stops
    after ``patience`` more, on its plateau; with a cap before that, it is censored."""
    items = pair_items(noun_pairs()[:2], ("",))
    batch = lambda step: encode(items[step % 4 :: 4])  # noqa: E731
    valid = [encode(items[:8])]
    model = build(dim=8, heads=2, layers=1, ff=8)
    run = fit(model, batch, valid, steps=100, eval_every=3, patience=2, lr=0.0, seed=0)
    assert (run["stop"], run["best"], run["censored"]) == (9, 3, False)
    assert [c[0] for c in run["curve"]] == [3, 6, 9]
    run = fit(model, batch, valid, steps=5, eval_every=3, patience=2, lr=0.0, seed=0)
    assert (run["stop"], run["censored"]) == (5, True)
    run = fit(model, batch, valid, steps=30, eval_every=3, patience=2, lr=3e-2, seed=0)
    losses = [c[1] for c in run["curve"]]
    assert run["best"] == run["curve"][losses.index(min(losses))][0]


def test_the_ablation_compares_the_chosen_head_with_the_rest_of_its_layer() -> None:
    zeroed = [[0.9, 0.5, 0.8, 0.7], [0.1, 0.1, 0.1, 0.1]]
    a = ablation_of([0, 1], 0.95, zeroed)
    assert a["zeroed"] == 0.5 and a["others_zeroed"] == pytest.approx(0.8)
    assert a["cost"] == pytest.approx(0.45) and a["gap"] == pytest.approx(0.3)
    with pytest.raises(ValueError, match="--heads 2 or more"):
        ablation_of([0, 0], 0.9, [[0.5]])


def numbers(**over: object) -> dict:
    """Per-seed numbers of a run where a head follows the referent far above chance and
    zeroing it costs far more than another head; the untrained control at its floor."""
    base = dict(
        accuracy=[0.92, 0.95, 0.90, 0.94, 0.93], margin=[0.70, 0.80, 0.60, 0.85, 0.75],
        follows=[0.80, 0.85, 0.75, 0.90, 0.82],
        zeroed=[0.60, 0.65, 0.55, 0.70, 0.62], others_zeroed=[0.91, 0.94, 0.90, 0.93, 0.92],
        stops=[1200, 1400, 1000, 1600, 1200], censored=[False] * 5, cap=6000,
        control_accuracy=[0.5, 0.49, 0.51, 0.5, 0.5], control_follows=[0.0, 0.01, 0.0, 0.0, 0.0],
    )  # fmt: skip
    return {**base, **over}


def test_a_head_far_above_chance_with_a_costly_ablation_is_reproduced() -> None:
    checks = judge(numbers())
    assert ev.verdict_of(checks) == ev.REPRODUCED
    assert [c.kind for c in checks] == ["design"] * 4 + ["claim"] * 2
    assert COIN == 0.25  # reported: a coin per sentence, for both sentences of a pair
    follows = next(c for c in checks if c.name == FOLLOWS_NAME)
    assert follows.threshold == 0.0 and follows.value == pytest.approx(0.74)  # the margin


def test_the_control_at_its_floor_does_not_withhold_the_verdict() -> None:
    """The untrained control is reported, not a compared arm: at chance accuracy and no head
    following, or absent, the checks are the same."""
    floor = judge(numbers(control_accuracy=[0.5] * 5, control_follows=[0.0] * 5))
    bare = {k: v for k, v in numbers().items() if not k.startswith("control")}
    assert floor == judge(bare) == judge(numbers())
    assert ev.verdict_of(floor) == ev.REPRODUCED


def test_a_head_at_chance_is_not_reproduced_or_inconclusive_as_its_interval_says() -> None:
    v = ev.verdict_of(judge(numbers(margin=[-0.05, 0.07, -0.01, 0.04, -0.04])))  # holds 0
    assert v.startswith("INCONCLUSIVE: ") and FOLLOWS_NAME in v and "holds both" in v
    v = ev.verdict_of(judge(numbers(margin=[-0.1, -0.05, -0.12, -0.08, -0.02])))  # below
    assert v.startswith("NOT REPRODUCED: ") and FOLLOWS_NAME in v
    # the follows rate itself is reported: below a coin's 25%, the margin still decides
    v = ev.verdict_of(judge(numbers(follows=[0.10, 0.12, 0.09, 0.15, 0.11])))
    assert v == ev.REPRODUCED


def test_an_ablation_that_costs_no_more_than_another_head_is_not_reproduced() -> None:
    same = numbers(zeroed=[0.91, 0.93, 0.91, 0.92, 0.93])  # gaps 0, .01, -.01, .01, -.01
    v = ev.verdict_of(judge(same))
    assert v.startswith("INCONCLUSIVE: ") and ABLATION_NAME in v
    cheaper = numbers(zeroed=[0.95, 0.97, 0.94, 0.96, 0.95])  # the chosen head costs less
    v = ev.verdict_of(judge(cheaper))
    assert v.startswith("NOT REPRODUCED: ") and ABLATION_NAME in v


def test_design_checks_withhold_the_verdict() -> None:
    none = dict(margin=[0.0] * 5, follows=[0.0] * 5, zeroed=[0.5] * 5, others_zeroed=[0.5] * 5)
    v = ev.verdict_of(judge(numbers(accuracy=[0.55, 0.6, 0.5, 0.58, 0.62], **none)))
    assert v.startswith("INCONCLUSIVE: ") and "not learned" in v  # never NOT REPRODUCED
    v = ev.verdict_of(judge(numbers(zeroed=[1.0] * 5, others_zeroed=[1.0] * 5)))
    assert v.startswith("INCONCLUSIVE: ") and "every arm at the ceiling" in v
    v = ev.verdict_of(judge(numbers(stops=[2400, 2600, 2000, 6000, 2600], censored=[False] * 3
                                    + [True, False])))  # fmt: skip
    assert v.startswith("INCONCLUSIVE: ") and "1 of 5 runs censored" in v


def test_the_committed_run_is_the_earlier_designs_and_the_page_says_so() -> None:
    """docs/experiments/coref.{md,json}: the committed run trained the earlier design (an
    encoder-decoder); the page marks its result as that design's and quotes its verdict."""
    docs = Path(__file__).parents[2] / "docs" / "experiments"
    result = json.loads((docs / "coref-v1.json").read_text())
    assert "dec_layers" in result["config"] and "layers" not in result["config"]
    page = (docs / "coref.md").read_text()
    assert "## Result of the earlier design (an encoder–decoder, seeds 0–5)" in page
    assert f"verdict: {result['verdict']}" in page


def assert_page_quotes_claims(result: dict, page: str) -> None:
    """Every claim check of ``result`` stands in ``page`` as "| value | [lo, hi] |" (three
    decimals, a minus sign for negatives)."""
    for c in (c for c in result["checks"] if c["kind"] == "claim"):
        lo, hi = (f"{x:.3f}".replace("-", "−") for x in c["ci"])
        assert f"| {c['value']:.3f} | [{lo}, {hi}] |" in page, c["name"]


def test_the_current_designs_run_reads_as_its_page_says() -> None:
    """docs/experiments/coref.json: the default run of the margin design (seeds 0-15); the
    page quotes its claim intervals and verdict, and the run judged again by today's checks
    is the same."""
    docs = Path(__file__).parents[2] / "docs" / "experiments"
    result = json.loads((docs / "coref.json").read_text())
    assert result["config"]["seeds"] == 16 == CorefConfig().seeds
    assert result["config"]["layers"] == 6 and result["config"]["min_delta"] == 0.001
    assert "margin" in result["per_seed"] and rejudge(result)["checks"] == result["checks"]
    page = (docs / "coref.md").read_text()
    head = next(h for h in ("NOT REPRODUCED", "REPRODUCED", "INCONCLUSIVE")
                if result["verdict"].startswith(h))  # fmt: skip
    assert f"| verdict | | **{head}** (the default run" in page
    assert_page_quotes_claims(result, page)


@pytest.mark.parametrize("name", ["coref-follows.json", "coref-fresh-500.json"])
def test_the_follows_rate_runs_are_kept_and_the_page_quotes_them(name: str) -> None:
    """The runs of the earlier check (the follows rate against a coin's 25%, 6 seeds): kept
    beside the page, which quotes their claim intervals."""
    docs = Path(__file__).parents[2] / "docs" / "experiments"
    result = json.loads((docs / name).read_text())
    assert result["config"]["seeds"] == 6 and "margin" not in result["per_seed"]
    assert result["verdict"].startswith("INCONCLUSIVE: chosen head: top noun")
    page = (docs / "coref.md").read_text()
    assert_page_quotes_claims(result, page)


test_bad_settings_fail_clearly = refused(CorefConfig, [
    ({"seeds": 1}, "--seeds"),
    ({"heads": 1, "dim": 8}, "--heads 1"),
    ({"dim": 30, "heads": 4}, "divisible"),
    ({"lr": 0.0}, "--lr"),
    ({"test_fraction": 1.0}, "--test-fraction"),
    ({"valid_fraction": 0.5, "test_fraction": 0.5}, "leave some"),
    ({"batch_size": 0}, "--batch-size"),
    ({"patience": 0}, "--patience"),
    ({"eval_every": 0}, "--eval-every"),
    ({"openers": 6}, "--openers"),
    ({"fillers": 7}, "--fillers"),
])


def test_quick_run_writes_the_tables_maps_and_checks(tmp_path: Path) -> None:
    cfg = CorefConfig(**QUICK)
    result = run_experiment(cfg, tmp_path, say=lambda _: None)
    lines: list[str] = []
    report(result, tmp_path, say=lines.append)
    first = result["seeds"][0]
    (l, h) = first["chosen"]["head"]
    for f, (adj, noun) in zip(first["famous"], (("tired", "animal"), ("wide", "street")),
                              strict=True):  # fmt: skip
        assert f["tokens"][-1] == adj and f["tokens"][f["referent"]] == noun
        row = f["weights"][l][h][f["pronoun"]]
        assert f["right_noun"] == pytest.approx(row[f["referent"]], abs=1e-4)
        assert f["right"] == pytest.approx(row[f["referent"] - 1] + row[f["referent"]], abs=1e-3)
    a = first["ablation"]
    assert a["zeroed"] == first["zeroed"][l][h]
    assert first["training"]["stop"] <= cfg.steps and result["per_seed"]["cap"] == cfg.steps
    rows = (tmp_path / "coref.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + cfg.seeds * cfg.layers * cfg.heads
    saved = json.loads((tmp_path / "coref.json").read_text())
    assert [c["name"] for c in saved["checks"]] == [c["name"] for c in result["checks"]]
    assert saved["verdict"] == ev.verdict_of([ev.Check(**{**c, "ci": tuple(c["ci"])})
                                              for c in saved["checks"]])  # fmt: skip
    assert rejudge(saved)["checks"] == saved["checks"]
    assert "it (... too tired)" in (tmp_path / "coref.html").read_text()
    assert (tmp_path / "coref-famous.png").read_bytes()[:4] == b"\x89PNG"
    assert any(line.startswith("verdict: ") for line in lines)


def test_fit_calls_a_loss_that_creeps_by_less_than_min_delta_a_plateau(monkeypatch) -> None:
    """A validation loss that keeps falling by a millionth each time never stops a run on
    "a lower loss" alone; with ``min_delta`` it stops ``patience`` validations after the last
    real gain, and keeps the weights of the lowest loss all the same."""
    from attnkit.experiments.coref import models as coref_models

    items = pair_items(noun_pairs()[:2], ("",))
    batch = lambda step: encode(items[step % 4 :: 4])  # noqa: E731
    model = build(dim=8, heads=2, layers=1, ff=8)
    losses = iter([1.0, 0.5] + [0.5 - 1e-6 * k for k in range(1, 100)])
    monkeypatch.setattr(coref_models, "valid_loss", lambda m, v: next(losses))
    run = fit(model, batch, [], steps=300, eval_every=3, patience=2, lr=0.0, seed=0,
              min_delta=1e-3)  # fmt: skip
    assert (run["stop"], run["best"], run["censored"]) == (12, 12, False)
    losses = iter([1.0, 0.5] + [0.5 - 1e-6 * k for k in range(1, 100)])
    run = fit(model, batch, [], steps=30, eval_every=3, patience=2, lr=0.0, seed=0)
    assert (run["stop"], run["censored"]) == (30, True)


def test_the_cap_is_three_median_stops_on_the_calibration_seeds_under_min_delta() -> None:
    """Seeds 300-305 (coref-fresh.json, run with min_delta 0) are the calibration of the
    stopping rule: their validation loss fell to zero and crept by millionths for thousands
    of updates. Replayed on their committed curves, the default rule (patience, min_delta)
    stops every one of them, and the default cap is at least 3x the median stop."""
    cfg = CorefConfig()
    doc = Path(__file__).parents[2] / "docs" / "experiments" / "coref-fresh.json"
    cal = json.loads(doc.read_text())
    assert cal["config"]["seed"] != cfg.seed and "min_delta" not in cal["updates"]
    stops = []
    for seed in cal["seeds"]:
        gain, since = math.inf, 0
        for step, loss in seed["training"]["curve"]:
            gain, since = (loss, 0) if loss < gain - cfg.min_delta else (gain, since + 1)
            if since == cfg.patience:
                stops.append(step)
                break
    assert len(stops) == len(cal["seeds"]) == 6
    stops.sort()
    assert cfg.steps >= 3 * (stops[2] + stops[3]) / 2, stops


def test_the_fresh_seeds_run_reads_as_its_page_says() -> None:
    """docs/experiments/coref-fresh-700.json: seeds never run before, under the margin
    design; the page quotes its claim intervals, and every design check passed."""
    docs = Path(__file__).parents[2] / "docs" / "experiments"
    result = json.loads((docs / "coref-fresh-700.json").read_text())
    assert result["config"]["seed"] == 700 and result["config"]["seeds"] == 16
    assert all(c["outcome"] == "pass" for c in result["checks"] if c["kind"] == "design")
    assert rejudge(result)["checks"] == result["checks"]
    page = (docs / "coref.md").read_text()
    assert_page_quotes_claims(result, page)


def test_the_head_is_chosen_on_validation_by_its_margin_and_read_on_test() -> None:
    """jobs.chosen: the head with the largest validation margin (2·follows − flips), not the
    largest follows rate: head (0, 1) follows more often but flips more, the wrong way as
    often; head (1, 0) has the larger margin. Its test numbers are read, not re-chosen."""
    from attnkit.experiments.coref.jobs import chosen

    valid = {"follows": [[0.1, 0.40], [0.30, 0.0]], "flips": [[0.2, 0.75], [0.35, 0.0]],
             "follows_noun": [[0.0, 0.0], [0.0, 0.0]]}  # margins 0.0, 0.05 / 0.25, 0.0
    test = {"follows": [[0.2, 0.5], [0.1, 0.9]], "flips": [[0.2, 0.5], [0.4, 0.9]],
            "follows_noun": [[0.0, 0.0], [0.05, 0.0]]}  # fmt: skip
    pick = chosen(valid, test)
    assert pick["head"] == [1, 0] and pick["valid"] == pytest.approx(0.25)
    assert pick["margin"] == pytest.approx(-0.2) and pick["follows"] == 0.1
