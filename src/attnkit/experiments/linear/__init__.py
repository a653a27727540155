"""Linear attention: Katharopoulos, Vyas, Pappas & Fleuret (2020), "Transformers are RNNs:
Fast Autoregressive Transformers with Linear Attention".

The claims: (a) with φ(x) = elu(x) + 1 and the sums reassociated, causal attention costs time
and memory O(N) instead of O(N²) (abstract; §3.2-3.3); (b) as an RNN, decoding costs the
same per token whatever its position, with "constant memory" (§3.4), where softmax attention
reads a cache that grows with t; (c) quality: "Our linear transformers achieve similar
performance to vanilla transformers" (abstract); at an equal budget (Table 1, MNIST, 250
epochs) linear is a little worse: 0.644 against softmax's 0.621 bits/dim.

Here: (a) one causal attention (forward + backward, ``measure.layer_cost``) of linear
attention, softmax SDPA and a sliding window at n = 1k .. 16k, the log-log slopes of time
(bootstrap intervals over the repeats) and of saved bytes; (b) untrained transformer-lms of
the trained sizes decoding token by token in lockstep (``measure.decode_cost``), the time per
token at t = 256 .. 8k; (c) character LMs (``transformer-lm`` with ``attention=``) on the
generated text of ``--task lm``, softmax and linear (compared) and performer (reported,
``--arms``), equal sizes and parameters (φ has none), the same text and batches, 5 seeds,
each trained to a validation plateau (early stopping after ``patience`` epochs, a cap of
``epochs`` for every arm), the lowest valid bpc's weights measured on the test text.

Checks (thresholds fixed before any run from the claims; checks.py). Design checks read the
compared arms only:
* (design a) softmax's time slope wholly above 1.5: the grid sees its n² (else per-call costs
  hide the contrast);
* (claim a) linear's time slope and memory slope below 1.5, the midpoint of O(N) and O(N²),
  and softmax's time slope minus linear's above 0 (intervals);
* (design b) softmax's per-token time slope in t wholly above 0: the cache's growth shows;
* (claim b) linear's per-token slope below 0.5, the midpoint of O(1) and O(t), and softmax's
  minus linear's above 0;
* (design c) each compared arm learned the text (every seed's bpc <= 0.8 x unigram), every
  run ended on its plateau, the cap >= 3 x each arm's median stop;
* (claim c) bpc(linear) − bpc(softmax) > 0, the paper's direction with no margin (t-interval
  over the seeds' paired gaps); its size is reported beside the paper's.
Reported, not checked: the sliding window's slopes, the crossover n past which linear is
faster than SDPA, performer's gap to softmax, the decoding state's size.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .. import evidence as ev
from ..base import Experiment, Say, begin
from ..pool import train_lms
from .config import LinearConfig
from .jobs import make_jobs

QUICK = dict(
    train_size=600, valid_size=130, test_size=260, segment=64, dim=16, heads=2, layers=1,
    ff=16, epochs=3, patience=1, batch_size=4, seeds=2, arms="softmax,linear,performer",
    cost_n="64,128", repeats=2, window=16, decode_t="4,8", decode_tokens=2, jobs=1,
)  # fmt: skip


def run_experiment(cfg: LinearConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Measure the cost grid and the decoding times, train every arm for every seed at n,
    measure bpc, check."""
    from ...train.runtime import set_threads
    from .checks import cost_checks, quality_checks, reported, runs_of
    from .measure import cost_grid, decode_cost, measure_seed

    t0 = begin(
        out,
        say,
        f"linear experiment: transformer-lm with {cfg.arms} attention, d {cfg.dim}, "
        f"{cfg.heads} heads, {cfg.layers} layers, n = {cfg.segment}, early stopping "
        f"(patience {cfg.patience} epochs, cap {cfg.epochs}) with {cfg.batch_size} segments per "
        f"update over {cfg.train_size:,} characters, seeds {cfg.seed_list}; one attention's "
        f"cost at n = {cfg.cost_n}; decoding at t = {cfg.decode_t}",
    )
    set_threads(cfg.threads)
    say(f"measuring one attention's cost (forward + backward) at n = {cfg.cost_n}")
    cost = cost_grid(cfg)
    say(f"measuring the time per decoded token at t = {cfg.decode_t}")
    decode = decode_cost(cfg)
    steps, seconds = train_lms(cfg, make_jobs(cfg, out), out, say)
    say(f"measuring bpc on the test text at n = {cfg.segment}")
    per_seed = [measure_seed(cfg, s, out) for s in cfg.seed_list]
    numbers: dict[str, Any] = {
        "seeds": cfg.seed_list,
        "bits": {a: [p["bits"][a] for p in per_seed] for a in cfg.arm_list},
        "unigram": [p["unigram"] for p in per_seed],
        "curves": {a: [p["curves"][a] for p in per_seed] for a in cfg.arm_list},
        "patience": cfg.patience,
        "cap": cfg.epochs,
        "cost": cost,
        "decode": decode,
    }
    checks = cost_checks(cost, decode) + quality_checks(numbers)
    per_epoch = steps // cfg.epochs
    runs = runs_of(numbers["curves"], cfg.seed_list, cfg.patience, per_epoch)
    return {
        "config": asdict(cfg),
        "seeds": cfg.seed_list,
        "parameters": per_seed[0]["parameters"],
        "updates_cap": steps,
        "updates_per_epoch": per_epoch,
        "runs": runs,
        "cap_over_median_stop": {a: round(steps / statistics.median(r["updates"] for r in rs), 2)
                                 for a, rs in runs.items()},  # fmt: skip
        "segments": len(per_seed[0]["bits"]["softmax"]),
        "train_seconds": {n: round(s, 1) for n, s in seconds.items()},
        "total_seconds": round(time.perf_counter() - t0, 1),
        "bpc": {a: [round(sum(r) / len(r), 4) for r in rows]
                for a, rows in numbers["bits"].items()},  # fmt: skip
        "reported": reported(numbers, cost),
        "numbers": numbers,
        **ev.judged(checks),
    }


EXPERIMENT = Experiment.of(
    __name__,
    name="linear",
    help="linear attention vs softmax: cost in n, decoding cost in t, bpc gap "
    "(Katharopoulos 2020)",
    typical="12 min with --jobs 2 on a 2-core CPU (966 s of CPU)",
    description="Measure one causal attention's forward + backward time and saved memory at "
    "n = 1k .. 16k for linear attention (φ = elu + 1), softmax SDPA and a sliding window, and "
    "the time per decoded token at t = 256 .. 8k for linear attention as an RNN and softmax "
    "with a KV cache; train character Transformer LMs with softmax and linear attention "
    "(performer with --arms, reported) on the generated text of --task lm for 5 seeds, each to "
    "a validation plateau; check that linear's slopes in n lie below 1.5 and under softmax's, "
    "that its per-token slope in t lies below 0.5 and under softmax's, and that its test bpc "
    "is above softmax's (the paper's direction; t-interval over seeds). Writes "
    "OUT/linear.{csv,json,png} and the checkpoints.",
    config=LinearConfig,
)

__all__ = ["EXPERIMENT", "QUICK", "LinearConfig", "run_experiment"]
