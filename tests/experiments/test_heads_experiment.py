"""``attnkit experiment heads``: the Jensen–Shannon divergence against hand-computed values;
corpus BLEU from sentence statistics against sacrebleu; the paired bootstrap; the plateau
rule; the checks and verdicts on synthetic runs (reproduced, not reproduced on either half,
inconclusive on a ceiling, on a straddling interval, on a capped run, on a task not learnt);
the configs and jobs (only h differs, the same early stopping, Multi30K skipped when
absent); one tiny model's measures against independent computations (sacrebleu,
attention_aer, cross-entropy by hand, cross_attention one sentence at a time)."""

import gzip
import math
import random
import statistics
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch
from _refusals import refused

from attnkit.data.example import Example
from attnkit.experiments import evidence as ev
from attnkit.experiments.heads import QUICK, HeadsConfig, judge_settings, trend_settings
from attnkit.experiments.heads import jobs as heads_jobs
from attnkit.experiments.heads.bleu import corpus_bleu, paired_bleu_bootstrap, sentence_stats
from attnkit.experiments.heads.checks import best_by_valid, family, judge
from attnkit.experiments.heads.jobs import fit_config, make_jobs, multi30k_subset, toy_ko_data
from attnkit.experiments.heads.measure import (
    example_index,
    js_divergence,
    mean_pairwise_js,
    measure,
    pairwise_js,
    plateau,
)
from attnkit.experiments.pool import fit_logged

LN2 = math.log(2)


def t(rows: list) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def _kl(p: list[float], m: list[float]) -> float:
    """KL(P ‖ M) in nats, written out (0 log 0 = 0)."""
    return sum(x * math.log(x / y) for x, y in zip(p, m, strict=True) if x > 0)


def test_js_divergence_hand_computed() -> None:
    # disjoint supports: M = (½, ½), KL(P‖M) = KL(Q‖M) = ln 2
    assert float(js_divergence(t([1, 0]), t([0, 1]))) == pytest.approx(LN2)
    # P = (½, ½), Q = (1, 0): M = (¾, ¼); KL(P‖M) = ½ ln(4/3), KL(Q‖M) = ln(4/3)
    assert float(js_divergence(t([0.5, 0.5]), t([1, 0]))) == pytest.approx(0.75 * math.log(4 / 3))
    assert float(js_divergence(t([1, 0]), t([0.5, 0.5]))) == pytest.approx(0.75 * math.log(4 / 3))
    assert float(js_divergence(t([0.2, 0.3, 0.5]), t([0.2, 0.3, 0.5]))) == 0.0
    # batched over leading dims
    got = js_divergence(t([[1, 0], [0.5, 0.5]]), t([[0, 1], [0.5, 0.5]]))
    assert got.tolist() == pytest.approx([LN2, 0.0])


def test_pairwise_js_averages_head_pairs_per_row() -> None:
    heads = t([[[1, 0]], [[0, 1]], [[2, 0]]])  # (H=3, T=1, S=2); head 2 renormalised to (1, 0)
    # pairs (0,1) ln 2, (0,2) 0, (1,2) ln 2
    assert pairwise_js(heads).tolist() == pytest.approx([2 / 3 * LN2])
    assert math.isnan(float(pairwise_js(t([[[0.3, 0.7]]]))[0]))  # one head: no pair


def test_mean_pairwise_js_counts_every_row_once() -> None:
    a = t([[[1, 0]], [[0, 1]]])  # one row, JS ln 2
    b = t([[[1, 0], [0.5, 0.5]], [[1, 0], [0.5, 0.5]]])  # two rows, JS 0
    assert mean_pairwise_js([a, b]) == pytest.approx(LN2 / 3)


def test_example_index_prefers_links_then_length() -> None:
    ex = [
        Example(["a"] * 9, ["x"], [(0, 0)]),
        Example(["a"] * 3, ["x", "y"], [(0, 0), (1, 1)]),
        Example(["a"] * 5, ["x", "y"], [(0, 0), (1, 1)]),
    ]
    assert example_index(ex) == 2


def _sacrebleu(hyps: list[list[str]], refs: list[list[str]]) -> float:
    import sacrebleu

    return float(
        sacrebleu.corpus_bleu(
            [" ".join(h) for h in hyps], [[" ".join(r) for r in refs]], tokenize="none"
        ).score
    )


def test_corpus_bleu_from_sentence_stats_is_sacrebleu() -> None:
    """Random small corpora, with empty hypotheses, no matches and missing n-gram orders:
    BLEU from summed statistics equals sacrebleu's corpus BLEU (its smoothing included)."""
    rng = random.Random(0)
    for _ in range(400):
        n = rng.randint(1, 6)
        hyps = [[str(rng.randrange(4)) for _ in range(rng.randint(0, 7))] for _ in range(n)]
        refs = [[str(rng.randrange(4)) for _ in range(rng.randint(1, 7))] for _ in range(n)]
        stats = np.array([sentence_stats(h, r) for h, r in zip(hyps, refs, strict=True)])
        assert float(corpus_bleu(stats.sum(0))) == pytest.approx(_sacrebleu(hyps, refs), abs=1e-9)
    assert sentence_stats(["a", "a", "b"], ["a", "b", "b"]) == [3, 3, 2, 1, 0, 0, 3, 2, 1, 0]


def _arm(refs: list[list[str]], wrong: float, seed: int) -> np.ndarray:
    """Statistics of hypotheses that are the references with a fraction ``wrong`` of words
    replaced."""
    rng = random.Random(seed)
    hyps = [[w if rng.random() >= wrong else "zz" for w in r] for r in refs]
    return np.array([sentence_stats(h, r) for h, r in zip(hyps, refs, strict=True)])


def _refs(seed: int, n: int = 60) -> list[list[str]]:
    rng = random.Random(seed)
    return [[f"w{rng.randrange(30)}" for _ in range(rng.randint(5, 12))] for _ in range(n)]


def test_paired_bootstrap_of_bleu() -> None:
    refs = [_refs(s) for s in range(3)]
    same = [_arm(r, 0.2, s) for s, r in enumerate(refs)]
    zero = paired_bleu_bootstrap(same, same, resamples=200)
    assert (zero.value, zero.lo, zero.hi, zero.n) == (0.0, 0.0, 0.0, 3)  # paired: no spread
    good = [_arm(r, 0.05, 10 + s) for s, r in enumerate(refs)]
    bad = [_arm(r, 0.4, 20 + s) for s, r in enumerate(refs)]
    gap = paired_bleu_bootstrap(good, bad, resamples=300)
    want = np.mean(
        [corpus_bleu(g.sum(0)) - corpus_bleu(b.sum(0)) for g, b in zip(good, bad, strict=True)]
    )
    assert gap.value == pytest.approx(want) and gap.lo > 10 and gap.lo < gap.value < gap.hi
    back = paired_bleu_bootstrap(bad, good, resamples=300)
    assert back.value == pytest.approx(-gap.value) and back.hi < -10
    assert paired_bleu_bootstrap(good, bad, resamples=300) == gap  # seeded: the same interval
    with pytest.raises(ValueError, match="same seeds"):
        paired_bleu_bootstrap(good, bad[:2])
    with pytest.raises(ValueError, match="statistics for both arms"):
        paired_bleu_bootstrap(good, [b[:10] for b in bad])


def test_plateau_rule() -> None:
    assert plateau(10, 7, 3) and plateau(10, 6, 3)  # 3 (4) epochs after the best: stopped
    assert not plateau(10, 8, 3)  # cut by a cap of 10 two epochs after a new best
    assert not plateau(10, 10, 3)


def _runs(bleu: dict[int, float], *, seeds: int = 5, valid: dict[int, float] | None = None,
          capped: tuple[int, ...] = (), epochs: int = 20, task: str = "toy-ko"
          ) -> list[dict]:  # fmt: skip
    """Synthetic runs: arm h scores ``bleu[h]`` plus a seed effect shared by every arm (±3)
    and a small jitter of its own (±0.6), so that paired gaps are tight; its valid
    perplexity is ``valid[h]`` (default: 100 - bleu[h], the best on test is the best on
    validation); the arms in ``capped`` hit the cap in every seed."""
    out = []
    for s in range(seeds):
        for h, b in bleu.items():
            score = b + 3.0 * ((s % 3) - 1) + 0.3 * ((7 * s + h) % 5 - 2)
            out.append({
                "task": task, "heads": h, "seed": s, "bleu": min(max(score, 0.0), 100.0),
                "valid_ppl": (valid or {}).get(h, 100.0 - b), "epochs": epochs,
                "plateau": h not in capped,
            })  # fmt: skip
    return out


def _judge(runs: list[dict], *, seeds: int = 5, d_k_min: int = 16, cap: int = 150
           ) -> tuple[list[ev.Check], list[ev.Check]]:  # fmt: skip
    return judge(runs[0]["task"], runs, seeds=seeds, d_k_min=d_k_min, cap=cap)


def _claims(checks: list[ev.Check]) -> list[str]:
    return [c.outcome for c in checks if c.kind == "claim"]


def test_reproduced_when_both_ends_are_worse() -> None:
    kept, reported = _judge(_runs({1: 60.0, 2: 70.0, 4: 75.0, 8: 65.0}))
    assert [c.outcome for c in kept] == ["pass"] * len(kept)
    assert ev.verdict_of(kept) == ev.REPRODUCED
    names = [c.name for c in kept if c.kind == "claim"]
    assert names == ["toy-ko: (i) BLEU of best h=4 minus h=1",
                     "toy-ko: (ii) BLEU of best h=4 minus largest h=8"]  # fmt: skip
    gap = next(c for c in kept if c.name == names[0])
    # the t-interval over the per-seed gaps, written out: mean ± t_{4, 0.975} s / √5
    runs = _runs({1: 60.0, 2: 70.0, 4: 75.0, 8: 65.0})
    by = {(r["heads"], r["seed"]): r["bleu"] for r in runs}
    gaps = [by[4, s] - by[1, s] for s in range(5)]
    half = 2.7764451051977987 * statistics.stdev(gaps) / math.sqrt(5)
    assert gap.value == pytest.approx(statistics.fmean(gaps))
    assert gap.ci == pytest.approx((gap.value - half, gap.value + half))
    # h = 2 is not compared: its design checks are reported, not in the verdict
    assert {c.name for c in reported} == {"toy-ko: h=2 converged",
        "toy-ko: cap >= 3x median stop (h=2)", "toy-ko: h=2 off the floor (test BLEU)"}  # fmt: skip


def test_each_half_fails_alone() -> None:
    one_best, _ = _judge(_runs({1: 80.0, 2: 70.0, 4: 72.0, 8: 60.0}))
    assert _claims(one_best) == ["fail", "pass"]
    assert ev.verdict_of(one_best).startswith("NOT REPRODUCED: toy-ko: (i)")
    many_best, _ = _judge(_runs({1: 60.0, 2: 65.0, 4: 70.0, 8: 80.0}))
    assert _claims(many_best) == ["pass", "fail"]
    assert ev.exit_code(ev.verdict_of(many_best)) == 1


def test_the_best_h_is_chosen_on_validation_not_test() -> None:
    # h=4 has the lowest valid perplexity but translates worse than h=2 on test: (i) and (ii)
    # compare h=4, whatever the test numbers say
    runs = _runs({1: 60.0, 2: 80.0, 4: 70.0, 16: 60.0}, valid={1: 5.0, 2: 3.0, 4: 2.0, 16: 5.0})
    assert best_by_valid(runs, exclude=1) == 4 and best_by_valid(runs, exclude=16) == 4
    kept, _ = _judge(runs)
    assert [c.name for c in kept if c.kind == "claim"] == [
        "toy-ko: (i) BLEU of best h=4 minus h=1",
        "toy-ko: (ii) BLEU of best h=4 minus largest h=16",
    ]
    tie = [{"heads": h, "valid_ppl": 2.0} for h in (1, 4, 16)]
    assert best_by_valid(tie, exclude=1) == 4  # ties: the smaller h


def test_inconclusive_on_a_ceiling_or_a_straddling_interval() -> None:
    top, _ = _judge(_runs({1: 96.0, 2: 98.0, 4: 100.0, 8: 98.0}))  # h=4: mean 98.74
    assert ev.verdict_of(top).startswith("INCONCLUSIVE: toy-ko: best compared arm below the "
                                         "ceiling: best compared arm 98.7")  # fmt: skip
    assert ev.exit_code(ev.verdict_of(top)) == 2
    # the same mean for h = 1 and the best other: the per-seed jitter alone, a gap about 0
    level, _ = _judge(_runs({1: 70.0, 2: 60.0, 4: 70.0, 8: 60.0}, valid={2: 50.0, 4: 20.0}))
    gap = next(c for c in level if ": (i) " in c.name)
    assert gap.outcome == "inconclusive" and gap.ci[0] < 0 < gap.ci[1]
    assert ev.verdict_of(level).startswith("INCONCLUSIVE: toy-ko: (i)")


def test_design_checks_look_only_at_the_compared_arms_per_setting() -> None:
    """A non-compared arm at the floor, censored or stopped early against its cap does not
    withhold the verdict (it is reported); a compared arm at chance, censored, or whose cap is
    under 3x its median stop does, in its own setting only."""
    # h = 2 is neither h = 1, the best other (h = 4) nor the largest (h = 8); it learnt nothing
    floor = _runs({1: 60.0, 2: 0.0, 4: 75.0, 8: 65.0}, valid={2: 99.0})
    kept, reported = _judge(floor)
    assert ev.verdict_of(kept) == ev.REPRODUCED
    at_floor = next(c for c in reported if c.name == "toy-ko: h=2 off the floor (test BLEU)")
    assert at_floor.outcome == ev.INCONCLUSIVE and "not compared" in at_floor.reason
    # ... and censored in every seed: still reported only
    kept, reported = _judge(_runs({1: 60.0, 2: 0.0, 4: 75.0, 8: 65.0}, valid={2: 99.0},
                                  capped=(2,)))  # fmt: skip
    assert ev.verdict_of(kept) == ev.REPRODUCED
    assert any("censored" in c.reason and "h=2 seed 0" in c.reason for c in reported)
    # the compared h = 1 at chance (BLEU 0): the gap to it says nothing about heads
    chance = _runs({1: 0.0, 2: 70.0, 4: 75.0, 8: 65.0}, task="multi30k")
    kept_m, _ = _judge(chance)
    assert ev.verdict_of(kept_m).startswith(
        "INCONCLUSIVE: multi30k: h=1 off the floor (test BLEU): mean test BLEU 0"
    )
    # a compared arm censored, or with its cap under 3x its median stop
    capped, _ = _judge(_runs({1: 60.0, 2: 70.0, 4: 75.0, 8: 65.0}, capped=(8,)))
    assert ev.verdict_of(capped).startswith("INCONCLUSIVE: toy-ko: h=8 converged")
    short, _ = _judge(_runs({1: 60.0, 2: 70.0, 4: 75.0, 8: 65.0}, epochs=60), cap=150)
    assert ev.verdict_of(short).startswith("INCONCLUSIVE: toy-ko: cap >= 3x median stop (h=1)")
    # per setting: the toy-ko setting keeps its verdict beside multi30k's withheld one
    good, _ = _judge(floor)
    assert ev.verdict_of(good) == ev.REPRODUCED
    assert ev.verdict_of(good + kept_m).startswith("INCONCLUSIVE: multi30k: h=1 off the floor")


def test_a_trend_setting_is_reported_not_checked(tmp_path: Path) -> None:
    """The default runs toy-ko at 500 pairs (checked) and 1000 (the trend with data): the
    1000-pair setting at the ceiling, or failing the claim, leaves the verdict to 500's."""
    cfg = HeadsConfig()
    assert sorted({j.task for j in make_jobs(cfg, tmp_path, print).values()}) == [
        "toy-ko-1000", "toy-ko-500"]  # fmt: skip
    assert trend_settings(cfg) == {"toy-ko-1000"}
    runs = _runs({1: 60.0, 2: 70.0, 4: 75.0, 8: 65.0}, task="toy-ko-500") + _runs(
        {1: 99.0, 2: 99.0, 4: 100.0, 8: 99.0}, task="toy-ko-1000")  # fmt: skip
    got = judge_settings(asdict(cfg), runs, trend_settings(cfg))
    assert got["verdict"] == ev.REPRODUCED and list(got["verdicts"]) == ["toy-ko-500"]
    assert got["trend_verdicts"]["toy-ko-1000"].startswith(
        "INCONCLUSIVE: toy-ko-1000: best compared arm below the ceiling"
    )
    assert not any(c["name"].startswith("toy-ko-1000") for c in got["checks"])
    assert any(c["name"].startswith("toy-ko-1000: (i)") for c in got["reported_checks"])
    # checked, the same 1000-pair setting withholds the verdict
    both = judge_settings(asdict(cfg), runs, set())
    assert both["verdict"].startswith("INCONCLUSIVE: toy-ko-1000: best compared arm below")
    with pytest.raises(ValueError, match="--toy-report '500': list distinct positive sizes not"):
        HeadsConfig(toy_report="500")


def test_seeds_and_the_narrow_heads_half() -> None:
    """Fewer than 5 seeds withholds a setting's verdict; half (ii) with the largest h's d_k
    below the paper's 16 is reported, not checked, and its arms are then not compared."""
    runs = _runs({1: 60.0, 4: 75.0, 16: 65.0})
    assert ev.verdict_of(_judge(runs)[0]) == ev.REPRODUCED
    few, _ = _judge(_runs({1: 60.0, 4: 75.0, 16: 65.0}, seeds=3), seeds=3)
    verdict = ev.verdict_of(few)
    assert verdict.startswith("INCONCLUSIVE: toy-ko: seeds for a check (at least 5): 3")
    assert "under-covers" in verdict
    # (ii) fails here (16 heads best on test), but at d_k = 4 it is only reported, and h = 16
    # (not compared then) at the floor withholds nothing
    many = _runs({1: 60.0, 4: 75.0, 16: 80.0}, valid={4: 20.0, 16: 25.0})
    kept, reported = _judge(many, d_k_min=4)
    assert [c.name for c in reported if c.kind == "claim"] == [
        "toy-ko: (ii) BLEU of best h=4 minus largest h=16"
    ]
    assert reported[-1].outcome == "fail" and "below the paper's smallest" in reported[-1].reason
    assert ev.verdict_of(kept) == ev.REPRODUCED  # (i) alone decides
    assert ev.verdict_of(_judge(many)[0]).startswith("NOT REPRODUCED: toy-ko: (ii)")
    with pytest.raises(ValueError, match="h = 1 and two more"):
        _judge(_runs({1: 60.0, 4: 70.0}))


def test_the_committed_run_reads_as_its_page_says() -> None:
    import json
    from pathlib import Path

    from attnkit.experiments.heads import rejudge

    docs = Path(__file__).parents[2] / "docs" / "experiments"
    result = json.loads((docs / "heads-v1.json").read_text())
    again = rejudge(result)
    assert again["verdicts"] == result["verdicts"] and again["verdict"] == result["verdict"]
    assert all(v.startswith("INCONCLUSIVE: ") for v in result["verdicts"].values())
    assert result["verdict_as_run"].startswith("NOT REPRODUCED: multi30k: (i)")
    assert len(result["reported_checks"]) == 2
    page = (docs / "heads.md").read_text()
    assert "| Multi30K, 2,000 pairs | −0.91 [−1.75, −0.08] (h = 4) |" in page
    by = {c["name"]: c for c in result["checks"]}
    gap = by["multi30k: (i) BLEU of best h=4 minus h=1"]  # a t-interval over the 3 seeds
    assert [round(x, 2) for x in gap["ci"]] == [-1.75, -0.08]
    assert by["toy-ko: cap >= 3x median stop (h=16)"]["outcome"] == ev.INCONCLUSIVE


def test_the_current_designs_run_reads_as_its_page_says() -> None:
    import json
    from pathlib import Path

    from attnkit.experiments.heads import rejudge

    docs = Path(__file__).parents[2] / "docs" / "experiments"
    result = json.loads((docs / "heads.json").read_text())
    again = rejudge(result)
    assert again["verdicts"] == result["verdicts"] and again["verdict"] == result["verdict"]
    assert result["verdict"].startswith("INCONCLUSIVE: toy-ko-500: (ii)")
    assert result["config"]["seeds"] == 10 == HeadsConfig().seeds
    by = {c["name"]: c for c in result["checks"]}
    gap = by["toy-ko-500: (i) BLEU of best h=8 minus h=1"]
    assert gap["outcome"] == ev.PASS and [round(x, 2) for x in gap["ci"]] == [5.19, 16.39]
    assert all(c["outcome"] == ev.PASS for c in result["checks"] if c["kind"] == "design")
    page = (docs / "heads.md").read_text()
    assert "**+10.79** [+5.19, +16.39]" in page and "−1.93 [−7.58, +3.72]" in page
    fresh = json.loads((docs / "heads-fresh-300.json").read_text())
    assert fresh["config"]["seed"] == 300 and fresh["config"]["seeds"] == 10
    assert rejudge(fresh)["verdict"] == fresh["verdict"]
    assert "(i) +8.62 [+4.62, +12.63], pass" in page
    earlier = json.loads((docs / "heads-5seeds.json").read_text())
    assert earlier["config"]["seeds"] == 5 and "+9.27" in page


def test_parameters_are_compared_between_the_arms_of_one_task_and_seed() -> None:
    """Each seed's generated text has its own vocabulary, so counts differ across seeds;
    the arms a check compares (every h of one task and seed) must agree."""
    import json
    from pathlib import Path

    from attnkit.experiments.heads import parameters_equal

    runs = [{"task": "t", "seed": s, "heads": h, "parameters": 1000 + 7 * s}
            for s in (0, 1) for h in (1, 2, 4)]  # fmt: skip
    assert parameters_equal(runs)
    runs[1]["parameters"] += 1  # h=2 of seed 0 unequal to its h=1 and h=4
    assert not parameters_equal(runs)
    docs = Path(__file__).parents[2] / "docs" / "experiments"
    for name in ("heads.json", "heads-fresh-300.json", "heads-5seeds.json"):
        result = json.loads((docs / name).read_text())
        assert result["parameters_equal"] is parameters_equal(result["runs"]) is True


test_bad_settings_fail_clearly = refused(HeadsConfig, [
    ({"heads": "2,4,8"}, "1 and at least two more"),
    ({"heads": "1,4"}, "1 and at least two more"),
    ({"heads": "1,2,2"}, "1 and at least two more"),
    ({"heads": "1,two"}, "comma-separated integers"),
    ({"dim": 40, "heads": "1,4,16"}, "divisible by every head count .*\\[16\\]"),
    ({"seeds": 1}, "--seeds 1: an interval"),
    ({"multi30k": -1}, "--multi30k -1"),
    ({"patience": 0}, "--patience 0"),
    ({"label_smoothing": 1.0}, "--label-smoothing 1.0"),
    ({"tasks": "wmt"}, "--tasks 'wmt'"),
    ({"toy_train": "500,500"}, "--toy-train '500,500': list distinct positive"),
    ({"toy_train": "0"}, "--toy-train '0'"),
])


def test_head_counts_are_sorted() -> None:
    assert HeadsConfig(heads="16,1,4").head_counts == [1, 4, 16]


def test_models_differ_only_in_heads_and_stop_early_alike(tmp_path: Path) -> None:
    cfg = HeadsConfig()
    data = toy_ko_data(cfg, 0)
    a = fit_config(cfg, 1, 0, data, tmp_path / "x").to_json()
    b = fit_config(cfg, 16, 0, data, tmp_path / "x").to_json()
    assert a["model"]["options"].pop("heads") == 1 and b["model"]["options"].pop("heads") == 16
    assert a == b
    assert a["train"]["patience"] == cfg.patience and a["train"]["epochs"] == cfg.max_epochs
    assert a["data"]["train_size"] == 500 and cfg.toy_sizes == [500]


def test_one_toy_ko_setting_per_size(tmp_path: Path) -> None:
    """--toy-train 1000,500: two settings, toy-ko-500 and toy-ko-1000, each with every h and
    seed on its own data size; each judged with toy-ko's learnt bar."""
    cfg = HeadsConfig(toy_train="1000,500", toy_report="", seeds=5)
    named = make_jobs(cfg, tmp_path, print)
    assert sorted({j.task for j in named.values()}) == ["toy-ko-1000", "toy-ko-500"]
    assert len(named) == 2 * 4 * 5
    sizes = {j.task: j.config.data.train_size for j in named.values()}
    assert sizes == {"toy-ko-500": 500, "toy-ko-1000": 1000}
    assert family("toy-ko-1000") == "toy-ko" and family("multi30k") == "multi30k"
    low = _runs({1: 30.0, 2: 40.0, 4: 45.0, 8: 35.0}, task="toy-ko-500")  # best below 50
    assert ev.verdict_of(_judge(low)[0]).startswith(
        "INCONCLUSIVE: toy-ko-500: best compared arm learnt the task (test BLEU): best arm 4"
    )


def test_multi30k_absent_is_skipped_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(heads_jobs, "MULTI30K", tmp_path / "absent")
    said: list[str] = []
    cfg = HeadsConfig(multi30k=100, tasks="toy-ko,multi30k", toy_report="")
    named = make_jobs(cfg, tmp_path, said.append)
    assert {j.task for j in named.values()} == {"toy-ko"}
    assert len(named) == 4 * cfg.seeds  # 4 h x the seeds, none of Multi30K
    assert len(said) == 1 and said[0].startswith("skipping Multi30K:") and "not found" in said[0]
    with pytest.raises(ValueError, match="nothing to run"):
        make_jobs(HeadsConfig(tasks="multi30k"), tmp_path, said.append)


def test_multi30k_subset(tmp_path: Path) -> None:
    src = tmp_path / "m30k"
    src.mkdir()
    for split in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):
            with gzip.open(src / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.writelines(f"{split} {lang} {i}\n" for i in range(10))
    cfg = HeadsConfig(multi30k=4, valid_size=2, test_size=3)
    folder = multi30k_subset(cfg, tmp_path / "sub", source=src)
    assert (folder / "train.de").read_text().splitlines() == [f"train de {i}" for i in range(4)]
    assert len((folder / "val.en").read_text().splitlines()) == 2
    assert (folder / "test.en").read_text().splitlines()[-1] == "test_2016_flickr en 2"
    with pytest.raises(ValueError, match="10 pairs, fewer than the 12 asked for"):
        multi30k_subset(HeadsConfig(multi30k=12), tmp_path / "s", source=src)
    with pytest.raises(FileNotFoundError, match="not found"):
        multi30k_subset(cfg, tmp_path / "sub2", source=tmp_path / "absent")


def test_measures_of_one_model_match_independent_computations(
    tmp_path: Path, one_thread: None
) -> None:
    """The early-stopped checkpoint (best/) is scored: BLEU recomputed with sacrebleu (and
    from the sentence statistics), test perplexity from each sentence's log-probabilities
    in float64, AER with attention_aer (the model's own forward), the heads' weights with
    cross_attention one sentence at a time (no padding), JS from those."""
    import json

    import sacrebleu

    from attnkit.data.batching import batches
    from attnkit.decode import translate
    from attnkit.eval.forced import attention_aer
    from attnkit.train import checkpoint

    cfg = HeadsConfig(**{**QUICK, "max_epochs": 3, "toy_train": "48"})
    fit_logged(fit_config(cfg, 2, 0, toy_ko_data(cfg, 0), tmp_path / "m"), tmp_path / "m.log")
    got = measure(tmp_path / "m", cfg.patience)

    ck = checkpoint.load(tmp_path / "m" / "best")
    history = json.loads((tmp_path / "m" / "history.json").read_text())
    losses = [row["valid_loss"] for row in history]
    assert got["epochs"] == len(history) and losses[got["best_epoch"] - 1] == min(losses)
    assert got["valid_ppl"] == pytest.approx(math.exp(min(losses)), rel=1e-3)
    from attnkit.data.tasks import load_task

    test = load_task("toy-ko", seed=0, train_size=48, valid_size=8, test_size=12).test
    hyps = translate(ck.model, test, ck.src_vocab, ck.tgt_vocab).hyps
    bleu = sacrebleu.corpus_bleu(
        [" ".join(h) for h in hyps], [[" ".join(e.tgt) for e in test]], tokenize="none"
    ).score
    assert got["bleu"] == pytest.approx(bleu, abs=0.006)
    assert float(corpus_bleu(np.array(got["bleu_stats"]).sum(0))) == pytest.approx(bleu)
    nll, count = 0.0, 0
    ck.model.eval()
    with torch.no_grad():
        for e in test:
            (b,) = batches([e], ck.src_vocab, ck.tgt_vocab, 1)
            logp = torch.log_softmax(ck.model(b.src, b.src_len, b.tgt_in).logits[0].double(), -1)
            gold = b.tgt_out[0].tolist()  # the words, then </s>
            nll -= sum(float(logp[i, g]) for i, g in enumerate(gold))
            count += len(gold)
    assert got["test_ppl"] == pytest.approx(math.exp(nll / count), rel=1e-4)
    aer = attention_aer(ck.model, test, ck.src_vocab, ck.tgt_vocab)
    assert got["aer"] == pytest.approx(100 * aer, abs=0.006)

    js_rows = []
    ck.model.eval()
    with torch.no_grad():
        for e in test:
            (b,) = batches([e], ck.src_vocab, ck.tgt_vocab, 1)
            w = ck.model.cross_attention(b.src, b.src_len, b.tgt_in)[0, -1].double()
            w = w[:, : len(e.tgt), : len(e.src)]  # (H=2, T, S): the words only
            p, q = (w / w.sum(-1, keepdim=True)).unbind(0)  # (T, S) each
            for pt, qt in zip(p.tolist(), q.tolist(), strict=True):
                mt = [(x + y) / 2 for x, y in zip(pt, qt, strict=True)]
                js_rows.append((_kl(pt, mt) + _kl(qt, mt)) / 2)
    assert got["js"] == pytest.approx(sum(js_rows) / len(js_rows), abs=1e-4)
    k = got["example"]["index"]
    assert len(got["example"]["weights"]) == 2  # one map per head
    assert got["example"]["src"] == test[k].src
