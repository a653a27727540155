"""The forecast family end to end: `attnkit train --task series --model forecaster`, then
`evaluate` (MAE/RMSE/MASE beside seasonal naive) and `view --example N` (attention heatmap)."""

import json

import numpy as np
import pytest

from attnkit.cli import main
from attnkit.data.tasks import load_task
from attnkit.eval.forecast import mase, seasonal_naive
from attnkit.families.forecast import arrays, batches, collate
from attnkit.train import checkpoint


def test_batches_hold_windows_normalised_by_their_past():
    test = load_task("series", seed=0, train_size=4, valid_size=4, test_size=6).test
    b = collate(test, [0, 2])
    w = test[2]
    assert b.past.shape == (2, 48) and b.future.shape == (2, 12) and b.tokens == 24
    assert np.allclose(b.past[1].numpy() * b.sd[1].item() + b.mu[1].item(), w.past, atol=1e-4)
    assert np.allclose(b.future[1].numpy() * b.sd[1].item() + b.mu[1].item(), w.future, atol=1e-4)
    assert sorted(i for x in batches(test, None, None, 4, None) for i in x.index) == list(range(6))


@pytest.mark.filterwarnings("ignore")
def test_train_evaluate_and_view_a_forecaster(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--task", "series", "--model", "forecaster", "--preset", "tiny",
            "--train-size", "64", "--valid-size", "16", "--test-size", "20", "--epochs", "1",
            "--batch-size", "32", "--no-progress", "--out", str(run)]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(run), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["n"] == 20 and set(got) >= {"mae", "rmse", "mase", "naive_mase"}
    test = load_task("series", seed=0, train_size=64, valid_size=16, test_size=20).test
    future, past, period = arrays(test)
    naive = mase(future, seasonal_naive(past, period, 12), past, period)
    assert got["naive_mase"] == pytest.approx(naive)  # the same windows were rebuilt
    png, page = tmp_path / "a.png", tmp_path / "a.html"
    assert main(["view", "--checkpoint", str(run), "--example", "2", "--png", str(png),
                 "--out", str(page)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert f"period {test[2].period}" in out and "peak lag" in out
    assert png.stat().st_size > 0 and "<html" in page.read_text()
    assert checkpoint.load(run / "best").model.config.attention == "dot"
    assert main(["evaluate", "--checkpoint", str(run), "--task", "copy"]) == 2
    assert "reads windows of a series (--task series), not Example" in capsys.readouterr().err
