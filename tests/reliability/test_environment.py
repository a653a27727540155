"""Environment variables and image files: a value attnkit cannot read is one line naming the
variable and the values it takes (also for ``attnkit --version``, and never at import); a
switch reads the usual spellings; an image is written to exactly the path given, and a write
that fails is an error, not "wrote"."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
import torch
from _reliability import one_line_error

import attnkit
import attnkit._checks as checks
import attnkit.local._build as build
from attnkit import _env
from attnkit.cli import main


@pytest.mark.parametrize(
    ("raw", "on"),
    [("0", False), ("false", False), ("No", False), (" OFF ", False), ("1", True),
     ("true", True), ("YES", True), ("on\n", True), ("", True)],
)  # fmt: skip
def test_attnkit_native_reads_every_usual_spelling(monkeypatch, raw, on):
    monkeypatch.setenv("ATTNKIT_NATIVE", raw)
    assert _env.native() is on


def test_attnkit_native_false_turns_the_kernel_off_at_import(tmp_path):
    """The switch as a process sees it: ``native.USE`` is read when attnkit is imported."""
    code = "import attnkit.local.native as n; print(n.USE, n.kernel())"
    env = {**os.environ, "ATTNKIT_NATIVE": "false", "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "None"]
    assert not any(tmp_path.iterdir())  # nothing was built


BAD = {
    "ATTNKIT_NATIVE": ("maybe", r"ATTNKIT_NATIVE='maybe'; give one of 1/true/yes/on .* 0/false"),
    "ATTNKIT_CHECKS": ("bogus", r"ATTNKIT_CHECKS='bogus'; give 'shapes' .* or 'full'"),
    "ATTNKIT_BUILD_WAIT": ("abc", r"ATTNKIT_BUILD_WAIT='abc'; give a number >= 0 of seconds"),
    "ATTNKIT_DENSE_BUDGET_GIB": ("-1", r"ATTNKIT_DENSE_BUDGET_GIB='-1'; give a positive number"),
}


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("argv", [["--version"], ["info"]], ids=["version", "info"])
def test_an_unreadable_variable_is_one_line_for_any_command(monkeypatch, capsys, name, argv):
    raw, match = BAD[name]
    monkeypatch.setenv(name, raw)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnkit: error: "), captured.err
    assert re.search(match, lines[0]), lines[0]


def test_a_bad_attnkit_checks_never_breaks_the_import():
    """ATTNKIT_CHECKS is read at import: a typo there must not be a traceback from
    ``import attnkit`` before the command line can say which variable is wrong."""
    env = {**os.environ, "ATTNKIT_CHECKS": "bogus"}
    done = subprocess.run([sys.executable, "-m", "attnkit", "--version"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "attnkit: error: ATTNKIT_CHECKS='bogus'; give 'shapes' (free, the default) or 'full' "
        "(also NaN/Inf in the data, a host sync)"
    ]


def test_attnkit_checks_is_read_case_insensitively_and_a_bad_one_is_said_at_first_use(
    monkeypatch,
):
    monkeypatch.setenv("ATTNKIT_CHECKS", " FULL ")
    monkeypatch.setattr(checks, "_mode", checks._mode_from_env())
    assert attnkit.get_checks() == "full"
    monkeypatch.setenv("ATTNKIT_CHECKS", "bogus")
    monkeypatch.setattr(checks, "_mode", checks._mode_from_env())  # as an import would
    x = torch.zeros(1, 2, 4)
    with pytest.raises(ValueError, match=r"^ATTNKIT_CHECKS='bogus'; give 'shapes'"):
        attnkit.attend(x, x, x)
    attnkit.set_checks("shapes")  # saying the level in code replaces the variable's
    assert attnkit.attend(x, x, x).context.shape == (1, 2, 4)


def test_attnkit_build_wait_that_is_no_number_names_itself(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNKIT_BUILD_WAIT", "abc")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    with pytest.raises(ValueError, match=r"^ATTNKIT_BUILD_WAIT='abc'; give a number >= 0"):
        build.load_or_build("attnkit_never_built", [], [])
    assert not any(tmp_path.iterdir())  # refused before any folder was made


def test_an_image_that_cannot_be_written_is_an_error_not_wrote(trained, capsys):
    """``--png /dev/full``: matplotlib wrote /dev/full.png (it appends a suffix) and the
    command said "wrote /dev/full", exit 0."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    before = set(os.listdir("/dev"))
    argv = ["view", "--checkpoint", str(trained), "s3 s4", "--png", "/dev/full"]
    one_line_error(capsys, argv, r"/dev/full: No space left on device")
    assert set(os.listdir("/dev")) == before  # no /dev/full.png beside it


def test_an_image_goes_to_exactly_the_path_given(trained, capsys, tmp_path):
    out = tmp_path / "heatmap"  # no suffix: PNG, under this very name
    assert main(["view", "--checkpoint", str(trained), "s3 s4", "--png", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert out.read_bytes().startswith(b"\x89PNG") and list(tmp_path.iterdir()) == [out]


def test_an_image_path_in_a_missing_folder_is_one_line(trained, capsys, tmp_path):
    argv = ["view", "--checkpoint", str(trained), "s3 s4", "--png", str(tmp_path / "no/x.png")]
    one_line_error(capsys, argv, r"No such file or directory.*no/x\.png")


def test_a_closed_standard_output_is_one_line(trained, capsys, monkeypatch):
    """``attnkit translate >&-``: Python starts with ``sys.stdout`` None, which was an
    AttributeError traceback at the first line printed."""
    monkeypatch.setattr("sys.stdin", io.StringIO("s3 s4\n"))
    monkeypatch.setattr("sys.stdout", None)
    assert main(["translate", "--checkpoint", str(trained)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "attnkit: error: standard output is closed; redirect it to a file or /dev/null"
    ]
