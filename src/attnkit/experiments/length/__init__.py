"""Score by source length, with and without attention: the shape of Bahdanau, Cho & Bengio
(2015), Figure 2. RNNencdec squeezes the whole source into one fixed-size vector c; RNNsearch
looks back at every annotation h_j through α_ij = softmax_j(v_aᵀ tanh(W_a s_{i-1} + U_a h_j)).
The paper: "the performance of RNNencdec dramatically drops as the length of the sentences
increases", while "RNNsearch-50, especially, shows no performance deterioration even with
sentences of length 50 or more" (Sec. 5.1).

Both models are trained with the same widths, the same data, the same batches and the same
number of updates (one pass over ``steps · batch_size`` generated pairs), each by
``attnkit.fit`` (the library call behind ``attnkit train``), for each of ``seeds`` training
seeds seed, seed+1, ... (initialisation and batch order; the data are generated once, from
``seed``); the test set is then decoded greedily and scored (BLEU, exact match) in bins of
source length.

Checks (thresholds fixed from the paper's claim before any run; evidence.py's contract: a
t-interval over the training seeds, 95%, three outcomes). Drops are relative,
1 − BLEU(longest bin) / BLEU(shortest bin), one per seed:
* (claim) RNNsearch's drop < ``MAX_SEARCH_DROP`` (0.2): "no performance deterioration";
* (claim) RNNencdec's drop > ``MIN_ENCDEC_DROP`` (0.5): it "dramatically drops";
* (claim) RNNsearch − RNNencdec BLEU on the longest bin > ``MIN_GAP`` (20 points);
* (design) the best model learned the task: RNNsearch's mean BLEU on the shortest bin >=
  ``LEARNED_BLEU`` (90); otherwise the verdict cannot come from this budget;
* (design) not every arm at the ceiling: both models' mean BLEU on the longest bin within
  ``CEILING_EPS`` (2) of 100 leaves no drop to show.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..._checks import check_ranges
from ...data.example import Example
from ...data.synthetic import check_max_len
from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from .. import evidence as ev
from ..base import Experiment, Pooled, Seeds, begin, option
from ..pool import train_all

MODELS = ("rnnencdec", "rnnsearch")  # without, with attention



@dataclass
class LengthConfig(Seeds, Pooled):
    task: str = option("copy", "copy | reverse | sort: a fixed-size vector must hold every symbol")
    min_len: int = option(5, "shortest source")
    max_len: int = option(50, "longest source")
    steps: int = option(800, "updates per model, the shared budget")
    batch_size: int = option(32, "pairs per update")
    emb: int = option(32, "embedding width of both models")
    hidden: int = option(64, "every hidden width of both models: encoder (per direction), "
                       "decoder, attention and summary")
    lr: float = option(3e-3, "Adam learning rate")
    valid_size: int = option(64, "validation pairs")
    test_size: int = option(540, "test pairs scored by length")
    bin_width: int = option(5, "source lengths per bin")
    seed: int = option(0, "data seed, and the first training seed")
    seeds: int = option(5, "training seeds seed, seed+1, ... (same data): an interval over them")

    def __post_init__(self) -> None:
        if self.task not in ("copy", "reverse", "sort"):
            raise ValueError(f"task {self.task!r}; choose copy, reverse or sort")
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(f"lengths {self.min_len}..{self.max_len}: need 1 <= min <= max")
        check_max_len(self.max_len)
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "steps", "batch_size", "emb", "hidden", "test_size", "bin_width", "valid_size",
            "jobs", "threads", "seeds"
        ))  # fmt: skip
        if not self.lr > 0:
            raise ValueError(f"--lr {self.lr}; it must be positive")

    @property
    def train_size(self) -> int:
        return self.steps * self.batch_size  # one epoch = exactly ``steps`` updates


QUICK = dict(steps=4, batch_size=8, emb=8, hidden=8, valid_size=8, test_size=46, jobs=1,
             seeds=2)  # fmt: skip


def run_name(model: str, seed: int) -> str:
    return f"{model}-s{seed}"


def train_config(cfg: LengthConfig, model: str, out: Path, seed: int | None = None) -> FitConfig:
    """The ``attnkit.fit`` config of ``model`` trained with ``seed`` (default ``cfg.seed``) on
    the data of ``cfg.seed``; identical for both models but the one width that only one
    model has (attention width / summary width). One epoch = exactly ``steps`` updates."""
    own = {"attn_hidden": cfg.hidden} if model == "rnnsearch" else {"context": cfg.hidden}
    widths = dict(emb=cfg.emb, enc_hidden=cfg.hidden, dec_hidden=cfg.hidden, maxout=cfg.hidden)
    return FitConfig(
        data=DataConfig(
            task=cfg.task,
            task_seed=cfg.seed,
            min_len=cfg.min_len,
            max_len=cfg.max_len,
            train_size=cfg.train_size,
            valid_size=cfg.valid_size,
            test_size=cfg.test_size,
        ),
        model=ModelConfig(model, "small", {**widths, **own, "dropout": 0.0}),
        train=TrainConfig(
            epochs=1,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            patience=0,
            save_every=max(cfg.steps // 10, 1),
            seed=cfg.seed if seed is None else seed,
            progress=False,
        ),
        out=out,
        overwrite=True,  # the experiment's own folder: a re-run replaces its models
        threads=cfg.threads,
    )


def train_argv(cfg: LengthConfig, model: str, out: Path, seed: int | None = None) -> list[str]:
    """The ``attnkit train`` command that trains the same model as ``train_config`` (recorded
    in the results, so that one model can be re-trained by hand)."""
    own = ["--attn-hidden", cfg.hidden] if model == "rnnsearch" else ["--context", cfg.hidden]
    args: list[Any] = [
        "train", "--task", cfg.task, "--task-seed", cfg.seed,
        "--min-len", cfg.min_len, "--max-len", cfg.max_len,
        "--train-size", cfg.train_size, "--valid-size", cfg.valid_size,
        "--test-size", cfg.test_size,
        "--model", model, "--emb", cfg.emb, "--enc-hidden", cfg.hidden,
        "--dec-hidden", cfg.hidden, "--maxout", cfg.hidden, *own, "--dropout", 0,
        "--batch-size", cfg.batch_size, "--lr", cfg.lr, "--epochs", 1, "--patience", 0,
        "--save-every", max(cfg.steps // 10, 1), "--seed", cfg.seed if seed is None else seed,
        "--threads", cfg.threads, "--no-progress", "--overwrite", "--out", out,
    ]  # fmt: skip
    return [str(a) for a in args]


def train_models(cfg: LengthConfig, out: Path, say: Any = print) -> dict[str, float]:
    """Train both models with every training seed into ``out/<model>-s<seed>`` (logs in
    ``out/<model>-s<seed>.log``), ``cfg.jobs`` at a time in a process pool; returns
    wall-clock seconds per run."""
    configs = {run_name(m, s): train_config(cfg, m, out / run_name(m, s), s)
               for s in cfg.seed_list for m in MODELS}  # fmt: skip
    return train_all(configs, jobs=cfg.jobs, steps=cfg.steps, log_dir=out, say=say)


def bins(cfg: LengthConfig) -> list[tuple[int, int]]:
    """[lo, hi] source-length bins of ``bin_width``; a short last bin joins the one before."""
    out = [
        (lo, min(lo + cfg.bin_width - 1, cfg.max_len))
        for lo in range(cfg.min_len, cfg.max_len + 1, cfg.bin_width)
    ]
    if len(out) > 1 and out[-1][1] - out[-1][0] + 1 < cfg.bin_width / 2:
        out[-2:] = [(out[-2][0], out[-1][1])]
    return out


def score_by_length(
    hyps: Sequence[Sequence[str]], examples: Sequence[Example], edges: Sequence[tuple[int, int]]
) -> list[dict[str, Any]]:
    """BLEU (sacrebleu, 0..100) and exact match (%) of the examples in each length bin."""
    from ...eval.text import score

    rows = []
    for lo, hi in edges:
        idx = [i for i, e in enumerate(examples) if lo <= len(e.src) <= hi]
        s = score([hyps[i] for i in idx], [examples[i] for i in idx]) if idx else None
        rows.append(
            {
                "src_len": f"{lo}-{hi}",
                "n": len(idx),
                "bleu": round(s.bleu, 2) if s else math.nan,
                "exact": round(100 * s.exact_match, 2) if s else math.nan,
            }
        )
    return rows


MAX_SEARCH_DROP = 0.2  # RNNsearch keeps >= 80% of its short-sentence BLEU on the longest bin
MIN_ENCDEC_DROP = 0.5  # RNNencdec loses at least half of it
MIN_GAP = 20.0  # and RNNsearch leads by 20 BLEU points there
LEARNED_BLEU = 90.0  # design: RNNsearch's mean BLEU on the shortest bin at least this
CEILING_EPS = 2.0  # design: both models' longest-bin BLEU within this of 100 -> no drop shows


def drop(table: list[dict[str, Any]]) -> float:
    """1 - BLEU(longest bin) / BLEU(shortest bin) of one model's bins; NaN when it scored 0 on
    the shortest bin (no drop is defined)."""
    short, long = table[0]["bleu"], table[-1]["bleu"]
    return 1.0 - long / short if short > 0 else math.nan


def _over_seeds(samples: Sequence[float]) -> ev.Interval:
    """The t-interval over the seeds, or an undefined (NaN) one when a sample is NaN (a model
    with 0 BLEU on the shortest bin): on_interval then says inconclusive."""
    if len(samples) >= 2 and all(math.isfinite(x) for x in samples):
        return ev.t_interval(samples)
    return ev.Interval(math.nan, math.nan, math.nan, len(samples))


def checks_of(by_seed: Sequence[dict[str, list[dict[str, Any]]]]) -> list[ev.Check]:
    """The checks of the module docstring from one ``{model: bins}`` table per training
    seed (``score_by_length``'s rows, shortest bin first)."""
    longest = {m: [t[m][-1]["bleu"] for t in by_seed] for m in MODELS}
    gaps = [a - b for a, b in zip(longest["rnnsearch"], longest["rnnencdec"], strict=True)]
    short_search = sum(t["rnnsearch"][0]["bleu"] for t in by_seed) / len(by_seed)
    return [
        ev.on_interval("RNNsearch relative BLEU drop, shortest -> longest bin",
                       _over_seeds([drop(t["rnnsearch"]) for t in by_seed]), MAX_SEARCH_DROP,
                       above=False),
        ev.on_interval("RNNencdec relative BLEU drop, shortest -> longest bin",
                       _over_seeds([drop(t["rnnencdec"]) for t in by_seed]), MIN_ENCDEC_DROP),
        ev.on_interval("RNNsearch - RNNencdec BLEU on the longest bin", _over_seeds(gaps),
                       MIN_GAP),
        ev.learned("RNNsearch mean BLEU on the shortest bin", short_search, LEARNED_BLEU),
        ev.ceiling("mean BLEU on the longest bin", longest, 100.0, eps=CEILING_EPS),
    ]  # fmt: skip


def mean_bins(by_seed: Sequence[dict[str, list[dict[str, Any]]]]) -> dict[str, list[dict]]:
    """Per model and bin: n, and BLEU and exact match averaged over the seeds (with the
    lowest and highest seed's BLEU)."""
    out: dict[str, list[dict]] = {}
    for m in MODELS:
        rows = []
        for i, first in enumerate(by_seed[0][m]):
            bleu = [t[m][i]["bleu"] for t in by_seed]
            exact = [t[m][i]["exact"] for t in by_seed]
            rows.append({"src_len": first["src_len"], "n": first["n"],
                         "bleu": round(sum(bleu) / len(bleu), 2),
                         "bleu_min": min(bleu), "bleu_max": max(bleu),
                         "exact": round(sum(exact) / len(exact), 2)})  # fmt: skip
        out[m] = rows
    return out


def run_experiment(cfg: LengthConfig, out: Path, say: Any = print) -> dict[str, Any]:
    """Train, decode the test set, score by length. Returns the JSON-able result."""
    seeds = cfg.seed_list
    from ...data.source import load_spec
    from ...decode import translate
    from ...train import checkpoint

    t0 = begin(
        out,
        say,
        f"length experiment: {cfg.task} {cfg.min_len}-{cfg.max_len} tokens, "
        f"{cfg.steps} updates of {cfg.batch_size} for each of RNNencdec and RNNsearch "
        f"(emb {cfg.emb}, hidden {cfg.hidden}), training seeds {seeds}, {cfg.jobs} at a time",
    )
    seconds = train_models(cfg, out, say)
    test = load_spec(train_config(cfg, "rnnsearch", out).data.spec()).test  # what both trained on
    edges = bins(cfg)
    by_seed: list[dict[str, list[dict[str, Any]]]] = []
    params = {}
    for s in seeds:
        table = {}
        for m in MODELS:
            ck = checkpoint.load(out / run_name(m, s) / "last")
            params[m] = sum(p.numel() for p in ck.model.parameters())
            hyps = translate(ck.model, test, ck.src_vocab, ck.tgt_vocab, batch_size=128).hyps
            table[m] = score_by_length(hyps, test, edges)
        by_seed.append(table)
    checks = checks_of(by_seed)
    return {
        "config": asdict(cfg),
        "seeds": seeds,
        "parameters": params,
        "train_commands": {run_name(m, s): " ".join(
            ["attnkit", *train_argv(cfg, m, out / run_name(m, s), s)])
            for s in seeds for m in MODELS},
        "train_seconds": {n: round(v, 1) for n, v in seconds.items()},
        "total_seconds": round(time.perf_counter() - t0, 1),
        "by_length": mean_bins(by_seed),
        "by_seed": {str(s): t for s, t in zip(seeds, by_seed, strict=True)},
        "drops": {m: [drop(t[m]) for t in by_seed] for m in MODELS},
        **ev.judged(checks),
    }  # fmt: skip



EXPERIMENT = Experiment.of(
    __name__,
    name="length",
    help="BLEU by source length, RNNencdec vs RNNsearch (Bahdanau 2015, Fig. 2)",
    typical="16 min with --jobs 2 on a loaded 2-core CPU (load 6-7; 8.6 min of CPU)",
    description="Train RNNencdec and RNNsearch with the same widths, data and number of "
    "updates on an algorithmic task with sources of 5-50 tokens, 5 training seeds, score the "
    "test set by source length, and check on 95% t-intervals over the seeds that RNNencdec "
    "falls with length while RNNsearch holds up. Writes OUT/length.{csv,json,png} and the "
    "checkpoints; exits 0 REPRODUCED, 1 NOT REPRODUCED, 2 INCONCLUSIVE.",
    config=LengthConfig,
)

__all__ = [
    "EXPERIMENT",
    "MODELS",
    "QUICK",
    "LengthConfig",
    "bins",
    "checks_of",
    "drop",
    "mean_bins",
    "run_experiment",
    "run_name",
    "train_argv",
    "train_config",
]
