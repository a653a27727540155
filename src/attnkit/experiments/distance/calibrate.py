"""The distance experiment's calibration of each arm's cap, on a seed the verdict never uses.

The cap rule (``checks.py``): a compared model with a censored run needs a cap of at least
CAP_FACTOR = 10 times its own median u(Δmin), so that log2(10) ≈ 3.3 doublings of growth can
show before the cap is what ends training. The cap is therefore set per (task, model) from a
measurement, before any verdict seed runs: each model is trained once at Δmin on the
calibration seed (``--calibration-seed``, default 1000, outside --seed .. --seed+seeds-1; the
config refuses an overlap) to the criterion or ``--calibration-cap`` updates, and

    cap_m = ⌈CAP_FACTOR · CAP_MARGIN · u_m,cal(Δmin)⌉                 (CAP_MARGIN = 1.5)

The margin covers the spread of u(Δmin) over seeds: the check reads the verdict seeds'
median, and one seed's u(Δmin) lay up to 1.32x below the median of five in the committed
run of the earlier design (LSTM 1.19x, GRU 1.14x, CNN 1.32x, attention 1.20x). A model that
does not meet the criterion at Δmin on the calibration seed keeps ``--calibration-cap``: its
own u(Δmin) is unknown, and the verdict's baseline check says whether the verdict seeds met it.

The time budget (``--budget`` minutes of wall clock for the verdict's runs with ``--jobs``
processes) bounds the caps. The worst case, every run beyond Δmin censored at its cap, costs

    W = Σ_(task, m) seeds · (min(u_m,cal, cap_m) + (nΔ − 1) · cap_m) · s_m / jobs

with s_m the CPU seconds per update measured in m's calibration run (scoring included). When
W exceeds the budget every cap is scaled by one factor f < 1 (at least the window), so that
the worst case fits; the caps are then under CAP_FACTOR x, and the cap check says so
(INCONCLUSIVE) wherever a run is censored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...models.sequence_classifiers import MODELS
from ..base import Say
from .checks import CAP_FACTOR
from .jobs import run_arms
from .measure import Arm, Setting

CAP_MARGIN = 1.5  # the calibrated cap is CAP_FACTOR x this x the calibration seed's u(Δmin)

PerArm = Mapping[str, Mapping[str, Any]]  # task -> model -> value


@dataclass(frozen=True)
class Plan:
    """What the calibration measured and decided, per task and model: u(Δmin) on the
    calibration seed (None: censored at ``--calibration-cap``), CPU seconds per update, the
    cap the rule wants, the cap given (``wanted`` x ``scale``, when the budget binds), and the
    worst-case wall minutes of the verdict's runs under the caps given."""

    seed: int
    u: dict[str, dict[str, int | None]]
    seconds: dict[str, dict[str, float]]
    wanted: dict[str, dict[str, int]]
    caps: dict[str, dict[str, int]]
    scale: float
    worst_minutes: float
    budget_minutes: float

    def as_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "u_min": self.u, "seconds_per_update": self.seconds,
                "wanted_caps": self.wanted, "caps": self.caps, "scale": self.scale,
                "worst_minutes": self.worst_minutes, "budget_minutes": self.budget_minutes,
                "cap_factor": CAP_FACTOR, "cap_margin": CAP_MARGIN}  # fmt: skip


def wanted_cap(u: int | None, calibration_cap: int) -> int:
    """⌈CAP_FACTOR · CAP_MARGIN · u⌉, or ``calibration_cap`` when u is unknown (censored)."""
    if u is None:
        return calibration_cap
    return math.ceil(CAP_FACTOR * CAP_MARGIN * u - 1e-9)


def worst_seconds(caps: PerArm, u: PerArm, seconds: PerArm, seeds: int, deltas: int,
                  jobs: int) -> float:  # fmt: skip
    """W of the module docstring: wall seconds of the verdict's runs if every run beyond Δmin
    is censored at its cap (an unknown u(Δmin) counts as the cap)."""
    total = 0.0
    for t, by_model in caps.items():
        for m, cap in by_model.items():
            first = cap if u[t][m] is None else min(u[t][m], cap)
            total += seeds * (first + (deltas - 1) * cap) * seconds[t][m]
    return total / jobs


Caps = dict[str, dict[str, int]]  # task -> model -> cap


def fit_budget(wanted: PerArm, u: PerArm, seconds: PerArm, seeds: int, deltas: int, jobs: int,
               budget_s: float, window: int) -> tuple[Caps, float]:  # fmt: skip
    """The caps given and their scale: ``wanted`` when its worst case fits ``budget_s``, else
    every cap times the one factor f that makes it fit (the Δmin runs, which stop near their
    u, are not scaled), each at least ``window``."""
    def scaled(f: float) -> Caps:
        return {t: {m: max(window, math.floor(c * f)) for m, c in by.items()}
                for t, by in wanted.items()}  # fmt: skip

    if worst_seconds(wanted, u, seconds, seeds, deltas, jobs) <= budget_s:
        return scaled(1.0), 1.0
    fixed = sum(seeds * (c if u[t][m] is None else min(u[t][m], c)) * seconds[t][m]
                for t, by in wanted.items() for m, c in by.items()) / jobs  # fmt: skip
    per_cap = sum(seeds * (deltas - 1) * c * seconds[t][m]
                  for t, by in wanted.items() for m, c in by.items()) / jobs  # fmt: skip
    f = max(0.0, budget_s - fixed) / per_cap
    return scaled(f), f


def calibrate_caps(tasks: list[str], setting: Setting, seed: int, calibration_cap: int,
                   seeds: int, budget_minutes: float, jobs: int, say: Say) -> Plan:  # fmt: skip
    """Train every model at Δmin on ``seed`` (one run per task and model, ``jobs`` at a time)
    to the criterion or ``calibration_cap``; derive each arm's cap (module docstring)."""
    lo = setting.deltas[0]
    arms = [Arm(t, m, lo, seed) for t in tasks for m in MODELS]
    say(f"calibration (seed {seed}, not a verdict seed): every model at Δ={lo}, to the "
        f"criterion or {calibration_cap} updates")
    res = run_arms(arms, replace(setting, cap=calibration_cap), set(), jobs, say)
    u = {t: {m: None if res[Arm(t, m, lo, seed)]["censored"] else
             int(res[Arm(t, m, lo, seed)]["updates"]) for m in MODELS} for t in tasks}  # fmt: skip
    sec = {t: {m: res[Arm(t, m, lo, seed)]["cpu_seconds"] / res[Arm(t, m, lo, seed)]["steps_run"]
               for m in MODELS} for t in tasks}  # fmt: skip
    wanted = {t: {m: wanted_cap(u[t][m], calibration_cap) for m in MODELS} for t in tasks}
    n = len(setting.deltas)
    caps, scale = fit_budget(wanted, u, sec, seeds, n, jobs, 60 * budget_minutes,
                             setting.window)  # fmt: skip
    worst = worst_seconds(caps, u, sec, seeds, n, jobs) / 60
    plan = Plan(seed, u, {t: {m: round(s, 5) for m, s in by.items()} for t, by in sec.items()},
                wanted, caps, round(scale, 4), round(worst, 1), budget_minutes)  # fmt: skip
    for t in tasks:
        say(f"calibrated caps ({t}): " + "; ".join(
            f"{m} u(Δ={lo}) {'>' + str(calibration_cap) if u[t][m] is None else u[t][m]}, "
            f"{1000 * sec[t][m]:.0f} ms/update, cap {caps[t][m]}" for m in MODELS))  # fmt: skip
    say(f"worst case (every run beyond Δ={lo} censored): {worst:.1f} min with {jobs} jobs, "
        f"budget {budget_minutes:g} min" + ("" if scale >= 1 else (
            f": the budget binds, every cap scaled by {scale:.2f}, under the "
            f"{CAP_FACTOR}x the cap rule needs; raise --budget or shorten --deltas")))  # fmt: skip
    return plan


__all__ = ["CAP_MARGIN", "Plan", "calibrate_caps", "fit_budget", "wanted_cap", "worst_seconds"]
