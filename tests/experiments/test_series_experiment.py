"""The series experiment: its verdict on synthetic numbers, its measurements on hand-made
weights, its config checks, and a --quick run on a real series read from a CSV file."""

import json
import math

import numpy as np
import pytest

from attnkit.cli import main
from attnkit.experiments.series import SeriesConfig, hits_by_step, verdict, weight_by_lag


def _numbers(att, none, hits):
    return {"mase": {"attention": att, "none": none, "naive": [1.0] * len(att)},
            "hits_by_step": hits}  # fmt: skip


def test_verdict_passes_when_attention_wins_and_peaks_at_the_season():
    reasons, checks = verdict(_numbers([0.9, 1.1, 1.0], [1.5, 1.4, 1.6], [0.9, 0.8, 0.6, 0.4]))
    assert reasons == [] and checks["attention_beats_none"] and checks["peaks_at_season"]
    assert checks["steps_peaking_at_season"] == 0.75


def test_verdict_fails_on_either_check_with_its_numbers():
    reasons, checks = verdict(_numbers([1.5], [1.2], [0.9, 0.9]))
    assert len(reasons) == 1 and "1.500 is not below no-attention MASE 1.200" in reasons[0]
    reasons, _ = verdict(_numbers([1.0], [1.2], [0.9, 0.4]))  # half the steps is not most
    assert len(reasons) == 1 and "only 50% of the forecast steps" in reasons[0]
    reasons, checks = verdict(_numbers([2.0], [1.2], [0.1, 0.2, 0.3]))
    assert len(reasons) == 2 and not checks["peaks_at_season"]


def test_hits_count_peaks_within_one_step_of_a_multiple_of_each_windows_period():
    w = np.zeros((2, 2, 10))  # N = 2 windows, K = 2 steps, W = 10
    # window 0 (period 4): step 1 peaks at key 2 -> lag 10-1+1-2 = 8 (hit), step 2 at key 4 ->
    # lag 7 (4·2 - 1: hit); window 1 (period 5): step 1 at key 7 -> lag 3 (miss), step 2 at
    # key 8 -> lag 3 (miss)
    w[0, 0, 2] = w[0, 1, 4] = w[1, 0, 7] = w[1, 1, 8] = 1.0
    assert hits_by_step(w, np.array([4, 5])) == [0.5, 0.5]


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
    with pytest.raises(ValueError, match="baseline already"):
        SeriesConfig(score="none")
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
    assert set(result["scores"]) == {"attention", "none", "naive"}
    assert (out / "series.png").is_file() and (out / "series_example.png").is_file()
    meta = json.loads((out / "attention-s0" / "last" / "config.json").read_text())["meta"]
    assert "task" not in meta and meta["series_csv"] == "real.csv"  # evaluate cannot misuse it
    assert main(["evaluate", "--checkpoint", str(out / "attention-s0")]) == 2
    assert "names no data" in capsys.readouterr().err
