"""Every arm of the distance experiment, ``jobs`` at a time in a pool of spawned processes
(the longest sequences first, so that the pool ends together)."""

from __future__ import annotations

from typing import Any

from ..base import Say, Tally
from ..pool import QuietPool
from .measure import Arm, Setting, train_arm


def run_arms(arms: list[Arm], setting: Setting, probes: set[Arm], jobs: int, say: Say
             ) -> dict[Arm, dict[str, Any]]:  # fmt: skip
    """``train_arm`` for every arm (those in ``probes`` also probe their initial gradient);
    a progress line per arm, with its updates-to-criterion ("+": censored at the cap)."""
    order = sorted(arms, key=lambda a: -a.delta)
    tally = Tally(len(arms), say)
    out: dict[Arm, dict[str, Any]] = {}

    def collect(arm: Arm, result: dict[str, Any]) -> None:
        out[arm] = result
        tally(f"{arm.task} {arm.model} Δ={arm.delta} seed {arm.seed}: "
              f"{result['updates']}{'+' if result['censored'] else ''} updates, "
              f"{result['train_seconds']:.0f}s")

    if jobs == 1:
        for arm in order:
            collect(arm, train_arm(arm, setting, arm in probes))
        return out
    with QuietPool(min(jobs, len(arms))) as pool:  # workers never see Ctrl-C
        futures = {arm: pool.submit(train_arm, arm, setting, arm in probes) for arm in order}
        for arm, fut in futures.items():
            collect(arm, fut.result())
    return out


__all__ = ["run_arms"]
