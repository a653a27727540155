"""The series experiment: its checks and verdict on hand-made numbers (clean, contrary,
straddling, unlearned), its measurements on hand-made weights and forecasts, its config
checks, and a --quick run on a real series read from a CSV file."""

import json
import math

import numpy as np
import pytest

from attnkit.cli import main
from attnkit.eval.forecast import mase
from attnkit.experiments import evidence as ev
from attnkit.experiments.series import (
    SeriesConfig,
    checks_of,
    hit_by_window,
    hits_by_step,
    mase_by_window,
    weight_by_lag,
)


def _numbers(att: float, seasonal: float, naive: float, hit: float, spread: float = 0.05):
    """Three seeds x 60 windows: per-window MASE around each arm's level (the same
    per-window difficulty for all arms, ± spread alternating, attention's in the opposite
    phase) and per-window hit shares."""
    rows = lambda level, ph=0: [  # noqa: E731
        [level + 0.2 * (i % 5) + spread * (-1) ** (i + ph) for i in range(60)] for _ in range(3)]
    hits = [[min(1.0, max(0.0, hit + 0.1 * (-1) ** i)) for i in range(60)] for _ in range(3)]
    return {"mase": {"attention": rows(att, 1), "seasonal": rows(seasonal), "naive": rows(naive)},
            "hits": hits}  # fmt: skip


def _outcomes(checks):
    return [c.outcome for c in checks]


def test_a_clean_result_reproduces():
    checks = checks_of(_numbers(0.8, 1.0, 1.05, 0.9))
    assert _outcomes(checks) == [ev.PASS] * 4, [c.reason for c in checks]
    assert checks[0].value == pytest.approx(0.2) and checks[1].value == pytest.approx(0.25)
    assert checks[2].value == pytest.approx(0.9) and checks[2].threshold == 0.5
    assert ev.verdict_of(checks) == ev.REPRODUCED


def test_a_clean_contrary_result_is_not_reproduced():
    """Attention behind seasonal naive (as the old design's 1.13 vs 1.02) and the fair
    baseline: NOT REPRODUCED, naming both failed gaps."""
    checks = checks_of(_numbers(1.13, 1.0, 1.02, 0.9))
    assert _outcomes(checks) == [ev.FAIL, ev.FAIL, ev.PASS, ev.PASS]
    verdict = ev.verdict_of(checks)
    assert verdict.startswith("NOT REPRODUCED: MASE seasonal-input forecaster - attention")
    assert "MASE seasonal naive - attention" in verdict and ev.exit_code(verdict) == 1


def test_a_straddling_gap_or_an_unlearned_model_is_inconclusive():
    straddle = checks_of(_numbers(1.0, 1.0, 1.3, 0.9, spread=0.5))
    assert straddle[0].outcome == ev.INCONCLUSIVE and straddle[0].ci[0] < 0 < straddle[0].ci[1]
    assert ev.verdict_of(straddle).startswith("INCONCLUSIVE: MASE seasonal-input forecaster")
    unlearned = checks_of(_numbers(3.2, 3.0, 1.02, 0.1))  # both arms far behind naive
    assert unlearned[3].outcome == ev.INCONCLUSIVE and unlearned[0].outcome == ev.FAIL
    verdict = ev.verdict_of(unlearned)
    assert verdict.startswith("INCONCLUSIVE: better trained arm's mean MASE")
    assert ev.exit_code(verdict) == 2


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


def test_bad_configs_fail_clearly():
    with pytest.raises(ValueError, match="--runs 0"):
        SeriesConfig(runs=0)
    with pytest.raises(ValueError, match="--lr"):
        SeriesConfig(lr=math.nan)
    with pytest.raises(ValueError, match="has no attention"):
        SeriesConfig(score="none")
    with pytest.raises(ValueError, match="not a multiple of --epoch-steps"):
        SeriesConfig(steps=1100)
    with pytest.raises(ValueError, match="--period"):
        SeriesConfig(csv="x.csv")
    with pytest.raises(ValueError, match="go with --csv"):
        SeriesConfig(period=12)
    with pytest.raises(ValueError, match="cell"):
        SeriesConfig(cell="rnn")


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
    assert set(result["scores"]) == {"attention", "seasonal", "naive"}
    assert [c["name"] for c in result["checks"]][:2] == [
        "MASE seasonal-input forecaster - attention", "MASE seasonal naive - attention"]
    assert all(c["ci"][0] <= c["value"] <= c["ci"][1] for c in result["checks"])
    assert ev.exit_code(result["verdict"]) in (0, 1, 2)
    assert (out / "series.png").is_file() and (out / "series_example.png").is_file()
    meta = json.loads((out / "attention-s0" / "last" / "config.json").read_text())["meta"]
    assert "task" not in meta and meta["series_csv"] == "real.csv"  # evaluate cannot misuse it
    assert main(["evaluate", "--checkpoint", str(out / "attention-s0")]) == 2
    assert "names no data" in capsys.readouterr().err
