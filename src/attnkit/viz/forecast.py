"""The attention of one forecast over its input window, for ``attnkit view --checkpoint DIR
--example N`` of a forecasting model: rows are the forecast steps t+1..t+K, columns the past
values; the cells whose lag is a multiple of the true period are boxed (as gold links), so a
model that reads "one season ago" shows its weight inside the boxes.

Legend: W past values, K forecast steps; the lag of past value j (0-based) for step h
(1-based) is W − 1 + h − j: how far back from the forecast time it lies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..eval.alignment import Link


def lag(width: int, step: int, key: int) -> int:
    """How far back past value ``key`` (0-based) lies from forecast step ``step`` (1-based)."""
    return width - 1 + step - key


def period_links(width: int, horizon: int, period: int) -> list[Link]:
    """(key, step − 1) for every cell whose lag is a multiple of ``period``."""
    return [(j, h - 1) for h in range(1, horizon + 1) for j in range(width)
            if lag(width, h, j) % period == 0]  # fmt: skip


def peak_lags(weights: np.ndarray) -> np.ndarray:
    """The lag of the largest weight of every step: weights (..., K, W) -> (..., K)."""
    k, w = weights.shape[-2:]
    steps = np.arange(1, k + 1)  # (K,)
    return w - 1 + steps - weights.argmax(axis=-1)  # (..., K)


def show_window(
    window: Any,
    forecast: np.ndarray,
    weights: np.ndarray | None,
    *,
    out: str | None = None,
    png: str | None = None,
    title: str = "forecast attention",
) -> list[str]:
    """Print the forecast against the truth and, with attention, its peak lag per step; write
    the page (``out``) and/or the heatmap (``png``), or a terminal heatmap when neither."""
    from .outputs import show

    w, k, p = window.width, window.horizon, window.period
    lines = [
        f"{title}; period {p}",
        "step   truth   forecast" + ("   peak lag" if weights is not None else ""),
    ]
    peaks = peak_lags(weights) if weights is not None else None
    for h in range(k):
        row = f"t+{h + 1:<3} {window.future[h]:7.3f}  {forecast[h]:9.3f}"
        if peaks is not None:
            row += f"   {peaks[h]:>4}{' (season)' if peaks[h] % p == 0 else ''}"
        lines.append(row)
    if weights is None:
        lines.append("this model has no attention (attention=none): nothing more to show")
        return lines
    steps = [f"t+{h}" for h in range(1, k + 1)]
    past: Sequence[str] = [f"t-{w - 1 - j}" if j < w - 1 else "t" for j in range(w)]
    lines += show(weights, steps, past, page_path=out, png_path=png, terminal=not (out or png),
                  gold=period_links(w, k, p), title=f"{title} (boxes: lags k·{p})")  # fmt: skip
    return lines


__all__ = ["lag", "peak_lags", "period_links", "show_window"]
