"""``attnkit experiment length``: reproduce the shape of Bahdanau et al. (2015), Figure 2 —
score by source length for RNNencdec (no attention) and RNNsearch (attention)."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any

HELP = {
    "task": "copy (default) | reverse | sort",
    "min_len": "shortest source (default 5)",
    "max_len": "longest source (default 50)",
    "steps": "updates per model, the shared budget (default 800)",
    "batch_size": "pairs per update (default 32)",
    "emb": "embedding width of both models (default 32)",
    "hidden": "every hidden width of both models (default 64)",
    "lr": "Adam learning rate (default 3e-3)",
    "valid_size": "validation pairs (default 64)",
    "test_size": "test pairs scored by length (default 540)",
    "bin_width": "source lengths per bin (default 5)",
    "seed": "data and initialisation seed (default 0)",
    "jobs": "models trained at once, in separate processes (default 2)",
    "threads": "torch threads per training process (default 1)",
}


def add_parser(sub: Any) -> None:
    from ..experiments.length import LengthConfig

    p = sub.add_parser(
        "experiment",
        help="reproduce a figure of a paper (length: Bahdanau 2015, Fig. 2)",
        description="Reproduce a paper's experiment on data generated here.",
    )
    which = p.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    q = which.add_parser(
        "length",
        help="BLEU by source length, RNNencdec vs RNNsearch (Bahdanau 2015, Fig. 2)",
        description="Train RNNencdec and RNNsearch with the same widths, data and number of "
        "updates on an algorithmic task with sources of 5-50 tokens, score the test set by "
        "source length, and check that RNNencdec falls with length while RNNsearch holds up. "
        "Writes OUT/length.{csv,json,png} and the two checkpoints; exits 1 when the expected "
        "shape does not appear.",
    )
    for f in fields(LengthConfig):
        q.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=None,
                       help=HELP[f.name])  # fmt: skip
    q.add_argument("--out", default="runs/length", help="output folder (default runs/length/)")
    q.add_argument(
        "--quick",
        action="store_true",
        help="a seconds-long smoke run with tiny settings (too short to show the effect; "
        "its verdict is not checked)",
    )
    q.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..experiments.length import QUICK, LengthConfig, run_experiment
    from ..experiments.report import text_table, verdict_line, write_files

    given = {f.name: getattr(args, f.name) for f in fields(LengthConfig)}
    values: dict[str, Any] = dict(QUICK) if args.quick else {}
    values.update({k: v for k, v in given.items() if v is not None})
    cfg = LengthConfig(**values)
    out = Path(args.out)
    print(
        f"length experiment: {cfg.task} {cfg.min_len}-{cfg.max_len} tokens, "
        f"{cfg.steps} updates of {cfg.batch_size} for each of RNNencdec and RNNsearch "
        f"(emb {cfg.emb}, hidden {cfg.hidden}), {cfg.jobs} at a time; output in {out}/",
        flush=True,
    )
    result = run_experiment(cfg, out, say=lambda s: print(s, flush=True))
    secs = result["train_seconds"]
    print(
        "trained: "
        + ", ".join(f"{m} {result['parameters'][m]:,} params in {secs[m]:.0f}s" for m in secs)
    )
    print(text_table(result))
    for path in write_files(result, out):
        print(f"wrote {path}")
    print(f"total {result['total_seconds']:.0f}s (training and scoring)")
    print(verdict_line(result))
    if args.quick:
        print("(--quick: too few updates to show the effect; the verdict is not checked)")
        return 0
    return 0 if result["verdict"]["reproduced"] else 1
