"""The experiment contract's statistics (attnkit.experiments.evidence): intervals checked
against values worked out by hand or with scipy, and the three outcomes: INCONCLUSIVE on a
synthetic ceiling and on an interval that straddles the threshold, never NOT REPRODUCED."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.experiments import evidence as ev


def test_t_interval_by_hand() -> None:
    iv = ev.t_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    # mean 3, s = sqrt(2.5), t_{4, .975} = 2.776445105
    half = 2.776445105 * math.sqrt(2.5) / math.sqrt(5)
    assert iv.value == pytest.approx(3.0)
    assert (iv.lo, iv.hi) == pytest.approx((3 - half, 3 + half), rel=1e-8)
    with pytest.raises(ValueError, match="needs 2 at least"):
        ev.t_interval([1.0])


def test_paired_bootstrap_covers_a_known_gap_and_pairs_the_examples() -> None:
    rng = random.Random(0)
    base = [[rng.random() for _ in range(200)] for _ in range(5)]  # per-example difficulty
    a = [[x + 0.10 + rng.gauss(0, 0.01) for x in row] for row in base]
    iv = ev.paired_bootstrap(a, base, resamples=500)
    assert iv.lo < 0.10 < iv.hi and iv.hi - iv.lo < 0.01  # paired: difficulty cancels
    with pytest.raises(ValueError, match="same seeds and examples"):
        ev.paired_bootstrap(a, [row[:-1] for row in base])


def test_an_interval_wholly_on_the_claims_side_passes_and_the_other_fails() -> None:
    assert ev.on_interval("gap", ev.Interval(0.2, 0.1, 0.3, 5), 0.0).outcome == ev.PASS
    assert ev.on_interval("gap", ev.Interval(-0.2, -0.3, -0.1, 5), 0.0).outcome == ev.FAIL
    assert ev.on_interval("gap", ev.Interval(-0.2, -0.3, -0.1, 5), 0.0,
                          above=False).outcome == ev.PASS  # fmt: skip
    checks = [ev.on_interval("gap", ev.Interval(-0.2, -0.3, -0.1, 5), 0.0)]
    verdict = ev.verdict_of(checks)
    assert verdict.startswith("NOT REPRODUCED: gap: -0.2") and ev.exit_code(verdict) == 1
    assert checks[0].as_json()["ci"] == [-0.3, -0.1]


def test_an_interval_that_straddles_the_threshold_is_inconclusive() -> None:
    gap = ev.t_interval([0.05, -0.04, 0.03, 0.06, -0.02])  # a mean of 0.016, |t| small
    check = ev.on_interval("attention leads", gap, threshold=0.0)
    assert check.outcome == ev.INCONCLUSIVE
    verdict = ev.verdict_of([check])
    assert verdict.startswith("INCONCLUSIVE: attention leads") and ev.exit_code(verdict) == 2
    assert "holds both the claim and its negation" in verdict


def test_arms_at_a_ceiling_are_inconclusive_never_not_reproduced() -> None:
    arms = {"attention": [1.0, 0.995, 1.0], "lstm": [0.99, 1.0, 0.985]}
    ceiling = ev.ceiling("arms can differ", arms, bound=1.0, eps=0.02)
    assert ceiling.outcome == ev.INCONCLUSIVE and ceiling.kind == "design"
    failed = ev.on_interval("lstm fails at 200", ev.Interval(-0.01, -0.02, -0.005, 3), 0.1)
    assert failed.outcome == ev.FAIL
    verdict = ev.verdict_of([ceiling, failed])  # the ceiling voids the failed claim
    assert verdict.startswith("INCONCLUSIVE: arms can differ") and "every arm at the ceiling" \
        in verdict
    below = ev.ceiling("arms can differ", {"a": [0.9, 0.92], "b": [0.6, 0.62]}, bound=1.0)
    assert below.outcome == ev.PASS
    floor = ev.ceiling("above chance", {"a": [0.1, 0.11], "b": [0.1, 0.09]}, 0.1, floor=True)
    assert floor.outcome == ev.INCONCLUSIVE and "floor" in floor.reason


def test_a_task_not_learned_is_inconclusive_and_a_clean_pass_reproduces() -> None:
    assert ev.verdict_of([ev.learned("best valid BLEU", 60.0, 95.0)]).startswith("INCONCLUSIVE")
    ok = [ev.learned("best valid BLEU", 97.0, 95.0),
          ev.on_interval("gap", ev.Interval(0.2, 0.1, 0.3, 5), 0.0)]  # fmt: skip
    assert ev.verdict_of(ok) == ev.REPRODUCED and ev.exit_code(ev.REPRODUCED) == 0
    with pytest.raises(ValueError, match="none of"):
        ev.exit_code("MAYBE")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=12),
       st.floats(-1, 1, allow_nan=False))  # fmt: skip
def test_outcomes_partition_by_where_the_interval_lies(xs: list[float], threshold: float):
    iv = ev.t_interval(xs)
    outcome = ev.on_interval("g", iv, threshold).outcome
    expected = ev.PASS if iv.lo > threshold else ev.FAIL if iv.hi <= threshold else \
        ev.INCONCLUSIVE  # fmt: skip
    assert outcome == expected
    assert iv.lo <= iv.value <= iv.hi


def test_the_checks_table_shows_each_check_with_its_interval() -> None:
    check = ev.on_interval("gap", ev.Interval(0.2, 0.1, 0.3, 5), 0.0).as_json()
    lines = ev.checks_table([check], digits=3).splitlines()
    assert lines[0] == "| check | kind | value | 95% interval | threshold | outcome |"
    assert lines[2] == "| gap | claim | 0.2 | [0.1, 0.3] | 0 | pass |"


def _power_law_repeats(k: float, sigma: float) -> tuple[list[int], list[list[float]]]:
    """Seven timings at each n of 3·n^k, each times a log-normal factor of spread ``sigma``."""
    rng = random.Random(0)
    ns = [16, 32, 64, 128, 256, 512, 1024]
    return ns, [[3 * n**k * math.exp(rng.gauss(0, sigma)) for _ in range(7)] for n in ns]


def test_the_exponent_interval_recovers_a_power_law_and_widens_with_noise() -> None:
    ns, exact = _power_law_repeats(1.5, 0.0)
    iv = ev.exponent_interval(ns, exact, resamples=200)
    assert (iv.value, iv.lo, iv.hi) == pytest.approx((1.5, 1.5, 1.5)) and iv.n == 7 * 7
    widths = []
    for sigma in (0.05, 0.3):
        ns, reps = _power_law_repeats(1.5, sigma)
        iv = ev.exponent_interval(ns, reps, resamples=500)
        assert iv.lo < 1.5 < iv.hi and abs(iv.value - 1.5) < 2 * sigma / 3
        medians = [sorted(r)[3] for r in reps]  # 7 repeats: the 4th
        slope = np.polyfit(np.log(ns), np.log(medians), 1)[0]  # least squares in log-log
        assert iv.value == pytest.approx(slope)
        widths.append(iv.hi - iv.lo)
    assert widths[1] > 3 * widths[0]  # noisier repeats, a wider interval
    with pytest.raises(ValueError, match="2 xs but 1 groups"):
        ev.exponent_interval([1, 2], [[1.0]])


def test_bootstrap_medians_resamples_within_each_group() -> None:
    """One group [1, 2, 30]: a resampled median is 1, 2 or 30, so the 95% interval of the
    median reaches from 1 to 30 while the value is the median 2; a single repeat is a point."""
    iv = ev.bootstrap_medians([[1.0, 2.0, 30.0]], lambda m: m[0], resamples=400)
    assert (iv.value, iv.lo, iv.hi) == (2.0, 1.0, 30.0)
    assert ev.bootstrap_medians([[4.0], [5.0]], sum, resamples=50) == ev.Interval(9.0, 9.0, 9.0, 2)
    with pytest.raises(ValueError, match="no repeats"):
        ev.bootstrap_medians([[1.0], []], sum)
    assert ev.point(3.0) == ev.Interval(3.0, 3.0, 3.0, 1, 1.0)


def test_above_zero_is_a_design_check_whose_reason_says_why() -> None:
    clear = ev.above_zero("lead", ev.Interval(0.2, 0.1, 0.3, 5), "no gap can show")
    assert (clear.outcome, clear.kind, clear.threshold) == (ev.PASS, "design", 0.0)
    straddles = ev.above_zero("lead", ev.Interval(0.1, -0.1, 0.3, 5), "no gap can show")
    assert (straddles.outcome, straddles.kind) == (ev.INCONCLUSIVE, "design")
    assert straddles.reason.endswith(": no gap can show")
    below = ev.above_zero("lead", ev.Interval(-0.2, -0.3, -0.1, 5), "no gap can show")
    assert below.outcome == ev.INCONCLUSIVE  # a design check never fails the claim


def test_can_tell_is_a_design_check_that_makes_the_verdict_inconclusive() -> None:
    ok = ev.can_tell("grid points with n < d", 2.0, 1.0)
    assert (ok.outcome, ok.kind, ok.ci) == (ev.PASS, "design", (2.0, 2.0))
    no = ev.can_tell("grid points with n < d", 0.0, 1.0)
    failed = ev.on_interval("gap", ev.Interval(-0.2, -0.3, -0.1, 5), 0.0)
    verdict = ev.verdict_of([no, failed])
    assert verdict == "INCONCLUSIVE: grid points with n < d: 0, needs >= 1: the measurement " \
        "cannot test the claim"
    assert ev.can_tell("error", 0.5, 0.1, above=False).outcome == ev.INCONCLUSIVE



def test_none_short_counts_the_runs_short_and_names_them_in_its_reason() -> None:
    ok = ev.none_short("runs short of their plateau", [], "4 of 4 runs on their plateau", "cut")
    assert (ok.outcome, ok.kind, ok.value, ok.ci, ok.threshold) == (
        ev.PASS, "design", 0.0, (0.0, 0.0), 0.0)  # fmt: skip
    assert ok.reason == "4 of 4 runs on their plateau"
    short = ev.none_short("runs short of their plateau", ["dense seed #2", "fixed seed #1"],
                          "2 of 4 runs on their plateau", "at the cap, still improving")
    assert (short.outcome, short.kind, short.value) == (ev.INCONCLUSIVE, "design", 2.0)
    assert short.reason == ("2 of 4 runs on their plateau; at the cap, still improving: "
                            "dense seed #2, fixed seed #1")  # fmt: skip
    assert ev.verdict_of([short]).startswith("INCONCLUSIVE: 2 of 4 runs")


def test_conclude_ends_a_report_with_the_checks_the_files_the_time_and_the_verdict(tmp_path):
    check = ev.on_interval("gap", ev.Interval(0.123456, 0.1, 0.3, 5), 0.0).as_json()
    result = {"checks": [check], "total_seconds": 12.4, "verdict": "REPRODUCED"}

    def plot(r, path):
        path.write_bytes(b"png")
        return path

    def said(work, **digits):
        lines: list[str] = []
        paths = ev.conclude("x", result, lambda r: [{"a": 1}], plot, tmp_path, lines.append,
                            work, **digits)  # fmt: skip
        assert sorted(p.name for p in paths) == ["x.csv", "x.json", "x.png"]
        return lines

    three = said("", digits=3)
    assert "| gap | claim | 0.123 |" in three[0]
    assert three[-2:] == ["total 12s", "verdict: REPRODUCED"]  # no work named: no parentheses
    four = said("training")
    assert "| gap | claim | 0.1235 |" in four[0]
    assert four[-2:] == ["total 12s (training)", "verdict: REPRODUCED"]
