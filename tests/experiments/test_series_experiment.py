"""The series experiment: its checks and verdict on hand-made numbers (clean, contrary,
straddling, a compared arm at the floor, a reported-only arm at the floor, a cap too close to
the stopping points), its measurements on hand-made weights, forecasts and run folders, its
config checks, and a --quick run on a real series read from a CSV file."""

import json
import math

import numpy as np
import pytest
from _refusals import refused

from attnkit.cli import main
from attnkit.eval.forecast import mase
from attnkit.experiments import evidence as ev
from attnkit.experiments.series import (
    SeriesConfig,
    checks_of,
    hit_by_window,
    hits_by_step,
    mase_by_window,
    reported_of,
    stop_of,
    weight_by_lag,
)

SEEDS = 5


def _numbers(att, none, spread=0.05, floor=3.0, *, seasonal=0.9, naive=1.0, stops=2000,
             cap=12000):  # fmt: skip
    """Five seeds x 60 windows: per-window MASE around each arm's level (the same per-window
    difficulty for all arms), each seed's level moved by ± spread, attention's in the
    opposite phase; the window-mean forecast ("mean") at ``floor``; every run stopped after
    ``stops`` updates under ``cap``."""
    rows = lambda level, ph=0: [  # noqa: E731
        [level + 0.2 * (i % 5) + spread * (-1) ** (s + ph) for i in range(60)]
        for s in range(SEEDS)]
    return {"mase": {"attention": rows(att, 1), "none": rows(none), "mean": rows(floor),
                     "seasonal": rows(seasonal), "naive": rows(naive)},
            "hits": [[0.9] * 60 for _ in range(SEEDS)],
            "updates": {"attention": [stops] * SEEDS, "none": [stops] * SEEDS},
            "censored": {"attention": [False] * SEEDS, "none": [False] * SEEDS},
            "cap": cap}  # fmt: skip


def _outcomes(checks):
    return [c.outcome for c in checks]


def test_a_clean_result_reproduces_on_the_t_interval_over_seeds():
    checks = checks_of(_numbers(0.8, 1.0))
    assert _outcomes(checks) == [ev.PASS] * 5, [c.reason for c in checks]
    assert [c.kind for c in checks] == ["claim"] + ["design"] * 4
    # the per-seed gaps alternate 0.2 ± 0.1 (0.3, 0.1, 0.3, 0.1, 0.3: mean 0.22)
    gaps = [0.2 + 0.1 * (-1) ** s for s in range(SEEDS)]
    assert checks[0].value == pytest.approx(np.mean(gaps))
    assert checks[0].ci[0] == pytest.approx(ev.t_interval(gaps).lo)
    assert ev.verdict_of(checks) == ev.REPRODUCED


def test_a_clean_contrary_result_is_not_reproduced():
    checks = checks_of(_numbers(1.3, 1.0))
    assert _outcomes(checks) == [ev.FAIL] + [ev.PASS] * 4
    verdict = ev.verdict_of(checks)
    assert verdict.startswith("NOT REPRODUCED: MASE without attention - MASE with attention")
    assert ev.exit_code(verdict) == 1


def test_a_straddling_gap_is_inconclusive():
    straddle = checks_of(_numbers(1.0, 1.0, spread=0.5))
    assert straddle[0].outcome == ev.INCONCLUSIVE and straddle[0].ci[0] < 0 < straddle[0].ci[1]
    assert ev.verdict_of(straddle).startswith("INCONCLUSIVE: MASE without attention")


def test_only_the_compared_arms_are_checked():
    """A reported-only arm at the floor (the seasonal-lag oracle and seasonal naive as bad as
    the window mean) withholds nothing; one compared arm at the floor (no attention as bad
    as the window mean) makes the verdict INCONCLUSIVE, though attention is far ahead."""
    context = _numbers(0.8, 1.0, seasonal=3.0, naive=3.0)
    assert ev.verdict_of(checks_of(context)) == ev.REPRODUCED
    at_floor = checks_of(_numbers(0.8, 3.0))
    assert at_floor[0].outcome == ev.PASS  # the claim's gap alone would pass
    verdict = ev.verdict_of(at_floor)
    assert verdict.startswith("INCONCLUSIVE: encoder-decoder without attention learnt")
    assert "not clear of the floor" in verdict and ev.exit_code(verdict) == 2
    assert [c.outcome for c in at_floor[1:]] == [ev.PASS, ev.PASS, ev.INCONCLUSIVE, ev.PASS]


def test_a_cap_within_three_median_stops_is_inconclusive_and_censored_runs_are_named():
    numbers = _numbers(0.8, 1.0, stops=2000, cap=5000)
    numbers["censored"]["none"][0] = True
    checks = checks_of(numbers)
    assert checks[2].outcome == checks[4].outcome == ev.INCONCLUSIVE
    assert checks[2].value == pytest.approx(2.5)
    assert "1 of 5 runs censored" in checks[4].reason
    assert ev.verdict_of(checks).startswith("INCONCLUSIVE: attention: cap / median")
    numbers["updates"]["none"] = [2000, 2000, 3000, 4000, 5000]  # median 3000: 4.0 at 12000
    numbers["cap"] = 12000
    assert checks_of(numbers)[4].outcome == ev.PASS


def test_the_reported_numbers_judge_nothing_and_carry_t_intervals():
    shown = {r["name"]: r for r in reported_of(_numbers(0.8, 1.0, 0.0, seasonal=0.7, naive=1.1))}
    oracle = shown["MASE seasonal-lag oracle - MASE attention"]
    assert oracle["value"] == pytest.approx(-0.1) and oracle["n"] == SEEDS
    assert shown["MASE seasonal naive - MASE attention"]["value"] == pytest.approx(0.3)
    peak = shown["share of forecasts peaking at a multiple of the period +-1"]
    assert peak["value"] == pytest.approx(0.9) and peak["ci"][0] <= 0.9 <= peak["ci"][1]


def _run(tmp_path, losses, step):
    run = tmp_path / "run"
    (run / "last").mkdir(parents=True)
    (run / "history.json").write_text(json.dumps([{"epoch": i + 1, "valid_loss": v}
                                                  for i, v in enumerate(losses)]))  # fmt: skip
    (run / "last" / "train_state.json").write_text(json.dumps({"global_step": step}))
    return run


def test_stop_of_tells_a_plateau_from_a_cut_run(tmp_path):
    plateau = _run(tmp_path / "a", [3.0, 2.0, 1.0, 1.5, 1.2, 1.1], 1500)  # best at 3, then 3 more
    assert stop_of(plateau, 3) == (1500, False)
    cut = _run(tmp_path / "b", [3.0, 2.0, 1.0, 1.5, 0.9, 1.1], 1500)  # best at 5: still falling
    assert stop_of(cut, 3) == (1500, True)


def test_mase_by_window_averages_to_the_mase():
    rng = np.random.default_rng(0)
    past, future = rng.normal(size=(7, 48)), rng.normal(size=(7, 12))
    forecast, period = rng.normal(size=(7, 12)), np.array([12, 16, 24, 12, 16, 24, 12])
    per = mase_by_window(future, forecast, past, period)
    assert per.shape == (7,) and per.mean() == pytest.approx(mase(future, forecast, past, period))
    hand = np.abs(future[2] - forecast[2]).mean() / np.abs(past[2, 24:] - past[2, :-24]).mean()
    assert per[2] == pytest.approx(hand)


def test_hits_count_peaks_within_one_step_of_a_multiple_of_each_windows_period():
    w = np.zeros((2, 2, 10))  # N = 2 windows, K = 2 steps, W = 10
    # window 0 (period 4): step 1 peaks at key 2 -> lag 10-1+1-2 = 8 (hit), step 2 at key 4 ->
    # lag 7 (4·2 - 1: hit); window 1 (period 5): step 1 at key 7 -> lag 3 (miss), step 2 at
    # key 8 -> lag 3 (miss)
    w[0, 0, 2] = w[0, 1, 4] = w[1, 0, 7] = w[1, 1, 8] = 1.0
    assert hits_by_step(w, np.array([4, 5])) == [0.5, 0.5]
    assert hit_by_window(w, np.array([4, 5])).tolist() == [1.0, 0.0]


def test_weight_by_lag_averages_each_lag_over_steps_and_windows():
    w = np.full((1, 2, 3), 1 / 3)  # uniform: every lag gets 1/3
    w[0, 0] = [0.5, 0.25, 0.25]  # step 1: lags 3, 2, 1
    got = weight_by_lag(w, np.array([2]))["2"]  # lags 1..4 (W + K - 1)
    # lag 1: step 1 key 2 (0.25); lag 2: step 1 key 1 (0.25) and step 2 key 2 (1/3) ...
    assert got == pytest.approx([0.25, (0.25 + 1 / 3) / 2, (0.5 + 1 / 3) / 2, 1 / 3])


test_bad_configs_fail_clearly = refused(SeriesConfig, [
    ({"runs": 0}, "--runs 0"),
    ({"runs": 1}, "--runs 1: an interval"),
    ({"lr": math.nan}, "--lr"),
    ({"score": "none"}, "has no attention"),
    ({"steps": 1100}, "not a multiple of --epoch-steps"),
    ({"csv": "x.csv"}, "--period"),
    ({"period": 12}, "go with --csv"),
    ({"cell": "rnn"}, "cell"),
])


def test_quick_run_on_a_csv_series(tmp_path, capsys):
    t = np.arange(400)
    y = 10 + 0.01 * t + np.sin(2 * np.pi * t / 12) + 0.1 * np.random.default_rng(0).normal(size=400)
    f = tmp_path / "real.csv"
    f.write_text("month,value\n" + "".join(f"{i},{v:.4f}\n" for i, v in enumerate(y)))
    out = tmp_path / "out"
    code = main(["experiment", "series", "--quick", "--csv", str(f), "--column", "value",
                 "--period", "12", "--out", str(out)])  # fmt: skip
    assert code == 0
    result = json.loads((out / "series.json").read_text())
    assert result["test_windows"] == 49  # targets in [340, 400): starts 292 .. 340
    assert set(result["scores"]) == {"attention", "none", "seasonal", "naive", "mean"}
    assert result["compared"] == ["attention", "none"]
    assert [c["name"] for c in result["checks"]][:1] == [
        "MASE without attention - MASE with attention"]
    assert len(result["updates"]["none"]) == len(result["seeds"]) == 2
    assert all(c["ci"][0] <= c["value"] <= c["ci"][1] for c in result["checks"])
    assert ev.exit_code(result["verdict"]) in (0, 1, 2)
    assert (out / "series.png").is_file() and (out / "series_example.png").is_file()
    assert result["cap_updates"] == 28  # one epoch (28 batches of 8 windows) reaches 4 updates
    first = out / f"attention-s{result['seeds'][0]}"
    meta = json.loads((first / "last" / "config.json").read_text())["meta"]
    assert "task" not in meta and meta["series_csv"] == "real.csv"  # evaluate cannot misuse it
    assert main(["evaluate", "--checkpoint", str(first)]) == 2
    assert "names no data" in capsys.readouterr().err
