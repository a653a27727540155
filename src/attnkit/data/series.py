"""Forecasting data: series, and windows of them (W past values -> the next K values).

A generated series has a trend, one seasonal profile and noise:

    y_t = level + slope·t + amp·profile[(t + phase) mod p] + σ·ε_t,   ε_t ~ N(0, 1)

where ``profile`` is a random (smoothed, unit-variance) shape of period p; the periods cycle
through ``PERIODS``, so a model must find the season of each window from its values. A real
series comes from one column of a CSV file (``read_csv``), its period given by the user.

An example is a ``Window`` (series, start): it holds a reference to its series, not a copy,
and the whole task is regenerated from (task, seed), so examples are cheap. The splits are by
time: a training window's targets lie in the first 70 % of its series, a validation window's
in the next 15 %, a test window's in the last 15 % (inputs may reach back into earlier parts,
as in any rolling-origin evaluation).

Normalisation is per window (``normalise``): the past and the future are both shifted and
scaled by the mean and the standard deviation of the *past* values alone, so a model never
sees the scale of the values it must forecast; forecasts are mapped back before scoring.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .csv_rows import csv_rows
from .example import Splits
from .task import TASKS, Task

WINDOW = 48  # past values a model reads
HORIZON = 12  # values it forecasts
PERIODS = (12, 16, 24)  # the seasonal periods of the generated series, in turn
N_SERIES = 200
LENGTH = 400
CUTS = (0.7, 0.85)  # train | valid | test, as fractions of each series' time axis


@dataclass(frozen=True, eq=False)
class Series:
    """One series: its id, its values (float64, read-only) and its seasonal period."""

    id: int
    values: np.ndarray
    period: int


@dataclass(frozen=True)
class Window:
    """``width`` past values of ``series`` from ``start``, and the ``horizon`` that follow."""

    series: Series
    start: int
    width: int
    horizon: int

    @property
    def past(self) -> np.ndarray:
        return self.series.values[self.start : self.start + self.width]  # (W,)

    @property
    def future(self) -> np.ndarray:
        a = self.start + self.width
        return self.series.values[a : a + self.horizon]  # (K,)

    @property
    def period(self) -> int:
        return self.series.period


def generate(
    n: int = N_SERIES, length: int = LENGTH, seed: int = 0, periods: Sequence[int] = PERIODS
) -> list[Series]:
    """``n`` seasonal series with trend and noise (see the module docstring)."""
    if n < 1 or length < 2 or not periods or min(periods) < 2:
        raise ValueError(
            f"n={n}, length={length}, periods={tuple(periods)}: need n >= 1, length >= 2 and "
            "periods of at least 2"
        )
    rng = np.random.default_rng(seed)
    out = []
    t = np.arange(length)
    for i in range(n):
        p = int(periods[i % len(periods)])
        raw = rng.normal(size=p)
        profile = (np.roll(raw, 1) + 2 * raw + np.roll(raw, -1)) / 4  # circular smoothing
        profile = (profile - profile.mean()) / (profile.std() + 1e-9)
        amp = rng.uniform(0.5, 2.0)
        level, slope = rng.uniform(-5, 5), rng.uniform(-0.01, 0.01) * amp
        noise = rng.uniform(0.05, 0.3) * amp
        phase = int(rng.integers(p))
        y = level + slope * t + amp * profile[(t + phase) % p] + noise * rng.normal(size=length)
        y.setflags(write=False)
        out.append(Series(i, y, p))
    return out


def read_csv(path: str | Path, column: str = "", period: int = 0) -> Series:
    """One series from a CSV file with a header row: ``column`` is a header name or a 0-based
    index ("" = the last column); empty cells are skipped, anything else non-numeric is an
    error naming its line."""
    if period < 2:
        raise ValueError(f"period={period}: a real series needs its seasonal period (>= 2)")
    rows = list(csv_rows(path))
    if len(rows) < 2:
        raise ValueError(f"{path}: expected a header row and values")
    head = rows[0]
    if column == "":
        col = len(head) - 1
    elif column in head:
        col = head.index(column)
    elif column.lstrip("-").isdigit() and -len(head) <= int(column) < len(head):
        col = int(column) % len(head)
    else:
        raise ValueError(f"{path}: no column {column!r}; its columns are {head}")
    values = []
    for line, row in enumerate(rows[1:], start=2):
        cell = row[col].strip() if col < len(row) else ""
        if not cell:
            continue
        try:
            values.append(float(cell))
        except ValueError:
            raise ValueError(
                f"{path}:{line}: {cell!r} in column {head[col]!r} is not a number"
            ) from None
    y = np.asarray(values, dtype=np.float64)
    if not np.isfinite(y).all():
        raise ValueError(f"{path}: column {head[col]!r} holds a non-finite value")
    y.setflags(write=False)
    return Series(0, y, period)


def windows_between(s: Series, lo: int, hi: int, width: int, horizon: int) -> list[Window]:
    """Every window of ``s`` whose targets lie in [lo, hi) (inputs may start before lo)."""
    first = max(lo - width, 0)
    last = min(hi, len(s.values)) - width - horizon
    return [Window(s, a, width, horizon) for a in range(first, last + 1)]


def split(
    series: Sequence[Series],
    sizes: tuple[int | None, int | None, int | None],
    seed: int,
    *,
    width: int = WINDOW,
    horizon: int = HORIZON,
) -> Splits[Window]:
    """Train/valid/test windows of every series, by time (``CUTS``); ``size`` windows drawn
    at random from each part with ``seed`` (None: all of them), in (series, start) order."""
    if width < 2 or horizon < 1:
        raise ValueError(f"window={width}, horizon={horizon}: need window >= 2 and horizon >= 1")
    rng = random.Random(seed)
    parts = []
    for name, size, (a, b) in zip(
        ("train", "valid", "test"), sizes, ((0.0, CUTS[0]), CUTS, (CUTS[1], 1.0)), strict=True
    ):
        pool = [
            w
            for s in series
            for w in windows_between(
                s, math.floor(a * len(s.values)), math.floor(b * len(s.values)), width, horizon
            )
        ]
        if size is not None and size > len(pool):
            raise ValueError(
                f"{size} {name} windows asked for, but the series hold only {len(pool)} of "
                f"{width}+{horizon} values in their {name} part; ask for fewer"
            )
        picked = pool if size is None else rng.sample(pool, size)
        parts.append(sorted(picked, key=lambda w: (w.series.id, w.start)))
    return Splits(*parts)


def series_task(sizes: tuple[int, int, int], seed: int, **_: int) -> Splits[Window]:
    """The generated forecasting task ``series``: ``N_SERIES`` series of ``LENGTH`` values."""
    return split(generate(N_SERIES, LENGTH, seed), sizes, seed + 1)


def normalise(past: np.ndarray, future: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(past, future) shifted and scaled by the past's mean μ and standard deviation σ
    (σ = 1 for a constant past): returns (z_past, z_future, μ, σ)."""
    mu = float(past.mean())
    sd = float(past.std()) or 1.0
    return (past - mu) / sd, (future - mu) / sd, mu, sd


TASKS.register(Task("series", series_task, (8000, 500, 1000), family="forecast"))


__all__ = [
    "HORIZON",
    "PERIODS",
    "WINDOW",
    "Series",
    "Window",
    "generate",
    "normalise",
    "read_csv",
    "series_task",
    "split",
    "windows_between",
]
