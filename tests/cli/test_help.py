"""Every command's ``--help`` works and shows what it can do: each command, subcommand and
experiment exits 0, every option has a help text, and every option's help states its default
(an experiment's flag, whose argparse default is None, states its config dataclass's)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import MISSING, fields

import pytest

from attnkit import experiments
from attnkit.cli import main, make_parser


def parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the tree under ``parser``, with the words that reach it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


TREE = dict(parsers(make_parser()))


def option_blocks(text: str) -> dict[str, str]:
    """Each option's help in ``text`` (a --help output), keyed by its last option string, all
    whitespace removed (argparse wraps lines anywhere, even inside a default)."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^  (-[^ ]+(?:, -[^ ]+)*)", line)
        if m:
            current = m.group(1).split(", ")[-1]
            blocks[current] = [line]
        elif current is not None and line.startswith("   "):
            blocks[current].append(line)
        else:
            current = None
    return {k: "".join("".join(v).split()) for k, v in blocks.items()}


def help_of(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*path, "--help"])
    assert exit_.value.code == 0, path
    return capsys.readouterr().out


def shown(default: object) -> str:
    return "".join(f"(default: {default})".split())


def test_the_tree_has_every_command_and_experiment() -> None:
    assert {p[0] for p in TREE if len(p) == 1} >= {"demo", "train", "experiment"}
    assert {p[1] for p in TREE if len(p) == 2 and p[0] == "experiment"} == set(
        experiments.EXPERIMENTS
    )


@pytest.mark.parametrize("path", sorted(TREE), ids=lambda p: " ".join(p) or "attnkit")
def test_help_exits_0_and_states_every_default(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    text = help_of(path, capsys)
    blocks = option_blocks(text)
    for action in TREE[path]._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        flag = action.option_strings[-1]
        assert action.help and action.help != argparse.SUPPRESS, f"{path} {flag}: no help"
        assert flag in blocks, f"{path} {flag} is not in --help"
        takes_value = action.nargs != 0
        empty = action.default in (None, "", []) or action.default is argparse.SUPPRESS
        if takes_value and not empty:
            assert shown(action.default) in blocks[flag], f"{path} {flag}: {blocks[flag]}"


@pytest.mark.parametrize("name", sorted(experiments.EXPERIMENTS))
def test_an_experiments_flags_show_the_config_defaults(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = option_blocks(help_of(("experiment", name), capsys))
    for f in fields(experiments.get(name).config):
        default = f.default if f.default is not MISSING else f.default_factory()
        if default in (None, "", []):
            continue
        flag = "--" + f.name.replace("_", "-")
        assert shown(default) in blocks[flag], f"{name} {flag}: {blocks[flag]}"


def test_a_percent_sign_in_a_help_text_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(("experiment",), capsys)
    assert "5%..100%" in "".join(text.split())  # inductive-bias's help line


def test_experiment_alone_lists_every_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for name in experiments.EXPERIMENTS:
        exp = experiments.get(name)
        assert exp.typical and exp.typical != "unknown", f"{name}: time a default run"
        assert f"{name} {' '.join(exp.help.split())}" in out
        assert f"typical run: {' '.join(exp.typical.split())}" in out


def test_the_top_level_help_names_every_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(help_of((), capsys).split())
    for name in experiments.EXPERIMENTS:
        assert re.search(rf"[ :,]{re.escape(name)}[ ,]", text + " "), name
    assert "~2 minutes" not in text
