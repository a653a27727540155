"""Every arm of the structure experiment, ``jobs`` at a time in a pool of spawned processes
(the digit-qa arms first: they run longest, so that the pool ends together)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..base import Say, Tally
from ..pool import QuietPool

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

    if workers == 1:
        for name, fn, args in jobs:
            collect(name, fn(*args))
        return out
    with QuietPool(min(workers, len(jobs))) as pool:  # workers never see Ctrl-C
        futures = {name: pool.submit(fn, *args) for name, fn, args in jobs}
        for name, fut in futures.items():
            collect(name, fut.result())
    return out


__all__ = ["Job", "run_jobs"]
