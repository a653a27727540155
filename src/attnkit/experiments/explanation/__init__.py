"""Is attention an explanation? Jain & Wallace (2019, "Attention is not Explanation") against
Wiegreffe & Pinter (2019, "Attention is not not Explanation"), on a BiRNN text classifier with
additive attention (theirs, smaller), on two generated tasks whose deciding tokens are known
(``data.py``: ``marked``, a majority of marked tokens among distractors; ``docs``, attnkit's
docs task read as one word sequence).

Per task and seed (``jobs.py``): the attention model, the same with uniform weights, the
attention model from another initialisation, and the token MLP without context pooled
uniformly, by the transplanted weights, and by its own attention; each trained to a
validation plateau by ``fit_classifier``. Measured on the test examples (``measure.py``):
Kendall τ of attention, gradient and leave-one-out importance; Jain & Wallace's adversarial
search (the ε-max JSD); how far the two initialisations' attention lie apart; how often the
top token of each measure is a deciding one. Checked (``checks.py``): each paper's claims on
each task, with a verdict per task and paper; the experiment's verdict is REPRODUCED only
where every claim of both papers holds on every task (both can).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from .. import evidence as ev
from ..base import Experiment, Say, Tally, begin
from ..pool import run_each
from .checks import claim_verdicts, numbers, reported, task_checks
from .config import QUICK, ExplanationConfig
from .jobs import MIN_DELTA, seed_job


def _job(cfg: ExplanationConfig, item: tuple[str, int]) -> dict[str, Any]:
    task, seed = item
    return seed_job(task, seed, cfg.setting)


def run_experiment(cfg: ExplanationConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train and measure every (task, seed), ``cfg.jobs`` at a time; the checks."""
    items = [(t, s) for t in cfg.task_list for s in cfg.seed_list]
    t0 = begin(out, say, f"explanation experiment: tasks {', '.join(cfg.task_list)}, "
                         f"{cfg.seeds} seeds, 6 models each, {cfg.jobs} jobs at a time")
    tally = Tally(len(items), say)
    results: dict[tuple[str, int], dict[str, Any]] = {}

    def done(item: tuple[str, int], r: dict[str, Any]) -> None:
        results[item] = r
        runs = r["runs"]
        acc = {a: runs[a]["test_accuracy"] for a in ("attention", "uniform")}
        tally(f"{item[0]} seed {item[1]}: accuracy attention {acc['attention']:.3f}, "
              f"uniform {acc['uniform']:.3f}; τ(α,g) {r['tau']['attn_grad']:.2f}, "
              f"τ(g,LOO) {r['tau']['grad_loo']:.2f}; ε-max JSD {r['adversarial_jsd']:.3f} "
              f"({r['cpu_seconds']:.0f} s of CPU)")  # fmt: skip

    run_each(partial(_job, cfg), items, cfg.jobs, done)
    checks: list[ev.Check] = []
    by_task: dict[str, Any] = {}
    for task in cfg.task_list:
        seeds = [results[(task, s)] for s in cfg.seed_list]
        checks += task_checks(task, numbers(seeds), cfg.cap)
        by_task[task] = {"reported": reported(seeds), "seeds": seeds}
    return {
        "config": asdict(cfg),
        "recipe": {"optimiser": "Adam", "lr": cfg.lr, "clip": cfg.clip, "batch": cfg.batch_size,
                   "every": cfg.every, "patience": cfg.patience, "min_delta": MIN_DELTA,
                   "cap": cfg.cap, "epsilon": cfg.epsilon, "adversaries": cfg.adversaries,
                   "adv_steps": cfg.adv_steps},  # fmt: skip
        "tasks": by_task,
        "claims": claim_verdicts(checks, cfg.task_list),
        "cpu_seconds": round(sum(r["cpu_seconds"] for r in results.values()), 1),
        "total_seconds": round(time.perf_counter() - t0, 1),
        **ev.judged(checks),
    }


def rejudge(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a run's JSON) with its checks, per-task claims and verdict recomputed by
    today's ``checks.task_checks`` from its stored per-seed numbers; nothing retrained. The
    verdict the run printed stays as ``verdict_as_run``."""
    checks: list[ev.Check] = []
    for task, by in result["tasks"].items():
        checks += task_checks(task, numbers(by["seeds"]), result["config"]["cap"])
    as_run = result.get("verdict_as_run", result["verdict"])
    return {**result, "claims": claim_verdicts(checks, list(result["tasks"])),
            **ev.judged(checks), "verdict_as_run": as_run}  # fmt: skip


EXPERIMENT = Experiment.of(
    __name__,
    name="explanation",
    help="is attention an explanation? Jain & Wallace 2019 vs Wiegreffe & Pinter 2019 on a "
    "BiLSTM with additive attention",
    typical="19 min with --jobs 2 on a 2-core CPU (1,865 s of CPU)",
    description="Train a BiLSTM with additive attention, the same with uniform weights, a "
    "second initialisation, and a token MLP without context (uniform, transplanted and own "
    "attention weights), to a validation plateau, on two generated tasks whose deciding tokens "
    "are known (5 seeds each). Measure Kendall tau of attention, gradient and leave-one-out "
    "importance, Jain & Wallace's adversarial attention (the epsilon-max JSD), and top-token "
    "hits; check each paper's claims per task on 95% t-intervals over seeds. Writes "
    "OUT/explanation.{csv,json,png}; exits 0 REPRODUCED, 1 NOT REPRODUCED, 2 INCONCLUSIVE.",
    config=ExplanationConfig,
)

__all__ = ["EXPERIMENT", "QUICK", "ExplanationConfig", "rejudge", "run_experiment"]
