"""The ``attnkit`` command. Each subcommand lives in ``attnkit.cli.<name>`` and exposes
``add_parser(subparsers)``; modules are imported only when their command runs... except for
their small ``add_parser``, which every invocation needs to build the help. Every parser is a
``Parser``, whose ``HelpFormatter`` shows each option's default.

Bad input (a ValueError or FileNotFoundError, whose message says what to change; a library
config's ``FieldError`` is said with this command's flags, see ``in_flags``) and a path
that cannot be read or written (any other OSError: read-only, a file where a folder is needed,
/proc) print one line and exit with status 2, as does an ``ATTNKIT_*`` environment variable
that cannot be read (``attnkit._env``); any other exception is a bug and propagates with
its traceback."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from .. import __version__
from .._alloc import keep_freed_memory
from .._env import check_environment

COMMANDS = [
    "demo",
    "train",
    "translate",
    "evaluate",
    "view",
    "explain",
    "bench",
    "info",
    "experiment",
]


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with ``(default: X)`` when it has a default worth showing (see
    ``shows_default``), and a bare ``%`` in a help text is a percent sign, not a format."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = re.sub(r"%(?![(%])", "%%", action.help or "")  # keep %(default)s and %%
        if shows_default(action) and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def shows_default(action: argparse.Action) -> bool:
    """Whether ``--help`` states this option's default: an option that takes a value, has a
    help text and a default other than None or an empty string or list."""
    empty = isinstance(action.default, str | list | tuple) and not action.default
    return bool(
        action.option_strings
        and action.nargs != 0  # flags (store_true, --help) have no value to show
        and action.help not in (None, "", argparse.SUPPRESS)
        and action.default not in (None, argparse.SUPPRESS)
        and not empty
    )


class Parser(argparse.ArgumentParser):
    """An ArgumentParser with ``HelpFormatter``; its subcommands' parsers are ``Parser`` too
    (``add_subparsers`` makes parsers of the class of the parser it is called on)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def make_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser. ``argv``: the command line it is about to parse, so that only the
    experiment it names (``experiment NAME ...``) is imported to build its flags; None builds
    every experiment's flags (the whole tree, for the help tests and the docs)."""
    parser = Parser(
        prog="attnkit",
        description="Attention mechanisms of the literature: train, evaluate, look inside.",
    )
    parser.add_argument("--version", action="version", version=f"attnkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"attnkit.cli.{name.replace('-', '_')}")
        if name == "experiment":
            module.add_parser(sub, only=_named_experiment(argv))
        else:
            module.add_parser(sub)
    return parser


def _named_experiment(argv: Sequence[str] | None) -> set[str] | None:
    """{NAME} of ``experiment NAME ...``; the empty set for any other command line; None
    (every experiment) without one."""
    if argv is None:
        return None
    words = list(argv)
    return {words[1]} if len(words) > 1 and words[0] == "experiment" else set()


SEED_MAX = 2**32 - 1  # seeds feed torch, random and numpy (whose seeds are 0 .. 2**32 - 1)
INT_MAX = 2**63 - 1  # every other integer option ends up in a C long long somewhere


def check_integers(args: argparse.Namespace) -> None:
    """Every integer option in its range, named with its flag (``--seed 1e20`` would end in
    "Overflow when unpacking long long" deep inside torch)."""
    for key, value in vars(args).items():
        if isinstance(value, bool) or not isinstance(value, int):
            continue
        flag = "--" + key.replace("_", "-")
        if key == "seed" or key.endswith("_seed"):
            if not 0 <= value <= SEED_MAX:
                raise ValueError(f"{flag} {value}: a seed is an integer from 0 to {SEED_MAX}")
        elif not -INT_MAX - 1 <= value <= INT_MAX:
            raise ValueError(
                f"{flag} {value}: out of range; it must lie between {-INT_MAX - 1} and {INT_MAX}"
            )


def in_flags(err: Exception, args: argparse.Namespace) -> str:
    """The error's message; a library config's ``FieldError`` (attnkit._checks), which names
    its fields (``out is empty``), with each field the command has a flag for named by it
    (``--out is empty``)."""
    say = getattr(err, "say", None)
    if say is None:
        return str(err)
    given = vars(args)
    return str(say(lambda field: "--" + field.replace("_", "-") if field in given else None))


def _error(line: str) -> int:
    """Print the one error line (and, in a rank of a distributed launch, tell the launcher);
    exit code 2."""
    from ..train.launch import record_error

    print(line, file=sys.stderr)
    record_error(line)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    try:  # every ATTNKIT_* variable readable, before any work (``attnkit --version`` too)
        check_environment()
        if sys.stdout is None:  # started with stdout closed (`attnkit translate >&-`)
            raise ValueError("standard output is closed; redirect it to a file or /dev/null")
    except ValueError as err:
        if sys.stderr is not None:
            print(f"attnkit: error: {err}", file=sys.stderr)
        return 2
    parser = make_parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.command_line = list(sys.argv[1:] if argv is None else argv)  # for a launcher's ranks
    if args.command is None:
        parser.print_help()
        return 0
    keep_freed_memory()
    try:
        check_integers(args)
        return int(args.run(args) or 0)
    except BrokenPipeError:  # the reader stopped reading (`attnkit info | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 0
    except (ValueError, FileNotFoundError) as err:  # bad input: attnkit says what to change
        return _error(f"attnkit {args.command}: error: {in_flags(err, args)}")
    except OSError as err:  # a path that cannot be read or written: read-only, /proc, a file
        where = f"{err.filename}: " if err.filename else ""
        return _error(f"attnkit {args.command}: error: {where}{err.strerror or err}")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
