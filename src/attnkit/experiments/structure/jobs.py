"""Every arm of the structure experiment, ``jobs`` at a time in a pool of spawned processes
(the digit-qa arms first: they run longest, so that the pool ends together)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..base import Say, Tally
from ..pool import run_each

Job = tuple[str, Callable[..., dict[str, Any]], tuple[Any, ...]]  # (name, function, args)


def run_jobs(jobs: Sequence[Job], workers: int, say: Say) -> dict[str, dict[str, Any]]:
    """``function(*args)`` of every job; one progress line per job as it ends."""
    tally = Tally(len(jobs), say)
    out: dict[str, dict[str, Any]] = {}

    def collect(name: str, result: dict[str, Any]) -> None:
        out[name] = result
        acc = result.get("test_accuracy")
        tally(f"{name}: test accuracy {acc:.3f}" + (f", AUC {result['auc']:.3f}"
              if "auc" in result else f", {result['steps_run']} updates")
              + f" ({result['cpu_seconds']:.0f} s of CPU)")  # fmt: skip

    run_each(call, list(jobs), workers, lambda job, result: collect(job[0], result))
    return out


def call(job: Job) -> dict[str, Any]:
    """Run one job: ``function(*args)``."""
    _, fn, args = job
    return fn(*args)


__all__ = ["Job", "call", "run_jobs"]
