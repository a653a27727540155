"""``attnkit experiment NAME``: run an experiment of ``attnkit.experiments.EXPERIMENTS``; its
config dataclass's fields are the flags, ``--quick`` its seconds-long smoke settings."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from typing import Any


def add_parser(sub: Any) -> None:
    from ..experiments import EXPERIMENTS, get

    p = sub.add_parser(
        "experiment",
        help="reproduce a claim or figure of a paper (length: Bahdanau 2015, Fig. 2)",
        description="Reproduce a paper's experiment on data generated here; each prints a "
        "verdict computed from its numbers and exits 1 when the claim does not reproduce.",
    )
    which = p.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    for name in EXPERIMENTS:
        exp = get(name)
        q = which.add_parser(name, help=exp.help, description=exp.description)
        for f in fields(exp.config):
            kind = type(f.default) if f.default is not MISSING else str
            q.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=None,
                           help=f.metadata.get("help", argparse.SUPPRESS))  # fmt: skip
        q.add_argument(
            "--out", default=f"runs/{name}", help=f"output folder (default runs/{name}/)"
        )
        q.add_argument(
            "--quick",
            action="store_true",
            help="a seconds-long smoke run with tiny settings (too short to show the effect; "
            "its verdict is not checked)",
        )
        q.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..experiments import get
    from ..experiments.base import reproduced

    exp = get(args.experiment)
    given = {f.name: getattr(args, f.name) for f in fields(exp.config)}
    values: dict[str, Any] = dict(exp.quick) if args.quick else {}
    values.update({k: v for k, v in given.items() if v is not None})
    cfg = exp.config(**values)
    out = Path(args.out)

    def say(line: str) -> None:
        print(line, flush=True)

    result = exp.run(cfg, out, say)
    exp.report(result, out, say)
    if args.quick:
        print("(--quick: too few updates to show the effect; the verdict is not checked)")
        return 0
    return 0 if reproduced(result) else 1
