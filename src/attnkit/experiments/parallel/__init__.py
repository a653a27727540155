"""Self-attention parallelises, recurrence does not: Vaswani et al. (2017), "Attention Is All
You Need", Sec. 4 and Table 1. Per layer, a recurrent layer needs O(n) *sequential
operations* for a sentence of n tokens (state i needs state i-1), self-attention O(1) (every
position at once, O(n²·d) work in a few wide matrix products).

For sentence lengths n (source = target = n random tokens, one fixed batch size) this
measures, for attnkit's RNNsearch and Transformer (built by ``attnkit.models.build_model``
with similar parameter counts):

* the **sequential depth** of a training step: the longest path, in autograd nodes, from the
  loss to a parameter in the graph the backward pass walks (``graph_depth``; the forward pass
  made the same chain of ops). Nodes on one path must run one after the other; nodes off it
  can run side by side;
* the number of **recurrent cell calls** in one forward pass, counted by forward hooks
  (``count_cell_calls``);
* the **time of one training step** (forward + backward + gradient clipping + Adam: the
  library's ``attnkit.train.loop.train_step``), min and median of ``repeats`` timed steps
  after ``warmup`` untimed ones, the two models timed in turn at each repeat so that both
  see the same load; and the time per target token, time / (batch · n);
* the exponent k of a power law y ∝ n^k fitted to each of these (least squares in log-log);
  for the step time, fitted to the median of the repeats at each n, with a 95% interval from
  resampling the repeats at each n and refitting (``evidence.exponent_interval``).

Checks (thresholds set from the claim before any run; evidence.py's contract, three
outcomes). Depth and cell calls are exact counts with no sampling error: their interval is
the point [v, v] (``evidence.point``). The timing checks are on bootstrap intervals.

* (claim) RNNsearch's depth grows about linearly: exponent > ``MIN_RNN_DEPTH_EXPONENT``
  (0.8; 1 is linear, the fixed part of the graph lowers it at small n);
* (claim) the Transformer's depth is constant: max / min over the lengths <
  ``MAX_TF_DEPTH_RATIO`` (1.05);
* (claim) RNNsearch makes about one cell call per token and direction (exponent >
  ``MIN_RNN_CALLS_EXPONENT`` = 0.9), the Transformer none (its most calls at any n < 0.5,
  i.e. 0);
* (claim) RNNsearch's step time grows with n: exponent > ``MIN_RNN_TIME_EXPONENT`` (0.7);
* (claim) the Transformer's step time grows clearly slower: RNNsearch's exponent minus the
  Transformer's > ``MIN_TIME_EXPONENT_GAP`` (0.25), both refitted on each resample.

The depth checks are exact properties of the graphs; the timing checks depend on the machine
(on a few CPU cores a Transformer's step also grows with n: its work does).

Legend: B batch, n sentence length (source and target), V vocabulary.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ..._checks import check_ranges
from ...data.batching import Batch
from ...models import Seq2Seq, build_seq2seq
from ...train.config import TrainConfig
from ...train.loop import Trainer, loss_of, train_step
from ...train.runtime import torch_threads
from .. import evidence as ev
from ..base import Experiment, option, power_exponent
from .measure import count_cell_calls, graph_depth, time_steps

MODELS = ("rnnsearch", "transformer")  # recurrent, self-attention



@dataclass
class ParallelConfig:
    lengths: str = option("8,16,32,64,128,256", "sentence lengths n, comma-separated")
    batch_size: int = option(32, "sentences per step, the same at every n")
    vocab: int = option(32, "vocabulary of the random tokens")
    emb: int = option(32, "RNNsearch embedding width")
    hidden: int = option(
        64, "RNNsearch widths: encoder (per direction), decoder, attention, maxout"
    )
    dim: int = option(48, "Transformer model width d")
    ff: int = option(192, "Transformer feed-forward width")
    heads: int = option(4, "Transformer heads")
    layers: int = option(2, "Transformer layers, encoder and decoder each")
    warmup: int = option(2, "untimed steps per model and length")
    repeats: int = option(5, "timed steps per model and length")
    threads: int = option(2, "torch intra-op threads")
    seed: int = option(0, "initialisation and token seed")

    def __post_init__(self) -> None:
        ns = self.ns  # parses, or raises
        if len(ns) < 2 or len(set(ns)) != len(ns) or min(ns) < 1:
            raise ValueError(
                f"--lengths {self.lengths!r}: give at least two different lengths >= 1, "
                "e.g. 8,16,32 (the exponents are fitted across them)"
            )
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "batch_size", "emb", "hidden", "dim", "ff", "heads", "layers", "repeats", "threads"
        ))  # fmt: skip
        if self.vocab < 4:
            raise ValueError(f"--vocab {self.vocab}: need at least 4 (3 ids are reserved)")
        if self.warmup < 0:
            raise ValueError(f"--warmup {self.warmup}; it must not be negative")
        if self.dim % self.heads or self.dim % 2:
            raise ValueError(f"--dim {self.dim} must be even and divisible by --heads "
                             f"{self.heads}")  # fmt: skip

    @property
    def ns(self) -> list[int]:
        try:
            return sorted(int(x) for x in self.lengths.split(",") if x.strip())
        except ValueError:
            raise ValueError(
                f"--lengths {self.lengths!r}: expected comma-separated integers, e.g. 8,16,32"
            ) from None


QUICK = dict(lengths="4,8", batch_size=4, emb=8, hidden=8, dim=8, ff=16, heads=2, layers=1,
             warmup=0, repeats=1, threads=1)  # fmt: skip


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
    """Per model, per length in ``cfg.ns``: depth, nodes, cell calls, min/median step time
    and every timed step's seconds."""
    models = {m: build(cfg, m) for m in MODELS}
    trainers = {
        m: Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3),
                   TrainConfig(lr=1e-3, clip=1.0, progress=False))
        for m, model in models.items()
    }  # fmt: skip
    keys = ("depth", "nodes", "cell_calls", "seconds_min", "seconds_median", "seconds")
    out: dict[str, dict[str, list[Any]]] = {m: {k: [] for k in keys} for m in MODELS}
    for n in cfg.ns:
        b = random_batch(cfg.batch_size, n, cfg.vocab, cfg.seed + n)
        for m in MODELS:
            for k, v in sequential_ops(models[m], b).items():
                out[m][k].append(v)
        steps = [lambda t=trainers[m], b=b: train_step(t, b, 1) for m in MODELS]
        times = time_steps(steps, cfg.warmup, cfg.repeats)
        for m, ts in zip(MODELS, times, strict=True):
            out[m]["seconds_min"].append(min(ts))
            out[m]["seconds_median"].append(statistics.median(ts))
            out[m]["seconds"].append(ts)
        say(f"  n={n:4d}: " + "  ".join(
            f"{m} depth {out[m]['depth'][-1]:6d}, {1e3 * out[m]['seconds_min'][-1]:8.1f} ms"
            for m in MODELS))  # fmt: skip
    return out


MIN_RNN_DEPTH_EXPONENT = 0.8
MAX_TF_DEPTH_RATIO = 1.05
MIN_RNN_CALLS_EXPONENT = 0.9
MIN_RNN_TIME_EXPONENT = 0.7
MIN_TIME_EXPONENT_GAP = 0.25


def exponents(ns: Sequence[int], table: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    """Fitted n-exponents per model: of depth and cell calls (exact), and of the median step
    time with its 95% bootstrap interval over the repeats (``seconds_ci``)."""
    out: dict[str, Any] = {}
    for m in MODELS:
        t = ev.exponent_interval(ns, table[m]["seconds"])
        out[m] = {"depth": power_exponent(ns, table[m]["depth"]),
                  "cell_calls": power_exponent(ns, table[m]["cell_calls"]),
                  "seconds": t.value, "seconds_ci": [t.lo, t.hi]}  # fmt: skip
    return out


def checks_of(ns: Sequence[int], table: dict[str, dict[str, list[Any]]]) -> list[ev.Check]:
    """The checks of the module docstring on the measured table (``measure``'s: per model
    "depth", "cell_calls" per n, "seconds" the timed repeats per n)."""
    rnn, tf = table["rnnsearch"], table["transformer"]
    depth_ratio = max(tf["depth"]) / min(tf["depth"]) if min(tf["depth"]) > 0 else math.inf
    k = len(ns)

    def gap(med: list[float]) -> float:  # the medians of RNNsearch's n, then the Transformer's
        return power_exponent(ns, med[:k]) - power_exponent(ns, med[k:])

    return [
        ev.on_interval("RNNsearch depth exponent in n",
                       ev.point(power_exponent(ns, rnn["depth"])), MIN_RNN_DEPTH_EXPONENT),
        ev.on_interval("Transformer depth, max / min over n", ev.point(depth_ratio),
                       MAX_TF_DEPTH_RATIO, above=False),
        ev.on_interval("RNNsearch cell-call exponent in n",
                       ev.point(power_exponent(ns, rnn["cell_calls"])), MIN_RNN_CALLS_EXPONENT),
        ev.on_interval("Transformer recurrent cell calls (most at any n)",
                       ev.point(max(tf["cell_calls"])), 0.5, above=False),
        ev.on_interval("RNNsearch step-time exponent in n (medians)",
                       ev.exponent_interval(ns, rnn["seconds"]), MIN_RNN_TIME_EXPONENT),
        ev.on_interval("step-time exponent RNNsearch - Transformer",
                       ev.bootstrap_medians([*rnn["seconds"], *tf["seconds"]], gap),
                       MIN_TIME_EXPONENT_GAP),
    ]  # fmt: skip


def run_experiment(cfg: ParallelConfig, out: Path, say: Any = print) -> dict[str, Any]:
    """Measure both models at every length; the JSON-able result with the verdict."""
    out.mkdir(parents=True, exist_ok=True)
    params = {m: sum(p.numel() for p in build(cfg, m).parameters()) for m in MODELS}
    say(
        f"parallel experiment: training-step depth and time at n = {cfg.lengths} "
        f"(batch {cfg.batch_size}, {cfg.threads} thread(s), min of {cfg.repeats} after "
        f"{cfg.warmup} warm-up); RNNsearch {params['rnnsearch']:,} params, "
        f"Transformer {params['transformer']:,}"
    )
    with torch_threads(cfg.threads):
        t0 = time.perf_counter()
        table = measure(cfg, say)
    checks = checks_of(cfg.ns, table)
    return {
        "config": asdict(cfg),
        "lengths": cfg.ns,
        "parameters": params,
        "threads": cfg.threads,
        "by_length": table,
        "total_seconds": round(time.perf_counter() - t0, 1),
        "exponents": exponents(cfg.ns, table),
        **ev.judged(checks),
    }



EXPERIMENT = Experiment.of(
    __name__,
    name="parallel",
    help="sequential depth and step time by sentence length, RNNsearch vs Transformer "
    "(Vaswani 2017, Table 1)",
    typical="7.8 min at load 6-8 on a 2-core CPU (3.9 min of CPU); 69 s with --threads 1",
    description="Time training steps of RNNsearch and a Transformer of similar size on random "
    "batches of sentences of n = 8..256 tokens, measure the longest path of each step's "
    "autograd graph and the recurrent cell calls, fit exponents in n, and check that the "
    "RNN's sequential depth grows linearly while the Transformer's is constant, and that the "
    "RNN's step time grows faster (time exponents with bootstrap intervals over the repeats). "
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
]
