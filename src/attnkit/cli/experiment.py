"""``attnkit experiment NAME``: run an experiment of ``attnkit.experiments.EXPERIMENTS``; its
config dataclass's fields are the flags (each showing its default), ``--quick`` its
seconds-long smoke settings. ``attnkit experiment`` alone lists the experiments with their
claims and typical run times."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, Field, fields
from pathlib import Path
from typing import Any


def add_parser(sub: Any, only: set[str] | None = None) -> None:
    """The ``experiment`` parser. ``only``: the experiments whose flags are built (each
    imported for its config; None: every one); the others get their name and help alone, read
    without importing them (``experiments.summary``), so that ``attnkit --help``, ``attnkit
    info`` or ``attnkit train`` import no experiment."""
    from ..experiments import EXPERIMENTS, flags_of, get, summary

    p = sub.add_parser(
        "experiment",
        help="reproduce a paper's claim or figure: " + ", ".join(EXPERIMENTS),
        description="Reproduce a paper's experiment on data generated here; each prints a "
        "verdict computed from its numbers: REPRODUCED (exit 0), NOT REPRODUCED (exit 1) or "
        "INCONCLUSIVE (exit 2: a ceiling, a floor, a task not learned, or an interval that "
        "holds both the claim and its negation). "
        "`attnkit experiment` alone lists the experiments with their typical run times; "
        "`attnkit experiment NAME --help` shows NAME's options.",
    )
    p.set_defaults(run=list_experiments)
    which = p.add_subparsers(dest="experiment", metavar="EXPERIMENT")
    for name in EXPERIMENTS:
        about = summary(name)
        q = which.add_parser(
            name, help=about.help, description=f"{about.description} Typical run: {about.typical}."
        )
        if only is not None and name not in only:
            continue  # not named on this command line: its flags are never parsed
        exp = get(name)
        for f in flags_of(exp.config):
            kind = type(f.default) if f.default is not MISSING else str
            flag = f"--{f.name.replace('_', '-')}"
            if kind is bool:  # a switch: given means True
                q.add_argument(flag, action="store_true", default=None, help=field_help(f))
                continue
            q.add_argument(flag, type=kind, default=None, help=field_help(f))
        q.add_argument("--out", default=f"runs/{name}", help="output folder")
        q.add_argument(
            "--overwrite",
            action="store_true",
            help="replace what an earlier experiment wrote in --out (other files stay); "
            "without it a folder that holds anything is refused",
        )
        q.add_argument(
            "--quick",
            action="store_true",
            help="a seconds-long smoke run with tiny settings (too short to show the effect; "
            "its verdict is not checked)",
        )
        q.set_defaults(run=run)


def field_help(f: Field[Any]) -> str:
    """The help of a config field's flag: its ``metadata["help"]`` and the dataclass default
    (the flag's own default is None, so that a value given on the command line can be told
    from one left to the config or to ``--quick``)."""
    text = f.metadata.get("help")
    if text is None:
        return argparse.SUPPRESS
    if f.default is not MISSING:
        default = f.default
    elif f.default_factory is not MISSING:
        default = f.default_factory()
    else:
        return str(text)
    if default is None or (isinstance(default, str | list | tuple) and not default):
        return str(text)
    return f"{text} (default: {default})"


def list_experiments(args: argparse.Namespace) -> int:
    """``attnkit experiment`` with no name: every experiment, its claim and typical run time."""
    import textwrap

    from ..experiments import EXPERIMENTS, summary

    print("attnkit experiment NAME [--quick] [--seed S] [--out DIR]: reproduce a paper's claim")
    print("(NAME --help: its options; --quick: a seconds-long smoke run)\n")
    width = max(len(name) for name in EXPERIMENTS) + 4
    for name in EXPERIMENTS:
        exp = summary(name)
        indent = " " * width
        lines = [(f"  {name:<{width - 2}}", exp.help), (indent, f"typical run: {exp.typical}")]
        for first, text in lines:
            print(textwrap.fill(text, 100, initial_indent=first, subsequent_indent=indent,
                                break_on_hyphens=False))  # fmt: skip
    return 0


def run(args: argparse.Namespace) -> int:
    from ..experiments import get
    from ..experiments.evidence import exit_code, journal, keep_measured
    from ..train.run_dir import open_experiment

    exp = get(args.experiment)
    given = {f.name: getattr(args, f.name) for f in fields(exp.config)}
    values: dict[str, Any] = dict(exp.quick) if args.quick else {}
    values.update({k: v for k, v in given.items() if v is not None})
    cfg = exp.config(**values)

    def say(line: str) -> None:
        print(line, flush=True)

    with open_experiment(args.out, exp.name, overwrite=args.overwrite) as out:
        runs: Path | None = None
        try:
            with journal(out / f"{exp.name}-runs.jsonl") as runs:
                result = exp.run(cfg, out, say)
        except BaseException:
            if runs is not None and runs.is_file():
                say(f"the experiment stopped after some of its runs had finished: each is "
                    f"kept in {runs}, one JSON line a run")  # fmt: skip
            raise
        try:
            exp.report(result, out, say)
        except Exception:
            kept = keep_measured(result, out / f"{exp.name}-measured.json")
            say(f"the report failed after every run had finished: the measured result is kept "
                f"in {kept} (the checkpoints are in {out})")  # fmt: skip
            raise
    if args.quick:
        print("(--quick: too few updates to show the effect; the verdict is not checked)")
        return 0
    return exit_code(result["verdict"])
