"""Sparse: Child, Gray, Radford & Sutskever (2019), "Generating Long Sequences with Sparse
Transformers".

The claim (§4.2-4.3, §7 and Table 2): the factorised attention patterns, strided and fixed,
each query reaching O(√n) keys for a stride l ≈ √n, model long sequences as well as dense
attention (Table 2: fixed 0.99 vs dense 1.00 bits/byte on enwik8, where strided is 1.13;
strided 2.80 vs dense 2.82 on CIFAR-10, where fixed is 2.85) while
their cost grows as n·√n instead of n². Here: character language models (models/lm.py,
``transformer-lm`` with ``align=``) on the generated text of ``--task lm``, trained and
evaluated at length n (default 1,024), with dense causal attention, the strided and fixed
patterns (merged: each head attends A⁽¹⁾ ∪ A⁽²⁾, l = round(√n)), and a causal sliding window
of radius l (the local part alone), the same sizes, parameters (the alignments have none),
text and batches, for several seeds, each trained to a validation plateau by one rule (issue
28, "converged or curved"): valid bpc measured every epoch, early stopping after ``patience``
epochs without a lower one, the same cap of ``epochs`` for every arm, the lowest valid bpc's
weights measured; and the cost of one attention
(``attnkit.attend``, forward + backward, 4 heads) by alignment at n = 1k .. 8k: the bytes
autograd saves for backward (activation memory) and the time.

Checks (thresholds fixed from the claim before any run; evidence.py's contract):
* (design) dense learned the text: its test bpc at most 0.8 x the unigram bpc;
* (design) every run of dense, strided and fixed reached its plateau: its last ``patience``
  validations lowered its best valid bpc by less than 0.01 bpc (early stopping firing is
  the case of no lowering); a run cut by the cap while improving makes it INCONCLUSIVE;
* (design) the cost grid sees dense attention's n²: its memory slope p >= 1.8;
* (claim) strided matches dense: bpc(strided) - bpc(dense) < 0.05 bpc (paired bootstrap
  over seeds x test segments, 95%); the same for fixed;
* (claim) strided's memory grows as n·√n: the log-log slope p of saved bytes against n in
  [1.3, 1.7] (two checks, p > 1.3 and p < 1.7); the same for fixed.
The time slopes (with intervals from resampling the timed repeats) and the sliding window's
bpc are reported, not checked: the machine is shared, so times vary with its load.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .. import evidence as ev
from ..base import Experiment, Say, begin
from ..pool import train_lms
from .config import SparseConfig
from .jobs import make_jobs

QUICK = dict(
    train_size=600, valid_size=130, test_size=260, segment=64, dim=16, heads=2, layers=1,
    ff=16, epochs=3, patience=1, batch_size=4, seeds=2, arms="dense,strided,fixed", cost_n="64,128",
    repeats=2, jobs=1,
)  # fmt: skip


def run_experiment(cfg: SparseConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train every arm for every seed at n, measure bpc and the one-layer cost, check."""
    from ...train.runtime import set_threads
    from .checks import checks_of, memory_slope, runs_of, time_slope
    from .measure import cost_grid, measure_seed

    t0 = begin(
        out,
        say,
        f"sparse experiment: transformer-lm with {cfg.arms} attention (l = {cfg.stride}), "
        f"d {cfg.dim}, {cfg.heads} heads, {cfg.layers} layers, n = {cfg.segment}, "
        f"early stopping (patience {cfg.patience} epochs, cap {cfg.epochs}) with "
        f"{cfg.batch_size} segments per update over {cfg.train_size:,} characters, seeds "
        f"{cfg.seed_list}; cost of one attention at n = {cfg.cost_n}",
    )
    set_threads(cfg.threads)
    say(f"measuring one attention's cost (forward + backward) at n = {cfg.cost_n}")
    cost = cost_grid(cfg)
    steps, seconds = train_lms(cfg, make_jobs(cfg, out), out, say)
    say(f"measuring bpc on the test text at n = {cfg.segment}")
    per_seed = [measure_seed(cfg, s, out) for s in cfg.seed_list]
    numbers: dict[str, Any] = {
        "bits": {a: [p["bits"][a] for p in per_seed] for a in cfg.arm_list},
        "unigram": [p["unigram"] for p in per_seed],
        "curves": {a: [p["curves"][a] for p in per_seed] for a in cfg.arm_list},
        "patience": cfg.patience,
        "cost": cost,
    }
    checks = checks_of(numbers)
    slopes = {arm: {"memory": round(memory_slope(c), 3),
                    "time": [round(x, 3) for x in _interval(time_slope(c))]}
              for arm, c in cost.items()}  # fmt: skip
    return {
        "config": asdict(cfg),
        "seeds": cfg.seed_list,
        "stride": cfg.stride,
        "parameters": per_seed[0]["parameters"],
        "updates_cap": steps,
        "updates_per_epoch": steps // cfg.epochs,
        "runs": runs_of(numbers["curves"], cfg.seed_list, cfg.patience, steps // cfg.epochs),
        "segments": len(per_seed[0]["bits"]["dense"]),
        "train_seconds": {n: round(s, 1) for n, s in seconds.items()},
        "total_seconds": round(time.perf_counter() - t0, 1),
        "bpc": {a: [round(sum(r) / len(r), 4) for r in rows]
                for a, rows in numbers["bits"].items()},  # fmt: skip
        "slopes": slopes,
        "numbers": numbers,
        **ev.judged(checks),
    }


def _interval(i: ev.Interval) -> tuple[float, float, float]:
    return i.value, i.lo, i.hi


EXPERIMENT = Experiment.of(
    __name__,
    name="sparse",
    help="strided and fixed factorised attention vs dense: bpc at n = 1,024 and cost vs n "
    "(Child 2019)",
    typical="about 14 min with --jobs 2 on a 2-core CPU (806 s measured, load about 2)",
    description="Train character Transformer LMs with dense causal attention, the Sparse "
    "Transformer's strided and fixed patterns (l = √n) and a causal sliding window at length "
    "n on the generated text of --task lm for several seeds, each to a validation plateau "
    "(early stopping, the same patience and cap for every arm); measure test bits per character "
    "and the memory and time of one attention's forward + backward at n = 1k .. 8k; check the "
    "patterns match dense bpc within 0.05 and their memory grows as n^p, p in [1.3, 1.7]. "
    "A dense, strided or fixed run cut by the cap while improving makes it INCONCLUSIVE. "
    "Writes OUT/sparse.{csv,json,png} (with the learning curves) and the checkpoints.",
    config=SparseConfig,
)

__all__ = ["EXPERIMENT", "QUICK", "SparseConfig", "run_experiment"]
