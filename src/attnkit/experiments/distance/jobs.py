"""Every arm of the distance experiment, ``jobs`` at a time in a pool of spawned processes
(the longest sequences first, so that the pool ends together)."""

from __future__ import annotations

from functools import partial
from typing import Any

from ..base import Say, Tally
from ..pool import run_each
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

    run_each(partial(train_probed, setting=setting, probes=frozenset(probes)), order, jobs,
             collect)  # fmt: skip
    return out


def train_probed(arm: Arm, *, setting: Setting, probes: frozenset[Arm]) -> dict[str, Any]:
    """``train_arm`` of ``arm``, probing its initial gradient when it is one of ``probes``."""
    return train_arm(arm, setting, arm in probes)


__all__ = ["run_arms", "train_probed"]
