"""Every arm of the distance experiment, ``jobs`` at a time in a pool of spawned processes
(the longest distances and the largest caps first, so that the pool ends together)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from ..base import Say, Tally
from ..pool import run_each
from .measure import Arm, Setting, train_arm

Caps = Mapping[str, Mapping[str, int]]  # task -> model -> the arm's cap


def run_arms(arms: list[Arm], setting: Setting, probes: set[Arm], jobs: int, say: Say,
             caps: Caps | None = None) -> dict[Arm, dict[str, Any]]:  # fmt: skip
    """``train_arm`` for every arm (those in ``probes`` also probe their initial gradient),
    each with its own cap ``caps[task][model]`` (None: ``setting.cap`` for all); a progress
    line per arm, with its updates-to-criterion ("+": censored at the cap)."""
    frozen = {} if caps is None else {(t, m): c for t, by in caps.items() for m, c in by.items()}

    def cap(a: Arm) -> int:
        return frozen.get((a.task, a.model), setting.cap)

    order = sorted(arms, key=lambda a: (-a.delta, -cap(a)))
    tally = Tally(len(arms), say)
    out: dict[Arm, dict[str, Any]] = {}

    def collect(arm: Arm, result: dict[str, Any]) -> None:
        out[arm] = result
        tally(f"{arm.task} {arm.model} Δ={arm.delta} seed {arm.seed}: "
              f"{result['updates']}{'+' if result['censored'] else ''} updates, "
              f"{result['train_seconds']:.0f}s")

    run_each(partial(train_probed, setting=setting, probes=frozenset(probes), caps=frozen),
             order, jobs, collect)  # fmt: skip
    return out


def train_probed(arm: Arm, *, setting: Setting, probes: frozenset[Arm],
                 caps: Mapping[tuple[str, str], int]) -> dict[str, Any]:  # fmt: skip
    """``train_arm`` of ``arm`` at its own cap (``caps[(task, model)]``, else the setting's),
    probing its initial gradient when it is one of ``probes``."""
    own = replace(setting, cap=caps.get((arm.task, arm.model), setting.cap))
    return train_arm(arm, own, arm in probes)


__all__ = ["run_arms", "train_probed"]
