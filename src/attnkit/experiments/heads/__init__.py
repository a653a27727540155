"""The number of attention heads at constant width: Vaswani et al. (2017), "Attention Is All
You Need", Table 3 (A). The base Transformer (d_model 512, trained 100K steps on WMT14 En-De)
with h = 1, 4, 8, 16, 32 heads of d_k = d_v = d_model / h, "keeping the amount of computation
constant": "While single-head attention is 0.9 BLEU worse than the best setting, quality also
drops off with too many heads" (§6.2; newstest2013 dev BLEU 24.9, 25.5, 25.8, 25.8, 25.4 and
perplexity 5.29, 5.00, 4.92, 4.91, 5.01).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V),   W_i^Q ∈ R^{d_model × d_model/h}   (§3.2.2)

Here: one small Transformer (``attnkit.fit`` of ModelConfig("transformer", ...)) with h heads
of d_k = d_model / h, so the parameters and the FLOPs are the same for every h, trained to a
validation plateau (early stopping on the valid loss, the same patience and cap of epochs for
every arm), ``seeds`` seeds. The default, fixed from calibration runs on seeds 900-905: d_model
128, h = 1, 2, 4, 8 (d_k = 128 ... 16, inside the paper's range), toy-ko (each seed draws other
sentences) with 500 training pairs, checked, and 1000, run for the trend with data and
reported, not checked (``--toy-report``); the first ``multi30k`` pairs of Multi30K En -> De
(``--tasks multi30k``, read from ``../shared/data/multi30k``; skipped with a message when
absent). Each early-stopped model is scored on its test set: greedy BLEU (the paper's
metric), test and valid perplexity, AER against toy-ko's gold links, the heads' mean pairwise
JS (measure.py). The checks are in checks.py: both halves of the sentence, on t-intervals of
the per-seed test-BLEU gaps, the best h chosen on validation perplexity, the design checks
on the compared arms of each setting.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..base import Experiment, Say, begin
from ..evidence import verdict_of
from ..pool import train_all
from .checks import judge
from .config import HeadsConfig
from .jobs import Job, make_jobs

QUICK = dict(
    heads="1,2,4",
    dim=8,
    ff=8,
    layers=1,
    max_epochs=2,
    patience=1,
    toy_train="24",
    toy_report="",
    multi30k=0,
    batch_size=8,
    valid_size=8,
    test_size=12,
    seeds=2,
    jobs=1,
)

MEASURES = ("bleu", "test_ppl", "valid_ppl", "exact", "aer", "aer_best_head", "js", "epochs")


def summarise(runs: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    """Per head count: mean and standard deviation over seeds of each measure, and how many
    runs ended on the plateau."""
    rows = []
    for h in sorted({r["heads"] for r in runs if r["task"] == task}):
        mine = [r for r in runs if r["task"] == task and r["heads"] == h]
        row: dict[str, Any] = {"task": task, "heads": h, "seeds": len(mine)}
        for key in MEASURES:
            xs = [r[key] for r in mine if r[key] is not None and not math.isnan(r[key])]
            row[f"{key}_mean"] = round(statistics.fmean(xs), 4) if xs else math.nan
            row[f"{key}_std"] = round(statistics.stdev(xs), 4) if len(xs) > 1 else math.nan
        row["plateau"] = sum(bool(r["plateau"]) for r in mine)
        rows.append(row)
    return rows


def train_and_measure(
    cfg: HeadsConfig, named: dict[str, Job], out: Path, say: Say
) -> list[dict[str, Any]]:
    """Train every model (``pool.train_all``, ``cfg.jobs`` at a time; logs in
    ``out/NAME.log``), then score each here on ``cfg.threads`` threads."""
    from ...train.runtime import set_threads
    from .measure import measure

    configs = {n: j.config for n, j in named.items()}
    caps = {n: j.cap for n, j in named.items()}
    seconds = train_all(configs, jobs=cfg.jobs, steps=caps, log_dir=out, say=say)
    say(f"scoring {len(named)} models")
    set_threads(cfg.threads)
    return [
        {
            "task": j.task,
            "heads": j.heads,
            "seed": j.seed,
            **measure(Path(j.config.out), cfg.patience),
            "train_seconds": round(seconds[n], 1),
        }
        for n, j in named.items()
    ]


def run_experiment(cfg: HeadsConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train and score every model, check both halves of the claim; the JSON-able result."""
    t0 = begin(
        out,
        say,
        f"heads experiment: transformer d_model {cfg.dim}, {cfg.layers}+{cfg.layers} layers, "
        f"h = {cfg.heads}, trained to a plateau (patience {cfg.patience} epochs, cap "
        f"{cfg.max_epochs}), seeds {cfg.seed_list}, {cfg.jobs} at a time",
    )
    named = make_jobs(cfg, out, say)
    runs = train_and_measure(cfg, named, out, say)
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    h_max, s0 = max(cfg.head_counts), cfg.seed_list[0]
    shown = next(r for r in runs if r["heads"] == h_max and r["seed"] == s0)["example"]
    for r in runs:
        del r["example"], r["bleu_stats"]  # one sentence's maps are kept: largest h, 1st seed
    return {
        "config": asdict(cfg),
        "parameters": {
            t: {
                str(r["heads"]): r["parameters"] for r in runs if r["task"] == t and r["seed"] == s0
            }
            for t in tasks
        },
        "parameters_equal": parameters_equal(runs),
        "multi30k": "trained"
        if "multi30k" in tasks
        else (
            "absent: skipped"
            if cfg.multi30k and "multi30k" in cfg.task_list
            else "not asked (--tasks, --multi30k)"
        ),
        "total_seconds": round(time.perf_counter() - t0, 1),
        "runs": runs,
        "by_heads": [row for t in tasks for row in summarise(runs, t)],
        "example": {"task": tasks[0], "heads": h_max, "seed": s0, **shown},
        **judge_settings(asdict(cfg), runs, trend_settings(cfg)),
    }


def parameters_equal(runs: list[dict[str, Any]]) -> bool:
    """Whether every h has the same parameter count within each (task, seed): the arms a
    check compares. Counts differ across seeds, whose generated texts give different
    vocabularies, and that says nothing about the arms."""
    counts: dict[tuple[str, int], set[int]] = {}
    for r in runs:
        counts.setdefault((r["task"], r["seed"]), set()).add(r["parameters"])
    return all(len(c) == 1 for c in counts.values())


def trend_settings(cfg: HeadsConfig) -> set[str]:
    """The names of the settings run for the trend with data only (``--toy-report``)."""
    return {f"toy-ko-{n}" for n in cfg.report_sizes}


def judge_settings(cfg: dict[str, Any], runs: list[dict[str, Any]], trend: set[str]
                   ) -> dict[str, Any]:  # fmt: skip
    """Every setting's checks (``checks.judge``) from the runs and the config (as a dict):
    ``checks``, ``reported_checks`` (besides each setting's reported ones, every check of a
    ``trend`` setting), ``verdicts`` (the checked settings), ``trend_verdicts`` (what each
    trend setting's checks would read, not part of the verdict) and ``verdict``."""
    d_k_min = cfg["dim"] // max(int(h) for h in str(cfg["heads"]).split(","))
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    both = {t: judge(t, [r for r in runs if r["task"] == t], seeds=cfg["seeds"],
                     d_k_min=d_k_min, cap=cfg["max_epochs"]) for t in tasks}  # fmt: skip
    checked = [t for t in tasks if t not in trend]
    every = [c for t in checked for c in both[t][0]]
    return {
        "checks": [c.as_json() for c in every],
        "reported_checks": [c.as_json() for t in tasks for c in
                            (both[t][1] if t in checked else both[t][0] + both[t][1])],
        "verdicts": {t: verdict_of(both[t][0]) for t in checked},
        "trend_verdicts": {t: verdict_of(both[t][0]) for t in tasks if t in trend},
        "verdict": verdict_of(every),
    }  # fmt: skip


def rejudge(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a run's JSON) judged again by today's checks (``judge_settings``) from its
    stored runs, nothing trained; its checks, reported checks and verdicts recomputed."""
    trend = set(result.get("trend_verdicts", {}))
    return {**result, **judge_settings(result["config"], result["runs"], trend)}


EXPERIMENT = Experiment.of(
    __name__,
    name="heads",
    help="BLEU by number of heads at constant d_model, trained to a plateau (Vaswani 2017, "
    "Table 3 A)",
    typical="27 min measured with --jobs 2 on a shared 2-core CPU (10 seeds)",
    description="Train the same Transformer (d_model 128) with 1, 2, 4, 8 heads of d_k = "
    "d_model / h to a validation plateau (early stopping, the same patience and cap for every "
    "arm), 10 seeds, on toy-ko with 500 training pairs (checked) and 1000 (the trend with data, "
    "reported); Multi30K with --tasks multi30k. Score test BLEU and perplexity, and check "
    "Table 3 (A) on t-intervals over the per-seed gaps: one head is worse than the best other "
    "h, and (where the largest h keeps d_k >= 16, the paper's smallest) the largest h is "
    "worse than the best other h; design checks (converged, cap >= 3x median stop, off the "
    "floor, best arm learnt and below the ceiling, 5 seeds at least) on the compared arms of each "
    "setting. Writes OUT/heads.{csv,json,png}, OUT/heads-maps.png and the checkpoints; exits "
    "0 REPRODUCED, 1 NOT REPRODUCED, 2 INCONCLUSIVE.",
    config=HeadsConfig,
)

__all__ = [
    "EXPERIMENT",
    "QUICK",
    "HeadsConfig",
    "judge_settings",
    "parameters_equal",
    "rejudge",
    "run_experiment",
    "summarise",
    "train_and_measure",
    "trend_settings",
]
