"""The forecast family end to end: `attnkit train --task series --model forecaster`, then
`evaluate` (MAE/RMSE/MASE beside seasonal naive) and `view --example N` (attention heatmap)."""

import json

import numpy as np
import pytest

from attnkit.cli import main
from attnkit.data.tasks import load_task
from attnkit.eval.forecast import mase, seasonal_naive
from attnkit.tasks.forecast import arrays, batches, collate
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


def test_training_lowers_the_loss_and_the_valid_loss_is_the_mse_per_point(tmp_path):
    """The forecast family's loss trains the model (the valid loss falls over epochs), and
    the recorded valid loss is the mean squared error per forecast point of the saved model,
    recomputed here from its normalised forecasts."""
    import torch

    import attnkit
    from attnkit.train.config import DataConfig, FitConfig, ModelConfig, TrainConfig

    sizes = {"train_size": 128, "valid_size": 16, "test_size": 4}
    result = attnkit.fit(FitConfig(
        data=DataConfig(task="series", **sizes),
        model=ModelConfig("forecaster", preset="tiny"),
        train=TrainConfig(epochs=4, batch_size=32, lr=1e-2, patience=0, progress=False),
        out=tmp_path / "run",
    ), log=lambda s: None)  # fmt: skip
    losses = [row["valid_loss"] for row in result.history]
    assert losses[-1] < losses[0]
    model = checkpoint.load(result.last).model.eval()
    valid = load_task("series", seed=0, **sizes).valid
    b = collate(valid, list(range(len(valid))))
    with torch.no_grad():
        forecast = model(b.past, b.future.shape[1]).forecast  # (N, K)
    mse = float(((forecast - b.future) ** 2).mean())
    assert losses[-1] == pytest.approx(mse, abs=1e-4)
