"""Training several models side by side for an experiment: each ``attnkit.fit`` in its own
process (``spawn``: no fork of a process that holds torch threads), ``workers`` at a time,
each run's log lines in a file beside its folder.

    seconds = fit_many({"a": config_a, "b": config_b}, workers=2, steps=800, say=print)
    results = in_pool(train_and_score, {"h1": job1, "h2": job2}, workers=2, say=print)

``in_pool`` runs any picklable function on named items (an experiment that measures its
model right after training does it in the worker); ``fit_logged`` is the training step that
such a function calls.
"""

from __future__ import annotations

import json
import multiprocessing
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor, wait
from pathlib import Path
from typing import TypeVar

from ..train.checkpoint import find_checkpoint
from ..train.config import FitConfig
from ..train.fit import fit
from .base import Say

T = TypeVar("T")
R = TypeVar("R")


def log_path(config: FitConfig) -> Path:
    """Where a run's log lines go: ``OUT.log`` beside its folder ``OUT``."""
    return Path(str(config.out) + ".log")


def steps_done(out: str | Path) -> int:
    """Updates saved so far in the run folder ``out`` (its resumable ``last/``), 0 if none."""
    last = find_checkpoint(Path(out), "last", resumable=True)
    if last is None:
        return 0
    try:
        return int(json.loads((last / "train_state.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError):
        return 0


def fit_logged(config: FitConfig) -> float:
    """Train ``config`` in this process, its log lines (and a traceback if it fails) in
    ``log_path(config)``; returns seconds."""
    path = log_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(path, "w", encoding="utf-8") as f:
        try:
            fit(config, log=lambda line: print(line, file=f, flush=True))
        except Exception as err:
            traceback.print_exc(file=f)
            raise ValueError(f"training failed ({err}); see {path}") from err
    return time.perf_counter() - t0


def in_pool(
    fn: Callable[[T], R],
    items: Mapping[str, T],
    workers: int,
    say: Say,
    status: Callable[[], str] | None = None,
    every: float = 30.0,
) -> dict[str, R]:
    """``fn(item)`` for every named item, ``workers`` at a time in spawned processes (here,
    one after the other, when ``workers`` is 1); ``status()`` is said every ``every`` seconds
    while they run. A failure is raised naming its item."""
    if workers < 1:
        raise ValueError(f"workers={workers}; it must be at least 1")
    if workers == 1:
        return {name: fn(item) for name, item in items.items()}
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(items)), mp_context=ctx) as pool:
        futures = {name: pool.submit(fn, item) for name, item in items.items()}
        t0 = time.time()
        while wait(list(futures.values()), timeout=every).not_done:
            if status is not None:
                say(f"  [{time.time() - t0:4.0f}s] {status()}")
        out = {}
        for name, fut in futures.items():
            err = fut.exception()
            if err is not None:
                raise ValueError(f"{name} failed: {err}") from err
            out[name] = fut.result()
    return out


def fit_many(
    configs: Mapping[str, FitConfig], workers: int, steps: int, say: Say
) -> dict[str, float]:
    """Train every config (``workers`` at a time); returns wall-clock seconds per name. The
    progress line gives each run's updates so far out of ``steps``."""

    def status() -> str:
        return "steps: " + "  ".join(
            f"{name} {steps_done(c.out)}/{steps}" for name, c in configs.items()
        )

    return in_pool(fit_logged, configs, workers, say, status)


__all__ = ["fit_logged", "fit_many", "in_pool", "log_path", "steps_done"]
