"""How many updates a model needs to learn a dependency Δ tokens back: recurrent models vs
self-attention, and the gradient from the input Δ back.

The claim (Vaswani et al. 2017, §4 and Table 1): "Learning long-range dependencies is a key
challenge ... One key factor affecting the ability to learn such dependencies is the length
of the paths forward and backward signals have to traverse in the network. The shorter these
paths ..., the easier it is to learn long-range dependencies." Maximum path length: O(n) for
recurrent layers, O(log_k n) for dilated convolutions, O(1) for self-attention. No number is
given. The mechanism: in a recurrent network the gradient from an input Δ steps back passes
through Δ applications of the recurrence and shrinks roughly geometrically (Hochreiter 1991;
Bengio, Simard & Frasconi 1994). An LSTM can still bridge 1,000 steps (Hochreiter &
Schmidhuber 1997), so the claim is about how *fast* a dependency is learnt, not whether.

The run: the recall tasks of ``data.py`` (the answer Δ back among uniform distractors, K
symbols, chance 1/K; ``marked``: the answer is flagged; ``plain``: nothing flags it),
every Δ in sequences of the same length T = LEAD + Δmax + 1, so that only the distance
changes. For each task, each Δ of the grid, each seed and each of
four models (``attnkit.models.sequence_classifiers``: LSTM, GRU, causal dilated CNN, causal
self-attention; the others' widths fitted to the attention model's parameter count; every
model the same at every Δ), one model is
trained *from scratch at that Δ alone* by ``attnkit.train.classify.fit_classifier`` (Adam,
the same learning rate, clipping, batch size and the same batches for every model at one
(task, Δ, seed)) until it meets the criterion (90% over a window of fresh batches, see
``measure.py``) or its own cap of updates. Measured: updates-to-criterion, held-out accuracy
where training stopped, and ‖∂ℓ/∂e_{t−Δ}‖ at initialisation and after training.

The caps come first, from ``calibrate.py``, on a calibration seed outside the verdict's seeds:
each (task, model) is trained once at Δmin, and its cap is 15x that u(Δmin) (10x the cap rule
needs, and a margin for the spread over seeds), within a stated budget of wall time.

The checks: ``checks.py`` (thresholds fixed from the claim before any run).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...models.sequence_classifiers import MODELS
from .. import evidence as ev
from ..base import Experiment, Say, begin
from .calibrate import calibrate_caps
from .checks import cap_of, caps_of, gradient_checks, slopes, survival, task_checks, task_reported
from .config import DistanceConfig
from .jobs import run_arms
from .measure import CRITERION, Arm, width_of

QUICK = dict(deltas="2,4", tasks="marked", dim=8, layers=1, calibration_cap=4, window=2,
             batch_size=8, seeds=2, eval_size=16, grad_size=4, jobs=1)  # fmt: skip


def run_experiment(cfg: DistanceConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train every (task, model, Δ, seed) from scratch to the criterion or the cap; check."""
    grid, tasks, seeds, setting = cfg.grid, cfg.task_list, cfg.seed_list, cfg.setting
    arms = [Arm(t, m, d, s) for t in tasks for m in MODELS for d in grid for s in seeds]
    probes = {Arm(tasks[0], m, grid[0], s) for m in MODELS for s in seeds}
    caps_text = f"{cfg.cap} updates" if cfg.cap else "its own calibrated cap of updates"
    t0 = begin(
        out,
        say,
        f"distance experiment: recall the token Δ back ({', '.join(tasks)}; K={cfg.symbols}, "
        f"T = {setting.length} for every Δ in {grid}), each Δ trained from scratch to "
        f"{CRITERION:.0%} over {cfg.window} fresh batches or {caps_text} of "
        f"{cfg.batch_size}; "
        f"{', '.join(MODELS)} x {len(seeds)} seeds = {len(arms)} runs, {cfg.jobs} at a time",
    )
    plan = None
    if cfg.cap:
        caps = {t: {m: cfg.cap for m in MODELS} for t in tasks}
    else:  # before any verdict seed runs: the caps from the calibration seed alone
        plan = calibrate_caps(tasks, setting, cfg.calibration_seed, cfg.calibration_cap,
                              len(seeds), cfg.budget, cfg.jobs, say)  # fmt: skip
        caps = plan.caps
    res = run_arms(arms, setting, probes, cfg.jobs, say, caps)

    def table(t: str, m: str, key: str) -> list[list[Any]]:  # [Δ index][seed]
        return [[res[Arm(t, m, d, s)][key] for s in seeds] for d in grid]

    updates = {t: {m: table(t, m, "updates") for m in MODELS} for t in tasks}
    censored = {t: {m: table(t, m, "censored") for m in MODELS} for t in tasks}
    grad_init = {m: [res[Arm(tasks[0], m, grid[0], s)]["grad_init"] for s in seeds]
                 for m in MODELS}  # [seed][Δ index]  # fmt: skip
    slope = {t: {m: ev.t_interval(slopes(grid, updates[t][m])) for m in MODELS} for t in tasks}
    result = {
        "config": asdict(cfg),
        "deltas": grid,
        "tasks": tasks,
        "seeds": seeds,
        "length": setting.length,
        "chance": 1 / cfg.symbols,
        "criterion": CRITERION,
        "parameters": {m: res[Arm(tasks[0], m, grid[0], seeds[0])]["parameters"] for m in MODELS},
        "widths": {m: width_of(m, setting) for m in MODELS},
        "updates_rule": {"cap": cfg.cap, "window": cfg.window, "batch_size": cfg.batch_size,
                         "lr": cfg.lr, "clip": cfg.clip, "optimiser": "Adam",
                         "same_batches": True},  # fmt: skip
        "caps": caps,
        "calibration": None if plan is None else plan.as_json(),
        "updates": updates,
        "censored": censored,
        "accuracy_end": {t: {m: table(t, m, "accuracy_end") for m in MODELS} for t in tasks},
        "curves": {t: {m: table(t, m, "curve") for m in MODELS} for t in tasks},
        "slope": {t: {m: [i.value, i.lo, i.hi] for m, i in s.items()} for t, s in slope.items()},
        "grad_init": grad_init,
        "grad_trained": {t: {m: table(t, m, "grad_trained") for m in MODELS} for t in tasks},
        "train_seconds": round(sum(r["train_seconds"] for r in res.values()), 1),
        "cpu_seconds": round(sum(r["cpu_seconds"] for r in res.values()), 1),
        "total_seconds": round(time.perf_counter() - t0, 1),
    }
    return {**result, **judge(result)}


def judge(result: dict[str, Any]) -> dict[str, Any]:
    """The censoring-aware summaries, the checks and the verdict of a run's numbers
    (``updates``, ``censored``, ``grad_init``, the caps and the window): the JSON's
    ``survival``, ``checks``, ``reported_checks`` and ``verdict``."""
    grid, tasks, caps = result["deltas"], result["tasks"], caps_of(result)
    window = result["config"]["window"]
    updates, censored = result["updates"], result["censored"]
    checks = [c for t in tasks
              for c in task_checks(t, grid, updates[t], censored[t], window, caps[t])]  # fmt: skip
    reported = [c for t in tasks for c in task_reported(t, grid, updates[t], censored[t])]
    reported += gradient_checks(result["grad_init"])
    return {
        "survival": {t: {m: [survival(updates[t][m][i], censored[t][m][i], cap_of(caps[t], m))
                             for i in range(len(grid))] for m in MODELS} for t in tasks},
        "reported_checks": [c.as_json() for c in reported],
        **ev.judged(checks),
    }


def rejudge(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a run's JSON) with its survival summaries, checks and verdict computed again
    from its per-run numbers by today's ``judge``, without training anything."""
    return {**result, **judge(result)}


EXPERIMENT = Experiment.of(
    __name__,
    name="distance",
    help="updates to learn a dependency Δ back (10..80): LSTM, GRU, CNN vs self-attention",
    typical="about 14 min with --jobs 2 on a quiet 2-core CPU (at most about 22: the budget)",
    description="Train an LSTM, a GRU, a causal dilated CNN and a causal self-attention model "
    "(same parameter budget, same batches, optimiser and learning rate) from scratch at each "
    "distance Δ = 10, 15, 20, 40, 80 separately (one sequence length, T = 91), to recall the "
    "token Δ back among distractors (flagged; --tasks plain: unflagged; --tasks assoc: the "
    "value after the key the query names), until 90% accuracy over fresh batches or the "
    "model's own cap of updates: 15x its u(Δmin) on a calibration seed outside the verdict's "
    "(--calibration-seed), within --budget minutes; over 5 seeds, check that the recurrent "
    "models' updates-to-criterion grow more from Δmin to Δmax than attention's (paired per "
    "seed; censored runs are bounds: a pass needs the lower bounds to exclude 0, a fail needs "
    "no censoring; a cap under 10x a censored model's own u(Δmin) is INCONCLUSIVE); report "
    "the Kaplan-Meier medians, the means restricted to the cap and the gradient from the "
    "input Δ back at initialisation. Writes OUT/distance.{csv,json,png}; 95% t-intervals over "
    "seeds; exits 0 REPRODUCED, 1 NOT REPRODUCED, 2 INCONCLUSIVE.",
    config=DistanceConfig,
)

__all__ = ["EXPERIMENT", "QUICK", "DistanceConfig", "judge", "rejudge", "run_experiment"]
