"""The number of attention heads at constant width: Vaswani et al. (2017), "Attention Is All
You Need", Table 3 (A). The base Transformer (d_model 512) with h = 1, 4, 8, 16, 32 heads of
d_k = d_v = d_model / h, "keeping the amount of computation constant": "single-head attention
is 0.9 BLEU worse than the best setting, quality also drops off with too many heads" (§6.2).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V),   W_i^Q ∈ R^{d_model × d_model/h}   (§3.2.2)

Here: the same small Transformer (``attnkit.fit`` of ModelConfig("transformer", ...)) with
h = 1, 2, 4, 8, 16 heads at one d_model, so the parameters and the FLOPs are the same for
every h; the same data, batches, updates and seed for every h, repeated for ``seeds`` seeds
(each seed draws other data and another initialisation). Each model is scored on toy-ko's
test set: greedy BLEU, AER of the cross-attention against the gold links, and the mean
pairwise Jensen–Shannon divergence of the last layer's heads (measure.py). With
``--multi30k N`` the same models are also trained for N updates on the first N · batch_size
pairs of Multi30K (En → De, read from ``../shared/data/multi30k``; skipped with a message
when absent) and scored there too (BLEU and JS; Multi30K has no gold links).

Verdict (thresholds chosen from the claim, before any run): on toy-ko, the best h's mean BLEU
over seeds exceeds h = 1's by more than max(1.0 BLEU, 2 σ), σ the seed noise (the pooled
standard deviation over seeds of every h's BLEU; with one seed only the 1.0 margin applies),
and the best h reaches 50 BLEU (the task was learnt, so the comparison means something).
The paper's gap is 0.9 BLEU on WMT; 1.0 is the smallest difference worth calling one here.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..base import Experiment, Say, report_of
from ..base import verdict as verdict_text
from ..pool import train_all
from .config import HeadsConfig
from .jobs import Job, make_jobs

MARGIN = 1.0  # BLEU: the smallest gap called a difference (the paper's is 0.9)
NOISE_SIGMAS = 2.0  # and the gap must exceed 2 σ of the seed noise
MIN_BLEU = 50.0  # the best h must have learnt the task






QUICK = dict(
    heads="1,2",
    dim=8,
    ff=8,
    layers=1,
    steps=3,
    batch_size=8,
    valid_size=8,
    test_size=12,
    seeds=1,
    jobs=1,
)


def summarise(runs: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    """Per head count: mean and standard deviation over seeds of each measure."""
    rows = []
    for h in sorted({r["heads"] for r in runs if r["task"] == task}):
        mine = [r for r in runs if r["task"] == task and r["heads"] == h]
        row: dict[str, Any] = {"task": task, "heads": h, "seeds": len(mine)}
        for key in ("bleu", "exact", "aer", "aer_best_head", "js"):
            xs = [r[key] for r in mine if r[key] is not None and not math.isnan(r[key])]
            row[f"{key}_mean"] = round(statistics.fmean(xs), 4) if xs else math.nan
            row[f"{key}_std"] = round(statistics.stdev(xs), 4) if len(xs) > 1 else math.nan
        rows.append(row)
    return rows


def verdict(bleu: dict[int, list[float]]) -> tuple[list[str], dict[str, Any]]:
    """The checks of the module doc on BLEU per head count (one value per seed): returns
    (failed checks, each with its numbers; the checks' numbers)."""
    means = {h: statistics.fmean(xs) for h, xs in bleu.items()}
    best = max(means, key=lambda h: (means[h], -h))
    spreads = [statistics.variance(xs) for xs in bleu.values() if len(xs) > 1]
    noise = math.sqrt(statistics.fmean(spreads)) if spreads else math.nan
    need = MARGIN if math.isnan(noise) else max(MARGIN, NOISE_SIGMAS * noise)
    gap = means[best] - means[1]
    reasons = []
    if means[best] < MIN_BLEU:
        reasons.append(
            f"the best h={best} reached only {means[best]:.1f} BLEU (< {MIN_BLEU:.0f}): "
            "the task was not learnt"
        )
    if best == 1:
        reasons.append(f"one head is the best setting ({means[1]:.1f} BLEU)")
    elif not gap > need:
        reasons.append(
            f"h=1 is {gap:.2f} BLEU below the best h={best}, not more than "
            f"{need:.2f} (max of {MARGIN} and {NOISE_SIGMAS:g} x seed noise "
            f"{noise:.2f})"
        )
    checks = {
        "best_heads": best,
        "bleu_best": round(means[best], 2),
        "bleu_one_head": round(means[1], 2),
        "gap": round(gap, 2),
        "seed_noise": round(noise, 3),
        "needed_gap": round(need, 3),
    }
    return reasons, checks


def train_and_measure(
    cfg: HeadsConfig, named: dict[str, Job], out: Path, say: Say
) -> list[dict[str, Any]]:
    """Train the models of each task side by side (``pool.train_all``, ``cfg.jobs`` at a
    time; logs in ``out/NAME.log``), then score each here on ``cfg.threads`` threads."""
    from ...train.runtime import set_threads
    from .measure import measure

    seconds: dict[str, float] = {}
    for task in dict.fromkeys(j.task for j in named.values()):
        mine = {n: j for n, j in named.items() if j.task == task}
        steps = next(iter(mine.values())).steps
        configs = {n: j.config for n, j in mine.items()}
        seconds |= train_all(configs, jobs=cfg.jobs, steps=steps, log_dir=out, say=say)
    say(f"scoring {len(named)} models")
    set_threads(cfg.threads)
    return [
        {
            "task": j.task,
            "heads": j.heads,
            "seed": j.seed,
            **measure(Path(j.config.out)),
            "train_seconds": round(seconds[n], 1),
        }
        for n, j in named.items()
    ]


def run_experiment(cfg: HeadsConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train and score every model; returns the JSON-able result."""
    say(
        f"heads experiment: transformer d_model {cfg.dim}, {cfg.layers}+{cfg.layers} layers, "
        f"h = {cfg.heads}, {cfg.steps} updates of {cfg.batch_size} on toy-ko, seeds "
        f"{cfg.seed_list}, {cfg.jobs} at a time; output in {out}/"
    )
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    named = make_jobs(cfg, out, say)

    runs = train_and_measure(cfg, named, out, say)
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    toy = [r for r in runs if r["task"] == "toy-ko"]
    reasons, checks = verdict(
        {h: [r["bleu"] for r in toy if r["heads"] == h] for h in cfg.head_counts}
    )
    h_max, s0 = max(cfg.head_counts), cfg.seed_list[0]
    shown = next(r for r in toy if r["heads"] == h_max and r["seed"] == s0)["example"]
    for r in runs:
        del r["example"]  # one sentence's maps are kept: the largest h's, first seed
    return {
        "config": asdict(cfg),
        "parameters": {
            t: {
                str(r["heads"]): r["parameters"] for r in runs if r["task"] == t and r["seed"] == s0
            }
            for t in tasks
        },
        "updates": {j.task: j.steps for j in named.values()},
        "parameters_equal": len({r["parameters"] for r in runs if r["task"] == "toy-ko"}) == 1,
        "multi30k": "trained"
        if "multi30k" in tasks
        else ("absent: skipped" if cfg.multi30k else "not asked (--multi30k N)"),
        "total_seconds": round(time.perf_counter() - t0, 1),
        "runs": runs,
        "by_heads": [row for t in tasks for row in summarise(runs, t)],
        "example": {"heads": h_max, "seed": s0, **shown},
        "checks": checks,
        "verdict": verdict_text(reasons),
    }



EXPERIMENT = Experiment(
    name="heads",
    help="BLEU, AER and head diversity by number of heads (Vaswani 2017, Table 3 A)",
    typical="about 2.5 min idle (estimated); 7.5 min on a busy 2-core CPU",
    description="Train the same Transformer with 1, 2, 4, 8, 16 heads at constant d_model "
    "(same data, batches, updates and seeds) on toy-ko (and Multi30K with --multi30k N), "
    "score greedy BLEU, the AER of the cross-attention and the mean pairwise Jensen-Shannon "
    "divergence between heads, and check that one head is worse than the best h. Writes "
    "OUT/heads.{csv,json,png}, OUT/heads-maps.png and the checkpoints; exits 1 when the "
    "claim does not reproduce.",
    config=HeadsConfig,
    quick=QUICK,
    run=run_experiment,
    report=report_of(__name__),
)

__all__ = [
    "EXPERIMENT",
    "QUICK",
    "HeadsConfig",
    "run_experiment",
    "summarise",
    "train_and_measure",
    "verdict",
]
