"""The ``forecast`` task family: windows of a series -> their next K values (tasks/family.py).

Legend: B windows in a batch, W past values, K forecast steps.

Batches hold the windows normalised by their own past (``attnkit.data.series.normalise``);
the model is trained on the mean squared error of its normalised forecast, and scored
(``attnkit evaluate``) on the original scale: MAE, RMSE and MASE (attnkit.eval.forecast),
beside the seasonal-naive forecast's.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.batching import TensorBatch
from ..data.series import Window, normalise
from ..data.vocab import Vocab
from ..eval.forecast import scores, seasonal_naive
from .family import Family, check_examples, device_of

READS = "a forecasting model reads windows of a series (--task series)"  # for check_examples

@dataclass
class ForecastBatch(TensorBatch):
    past: Tensor  # (B, W) normalised
    future: Tensor  # (B, K) normalised
    mu: Tensor  # (B, 1)
    sd: Tensor  # (B, 1)
    index: list[int]
    period: Tensor  # (B,) each window's seasonal period (for attention="seasonal")

    @property
    def tokens(self) -> int:
        return self.future.numel()  # the loss is a mean over forecast points


def collate(windows: Sequence[Window], index: list[int]) -> ForecastBatch:
    """One batch of the windows at ``index``."""
    parts = [normalise(windows[i].past, windows[i].future) for i in index]
    f32 = lambda xs: torch.tensor(np.array(xs), dtype=torch.float32)  # noqa: E731
    return ForecastBatch(
        f32([p[0] for p in parts]),  # (B, W)
        f32([p[1] for p in parts]),  # (B, K)
        f32([[p[2]] for p in parts]),  # (B, 1)
        f32([[p[3]] for p in parts]),  # (B, 1)
        list(index),
        torch.tensor([windows[i].period for i in index], dtype=torch.long),  # (B,)
    )


def batches(
    windows: Sequence[Window], src_vocab: Vocab, tgt_vocab: Vocab, size: int,
    rng: random.Random | None,
) -> list[ForecastBatch]:  # fmt: skip
    order = list(range(len(windows)))
    if rng is not None:
        rng.shuffle(order)
    return [collate(windows, order[i : i + size]) for i in range(0, len(order), size)]



def loss_of(model: nn.Module, b: ForecastBatch, label_smoothing: float = 0.0) -> tuple[Tensor, Any]:
    """Mean squared error of the normalised forecast: (1/BK) Σ (ŷ − y)²."""
    b = b.to(device_of(model))
    out = model(b.past, b.future.shape[1], b.period)
    return F.mse_loss(out.forecast, b.future), out


def eval_loss(model: nn.Module, b: ForecastBatch) -> tuple[float, int]:
    b = b.to(device_of(model))
    out = model(b.past, b.future.shape[1], b.period)
    return float(F.mse_loss(out.forecast, b.future, reduction="sum")), b.tokens


@torch.no_grad()
def predict(
    model: nn.Module, windows: Sequence[Window], size: int = 512
) -> tuple[np.ndarray, np.ndarray | None]:
    """Forecasts on the original scale (N, K) and attention weights (N, K, W) (None without)."""
    was = model.training
    model.eval()
    preds, weights = [], []
    for b in batches(windows, Vocab.build([]), Vocab.build([]), size, None):
        b = b.to(device_of(model))
        out = model(b.past, b.future.shape[1], b.period)
        preds.append((out.forecast * b.sd + b.mu).double().cpu().numpy())
        if out.weights is not None:
            weights.append(out.weights.double().cpu().numpy())
    model.train(was)
    return np.concatenate(preds), (np.concatenate(weights) if weights else None)


def arrays(windows: Sequence[Window]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(future (N, K), past (N, W), period (N,)) of the windows."""
    return (
        np.stack([w.future for w in windows]),
        np.stack([w.past for w in windows]),
        np.array([w.period for w in windows]),
    )


def evaluate(loaded: Any, windows: list[Window]) -> dict[str, float]:
    """MAE, RMSE and MASE of the model's forecasts, and of the seasonal-naive ones."""
    if not windows:
        raise ValueError("no windows to score")
    check_examples(windows, Window, READS)
    future, past, period = arrays(windows)
    forecast, _ = predict(loaded.model, windows)
    naive = seasonal_naive(past, period, future.shape[1])
    mine = scores(future, forecast, past, period)
    base = {f"naive_{k}": v for k, v in scores(future, naive, past, period).items()}
    return {**mine, **base}


def show(
    loaded: Any, windows: list[Window], index: int, out: str | None, png: str | None
) -> list[str]:
    """The attention of window ``index``: forecast steps × past values, period multiples
    boxed; a page (``out``), a PNG, or a terminal heatmap."""
    from ..viz.forecast import show_window

    check_examples(windows[index : index + 1], Window, READS)
    w = windows[index]
    forecast, weights = predict(loaded.model, [w])
    title = f"{loaded.model_name}: series {w.series.id}, start {w.start}"
    one = None if weights is None else weights[0]  # (K, W)
    return show_window(w, forecast[0], one, out=out, png=png, title=title)


FORECAST = Family(
    name="forecast",
    tokens=lambda e: ((), ()),
    batches=batches,
    loss_of=loss_of,
    eval_loss=eval_loss,
    score=lambda model, examples, src_vocab, tgt_vocab: None,  # MASE is for `evaluate`
    score_name="none",
    evaluate=evaluate,
    show=show,
    default_model="forecaster",
)

__all__ = ["FORECAST", "ForecastBatch", "arrays", "batches", "collate", "evaluate", "predict"]
