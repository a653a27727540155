"""The CLI imports an experiment only when it is run or asked for its options: `attnkit
--help`, `info`, `train` and `experiment` alone import none (issue "The layout shows the
architecture"), and the summaries read from the sources equal the experiments' own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from attnkit.experiments import EXPERIMENTS, get, summary

PROBE = """
import contextlib, io, json, sys
from attnkit.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
loaded = sorted(m for m in sys.modules if m.startswith("attnkit.experiments."))
print(json.dumps(loaded))
"""


def experiment_modules(*argv: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    return set(json.loads(done.stdout.splitlines()[-1])) - {"attnkit.experiments.base"}


@pytest.mark.parametrize("argv", [["--help"], ["info"], ["experiment"], ["train", "--help"]])
def test_no_experiment_is_imported(argv: list[str]) -> None:
    assert experiment_modules(*argv) == set()


def test_asking_for_one_experiments_options_imports_that_one_only() -> None:
    loaded = experiment_modules("experiment", "scaling", "--help")
    assert "attnkit.experiments.scaling" in loaded
    others = {e.module for n, e in EXPERIMENTS.items() if n != "scaling"}
    assert not loaded & others, loaded & others


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_the_summary_read_from_the_source_is_the_experiments_own(name: str) -> None:
    exp, about = get(name), summary(name)
    assert (about.help, about.typical, about.description) == (exp.help, exp.typical,
                                                              exp.description)  # fmt: skip
