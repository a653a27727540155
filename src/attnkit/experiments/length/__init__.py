"""Score by source length, with and without attention: the shape of Bahdanau, Cho & Bengio
(2015), Figure 2. RNNencdec squeezes the whole source into one fixed-size vector c; RNNsearch
looks back at every annotation h_j through α_ij = softmax_j(v_aᵀ tanh(W_a s_{i-1} + U_a h_j)).
The paper: "the performance of RNNencdec dramatically drops as the length of the sentences
increases", while RNNsearch "does not deteriorate" (Sec. 5.1).

Both models are trained with the same widths, the same data, the same batches and the same
number of updates (one pass over ``steps · batch_size`` generated pairs), each by
``attnkit.fit`` (the library call behind ``attnkit train``); the test set is then decoded
greedily and scored (BLEU, exact match) in bins of source length.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..._checks import check_ranges
from ...data.example import Example
from ...data.synthetic import check_max_len
from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from ..base import Experiment, begin, option, report_of
from ..base import verdict as verdict_text
from ..pool import train_all

MODELS = ("rnnencdec", "rnnsearch")  # without, with attention



@dataclass
class LengthConfig:
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
    seed: int = option(0, "data and initialisation seed")
    jobs: int = option(2, "models trained at once, in a process pool")
    threads: int = option(1, "torch threads per training process")

    def __post_init__(self) -> None:
        if self.task not in ("copy", "reverse", "sort"):
            raise ValueError(f"task {self.task!r}; choose copy, reverse or sort")
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(f"lengths {self.min_len}..{self.max_len}: need 1 <= min <= max")
        check_max_len(self.max_len)
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "steps", "batch_size", "emb", "hidden", "test_size", "bin_width", "valid_size",
            "jobs", "threads"
        ))  # fmt: skip
        if not self.lr > 0:
            raise ValueError(f"--lr {self.lr}; it must be positive")

    @property
    def train_size(self) -> int:
        return self.steps * self.batch_size  # one epoch = exactly ``steps`` updates


QUICK = dict(steps=4, batch_size=8, emb=8, hidden=8, valid_size=8, test_size=46, jobs=1)


def data_config(cfg: LengthConfig) -> DataConfig:
    """The task both models train on and are scored on (its test split, by length)."""
    return DataConfig(
        task=cfg.task,
        task_seed=cfg.seed,
        min_len=cfg.min_len,
        max_len=cfg.max_len,
        train_size=cfg.train_size,
        valid_size=cfg.valid_size,
        test_size=cfg.test_size,
    )


def train_config(cfg: LengthConfig, model: str, out: Path) -> FitConfig:
    """The ``attnkit.fit`` config of ``model``; identical for both but the one width that only
    one model has (attention width / summary width). One epoch = exactly ``steps`` updates."""
    own = {"attn_hidden": cfg.hidden} if model == "rnnsearch" else {"context": cfg.hidden}
    widths = dict(emb=cfg.emb, enc_hidden=cfg.hidden, dec_hidden=cfg.hidden, maxout=cfg.hidden)
    return FitConfig(
        data=data_config(cfg),
        model=ModelConfig(model, "small", {**widths, **own, "dropout": 0.0}),
        train=TrainConfig(
            epochs=1,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            patience=0,
            save_every=max(cfg.steps // 10, 1),
            seed=cfg.seed,
            progress=False,
        ),
        out=out,
        overwrite=True,  # the experiment's own folder: a re-run replaces its models
        threads=cfg.threads,
    )


def train_argv(cfg: LengthConfig, model: str, out: Path) -> list[str]:
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
        "--save-every", max(cfg.steps // 10, 1), "--seed", cfg.seed,
        "--threads", cfg.threads, "--no-progress", "--overwrite", "--out", out,
    ]  # fmt: skip
    return [str(a) for a in args]


def train_models(cfg: LengthConfig, out: Path, say: Any = print) -> dict[str, float]:
    """Train both models into ``out/<model>`` (logs in ``out/<model>.log``), ``cfg.jobs`` at a
    time in a process pool; returns wall-clock seconds per model."""
    configs = {m: train_config(cfg, m, out / m) for m in MODELS}
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


@dataclass
class Verdict:
    """Did the figure's shape appear? Drops are relative: 1 - score(longest) / score(shortest)."""

    drop: dict[str, float]
    gap_longest: float  # RNNsearch minus RNNencdec BLEU on the longest bin
    reproduced: bool
    reasons: list[str] = field(default_factory=list)


MAX_SEARCH_DROP = 0.2  # RNNsearch keeps >= 80% of its short-sentence BLEU on the longest bin
MIN_ENCDEC_DROP = 0.5  # RNNencdec loses at least half of it
MIN_GAP = 20.0  # and RNNsearch leads by 20 BLEU points there


def verdict(table: dict[str, list[dict[str, Any]]]) -> Verdict:
    """Compare the shortest and the longest length bin of each model (computed, not assumed)."""
    drop, reasons = {}, []
    for m in MODELS:
        short, long = table[m][0]["bleu"], table[m][-1]["bleu"]
        drop[m] = 1.0 - long / short if short > 0 else math.nan
    gap = table["rnnsearch"][-1]["bleu"] - table["rnnencdec"][-1]["bleu"]
    if math.isnan(drop["rnnsearch"]) or math.isnan(drop["rnnencdec"]):
        reasons.append("a model scored 0 BLEU on the shortest bin: it has not learnt the task")
    if drop["rnnsearch"] > MAX_SEARCH_DROP:
        reasons.append(f"RNNsearch dropped {drop['rnnsearch']:.0%} (> {MAX_SEARCH_DROP:.0%})")
    if drop["rnnencdec"] < MIN_ENCDEC_DROP:
        reasons.append(f"RNNencdec dropped only {drop['rnnencdec']:.0%} (< {MIN_ENCDEC_DROP:.0%})")
    if not gap >= MIN_GAP:
        reasons.append(f"gap on the longest bin {gap:.1f} BLEU (< {MIN_GAP:.0f})")
    return Verdict(drop, gap, not reasons, reasons)


def run_experiment(cfg: LengthConfig, out: Path, say: Any = print) -> dict[str, Any]:
    """Train, decode the test set, score by length. Returns the JSON-able result."""
    from ...data.source import load_spec
    from ...decode import translate
    from ...train import checkpoint

    t0 = begin(
        out,
        say,
        f"length experiment: {cfg.task} {cfg.min_len}-{cfg.max_len} tokens, "
        f"{cfg.steps} updates of {cfg.batch_size} for each of RNNencdec and RNNsearch "
        f"(emb {cfg.emb}, hidden {cfg.hidden}), {cfg.jobs} at a time",
    )
    seconds = train_models(cfg, out, say)
    test = load_spec(data_config(cfg).spec()).test
    edges = bins(cfg)
    table, params = {}, {}
    for m in MODELS:
        ck = checkpoint.load(out / m / "last")
        params[m] = sum(p.numel() for p in ck.model.parameters())
        hyps = translate(ck.model, test, ck.src_vocab, ck.tgt_vocab, batch_size=128).hyps
        table[m] = score_by_length(hyps, test, edges)
    v = verdict(table)
    return {
        "config": asdict(cfg),
        "parameters": params,
        "train_commands": {m: " ".join(["attnkit", *train_argv(cfg, m, out / m)]) for m in MODELS},
        "train_seconds": {m: round(s, 1) for m, s in seconds.items()},
        "total_seconds": round(time.perf_counter() - t0, 1),
        "by_length": table,
        "checks": asdict(v),
        "verdict": verdict_text(v.reasons),
    }



EXPERIMENT = Experiment(
    name="length",
    help="BLEU by source length, RNNencdec vs RNNsearch (Bahdanau 2015, Fig. 2)",
    typical="about 70 s on an idle 2-core CPU, 5-10 min when it is busy",
    description="Train RNNencdec and RNNsearch with the same widths, data and number of "
    "updates on an algorithmic task with sources of 5-50 tokens, score the test set by "
    "source length, and check that RNNencdec falls with length while RNNsearch holds up. "
    "Writes OUT/length.{csv,json,png} and the two checkpoints; exits 1 when the expected "
    "shape does not appear.",
    config=LengthConfig,
    quick=QUICK,
    run=run_experiment,
    report=report_of(__name__),
)

__all__ = [
    "EXPERIMENT",
    "MODELS",
    "QUICK",
    "LengthConfig",
    "Verdict",
    "bins",
    "run_experiment",
    "train_argv",
    "train_config",
    "verdict",
]
