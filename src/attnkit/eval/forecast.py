"""Forecast accuracy: MAE, RMSE, MASE, and the seasonal-naive forecast MASE is scaled by.

Legend: N forecasts (windows), K forecast steps, W past values of each window, m the period.

MASE (Hyndman & Koehler 2006, "Another look at measures of forecast accuracy", eq. 9) scales
a forecast's absolute errors by the in-sample mean absolute error of the seasonal-naive
forecast on the series' own past:

    q_t = e_t / ( (1/(n−m)) Σ_{i=m+1..n} |y_i − y_{i−m}| ),    MASE = mean_t |q_t|

Here the in-sample part of each forecast is its window of W past values (n = W), MASE is
computed per window and averaged over windows (as in the M4 competition). MASE < 1: better
than the in-sample seasonal-naive one-season-ahead forecast.
"""

from __future__ import annotations

import numpy as np


def _pair(actual: np.ndarray, forecast: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, f = np.asarray(actual, dtype=np.float64), np.asarray(forecast, dtype=np.float64)
    if a.shape != f.shape or a.size == 0:
        raise ValueError(f"actual {a.shape} and forecast {f.shape} must share one non-empty shape")
    return a, f


def mae(actual: np.ndarray, forecast: np.ndarray) -> float:
    """Mean absolute error over every point: mean |y − ŷ|."""
    a, f = _pair(actual, forecast)
    return float(np.abs(a - f).mean())


def rmse(actual: np.ndarray, forecast: np.ndarray) -> float:
    """Root mean squared error over every point: sqrt(mean (y − ŷ)²)."""
    a, f = _pair(actual, forecast)
    return float(np.sqrt(((a - f) ** 2).mean()))


def naive_scale(past: np.ndarray, period: np.ndarray | int) -> np.ndarray:
    """The in-sample seasonal-naive MAE of each window: (1/(W−m)) Σ_{i>m} |y_i − y_{i−m}|.
    past (N, W) or (W,); period an int or (N,) ints, each < W -> (N,) or a scalar array."""
    x = np.atleast_2d(np.asarray(past, dtype=np.float64))  # (N, W)
    m = np.broadcast_to(np.asarray(period), (x.shape[0],))  # (N,)
    if m.min() < 1 or m.max() >= x.shape[1]:
        raise ValueError(f"periods {sorted(set(m.tolist()))} must be in 1..W-1 (W = {x.shape[1]})")
    out = np.array([np.abs(row[p:] - row[:-p]).mean() for row, p in zip(x, m, strict=True)])
    return out if np.ndim(past) > 1 else out[0]


def mase(
    actual: np.ndarray, forecast: np.ndarray, past: np.ndarray, period: np.ndarray | int
) -> float:
    """MASE averaged over windows: mean_n [ mean_k |y_nk − ŷ_nk| / naive_scale(past_n, m_n) ].
    actual, forecast (N, K) or (K,); past (N, W) or (W,). Windows whose past has a zero scale
    (MASE undefined) are left out; NaN when every window is."""
    a, f = _pair(actual, forecast)
    a, f = np.atleast_2d(a), np.atleast_2d(f)  # (N, K)
    scale = np.atleast_1d(naive_scale(past, period))  # (N,)
    if scale.shape[0] != a.shape[0]:
        raise ValueError(f"{a.shape[0]} forecasts but {scale.shape[0]} past windows")
    ok = scale > 0
    if not ok.any():
        return float("nan")
    return float((np.abs(a - f).mean(axis=1)[ok] / scale[ok]).mean())


def seasonal_naive(past: np.ndarray, period: np.ndarray | int, horizon: int) -> np.ndarray:
    """The seasonal-naive forecast: ŷ_{T+h} = y_{T+h−m·⌈h/m⌉}, the last observed value of the
    same season. past (N, W) or (W,) -> (N, K) or (K,)."""
    x = np.atleast_2d(np.asarray(past, dtype=np.float64))  # (N, W)
    n, w = x.shape
    m = np.broadcast_to(np.asarray(period), (n,))  # (N,)
    if m.min() < 1 or m.max() > w:
        raise ValueError(f"periods {sorted(set(m.tolist()))} must be in 1..W (W = {w})")
    h = np.arange(1, horizon + 1)  # (K,)
    idx = w - 1 + h[None, :] - m[:, None] * np.ceil(h[None, :] / m[:, None]).astype(int)  # (N, K)
    out = np.take_along_axis(x, idx, axis=1)  # (N, K)
    return out if np.ndim(past) > 1 else out[0]


def scores(
    actual: np.ndarray, forecast: np.ndarray, past: np.ndarray, period: np.ndarray
) -> dict[str, float]:
    """{"mae", "rmse", "mase"} of forecasts (N, K) of windows with pasts (N, W)."""
    return {
        "mae": mae(actual, forecast),
        "rmse": rmse(actual, forecast),
        "mase": mase(actual, forecast, past, period),
    }


__all__ = ["mae", "mase", "naive_scale", "rmse", "scores", "seasonal_naive"]
