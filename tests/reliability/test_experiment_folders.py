"""`attnkit experiment NAME --overwrite` removes or replaces only files whose name and sha256
attnkit recorded when it wrote them (train/outputs.py): a kill at any instant leaves a manifest
that lists exactly what was written, a user's file is never replaced (even one with an output's
name), and nothing is written through a link."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from _reliability import one_line_error

from attnkit.cli import main
from attnkit.train import outputs
from attnkit.train.outputs import open_output, sha256_of, write_output
from attnkit.train.run_dir import LOCK, MANIFEST, RunDirError, open_experiment


def manifest(out: Path) -> dict:
    return json.loads((out / MANIFEST).read_text())


# -- the writer, called directly ----------------------------------------------------------------


def test_each_output_is_recorded_with_its_hash_as_it_is_written(tmp_path: Path) -> None:
    with open_experiment(tmp_path / "out", "len") as out:
        write_output(out / "len.csv", "a,b\n")
        assert manifest(out)["wrote"] == {"len.csv": sha256_of(out / "len.csv")}
        write_output(out / "maps" / "a.png", b"\x89PNG")
        with open_output(out / "run.log") as log:
            print("epoch 1", file=log)
        write_output(out / "len.csv", "a,b\n1,2\n")  # its own file: replaced
        wrote = manifest(out)["wrote"]
    assert wrote == {n: sha256_of(out / n) for n in ("len.csv", "maps/a.png", "run.log")}
    assert (out / "len.csv").read_text() == "a,b\n1,2\n"
    assert (out / "run.log").read_text() == "epoch 1\n"
    assert sorted(os.listdir(out)) == [MANIFEST, "len.csv", "maps", "run.log"]  # no temporary


def users_file(out: Path) -> Path:
    (out / "maps").mkdir()
    (out / "maps" / "a.png").write_text("mine")
    return out / "maps" / "a.png"


def edited_output(out: Path) -> Path:
    write_output(out / "maps" / "a.png", b"attnkit's")
    (out / "maps" / "a.png").write_text("edited")
    return out / "maps" / "a.png"


def linked_file(out: Path) -> Path:
    (out.parent / "precious.txt").write_text("precious")
    (out / "a.png").symlink_to(out.parent / "precious.txt")
    return out / "a.png"


def linked_folder(out: Path) -> Path:
    (out.parent / "home").mkdir()
    (out / "maps").symlink_to(out.parent / "home")
    return out / "maps" / "a.png"


@pytest.mark.parametrize(
    ("setup", "match"),
    [
        (users_file, r"maps/a\.png is not written by attnkit .*move it out, or pick another"),
        (edited_output, r"maps/a\.png is not written by attnkit \(or was changed since\)"),
        (linked_file, r"a\.png is a symbolic link; attnkit never writes through one"),
        (linked_folder, r"maps is a symbolic link; attnkit never writes through one"),
    ],
    ids=["users-file", "edited-output", "linked-file", "linked-folder"],
)
def test_the_writer_refuses_a_file_it_did_not_record_and_any_link(
    tmp_path: Path, setup: Callable[[Path], Path], match: str
) -> None:
    with open_experiment(tmp_path / "out", "len") as out:
        target = setup(out)
        before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
        with pytest.raises(RunDirError, match=match) as err:
            write_output(target, b"attnkit's output")
        assert "\n" not in str(err.value)
        assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_outside_an_experiment_the_writer_is_atomic_and_never_follows_a_link(
    tmp_path: Path,
) -> None:
    """A library call (no running experiment around the path) replaces a file, not a link."""
    write_output(tmp_path / "a.csv", "1")
    write_output(tmp_path / "a.csv", "2")
    assert (tmp_path / "a.csv").read_text() == "2"
    (tmp_path / "out").mkdir()
    link = linked_file(tmp_path / "out")
    with pytest.raises(RunDirError, match="is a symbolic link"):
        write_output(link, "x")
    assert (tmp_path / "precious.txt").read_text() == "precious"


# -- a kill at every step of the writer ---------------------------------------------------------

STEPS = ("open", "replace", "unlink", "fsync")  # the filesystem calls of the writer


def _write_all(out: Path) -> None:
    write_output(out / "len.csv", "a,b\n")
    write_output(out / "maps" / "a.png", b"\x89PNG")
    with open_output(out / "run.log") as log:
        print("epoch 1", file=log)
    write_output(out / "len.csv", "a,b\n1,2\n")


def _killed_at(out: Path, step: int) -> list[str]:
    """Fork a process that opens ``out`` for an experiment and writes its outputs, killing
    itself (SIGKILL) before its ``step``-th filesystem call (-1: never); -> the calls made
    (the name of each, and for a rename the name it gives)."""
    count = out.parent / "calls"
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            with open_experiment(out, "len", overwrite=True):
                calls: list[str] = []

                def counted(name: str) -> Callable[..., object]:
                    real = getattr(os, name)

                    def call(*args: object, **kwargs: object) -> object:
                        if len(calls) == step:
                            os.kill(os.getpid(), signal.SIGKILL)
                        gives = f" {Path(str(args[1])).name}" if name == "replace" else ""
                        calls.append(name + gives)
                        if name == "fsync":  # a SIGKILL loses no written page: skip the wait
                            return None
                        return real(*args, **kwargs)

                    return call

                for name in STEPS:
                    setattr(os, name, counted(name))
                _write_all(out)
                count.write_text(json.dumps(calls))
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    if step >= 0:
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        return []
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return json.loads(count.read_text())


def _at_output_renames(calls: list[str]) -> list[int]:
    """The first call, and the calls just before and after each rename of an output into
    place (the manifest's own renames excluded)."""
    renames = [i for i, c in enumerate(calls) if c.startswith("replace ") and MANIFEST not in c]
    assert len(renames) == 4, calls
    return sorted({0, *renames, *(i + 1 for i in renames)})


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(_at_output_renames, id="at-renames"),
        pytest.param(lambda calls: range(len(calls)), id="every-step", marks=pytest.mark.slow),
    ],
)
def test_a_kill_at_any_step_leaves_a_folder_overwrite_cleans_and_a_later_file_stays(
    tmp_path: Path, steps: Callable[[list[str]], list[int]]
) -> None:
    """The issue: after a SIGKILL the manifest said ``"wrote": null`` and --overwrite deleted
    every file not found at the start, the user's notes added after the crash included. Every
    step (a process forked and killed per step: minutes) runs with ``-m slow``."""
    calls = _killed_at(tmp_path / "whole", -1)
    assert len(calls) > 20
    for step in steps(calls):
        out = tmp_path / f"killed-{step}"
        _killed_at(out, step)
        (out / "notes.txt").write_text("mine")  # added after the crash
        with pytest.raises(RunDirError, match=r"files not written by attnkit \(notes\.txt\)"):
            with open_experiment(out, "len"):
                pytest.fail("opened")
        with open_experiment(out, "len", overwrite=True):
            assert sorted(os.listdir(out)) == sorted([LOCK, MANIFEST, "notes.txt"]), step
        assert (out / "notes.txt").read_text() == "mine"


# -- the command, with a fake experiment and with `context --quick` -----------------------------


def own_output(out: Path) -> None:
    """The issue: `own/context.csv`, the user's, made before any run."""
    out.mkdir()
    (out / "context.csv").write_text("mine")


def linked_output(out: Path) -> None:
    """The issue: `own2/context.json -> ~/precious.txt`."""
    out.mkdir()
    (out.parent / "precious.txt").write_text("precious")
    (out / "context.json").symlink_to(out.parent / "precious.txt")


@pytest.mark.parametrize(
    ("setup", "match"),
    [
        (own_output, r"context\.csv is not written by attnkit and the experiment writes that "
                     r"name: move it out, or pick another --out \(--overwrite never replaces"),
        (linked_output, r"context\.json is a symbolic link; attnkit never writes through one"),
    ],
    ids=["own-context-csv", "linked-context-json"],
)  # fmt: skip
def test_overwrite_refuses_a_users_file_or_a_link_with_an_outputs_name(
    tmp_path: Path, setup: Callable[[Path], None], match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    setup(out)
    before = {p: (p.read_bytes(), p.is_symlink()) for p in tmp_path.rglob("*") if p.is_file()}
    one_line_error(capsys, ["experiment", "context", "--quick", "--overwrite", "--out", str(out)],
                   match)  # fmt: skip
    assert {p: (p.read_bytes(), p.is_symlink())
            for p in tmp_path.rglob("*") if p.is_file()} == before  # fmt: skip


KILLED_RUN = """
import os, signal, sys
from attnkit.train import outputs
from attnkit.cli import main
real, calls = outputs.update_manifest, [0]
def update(*args, **kwargs):
    calls[0] += 1
    if calls[0] == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
outputs.update_manifest = update
main(["experiment", "context", "--quick", "--out", sys.argv[1]])
"""


@pytest.mark.slow  # two `context --quick` runs: seconds alone, minutes on a loaded machine
@pytest.mark.parametrize("kill_at", [4, 25], ids=["training", "report"])
def test_context_quick_killed_then_overwrite_keeps_the_users_notes(
    tmp_path: Path, kill_at: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's commands: `attnkit experiment context --quick --out sig`, SIGKILLed midway
    (at the ``kill_at``-th change of its manifest: while training, while writing the report);
    `echo mine > sig/notes.txt`; the same command with --overwrite."""
    out = tmp_path / "sig"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", KILLED_RUN, str(out), str(kill_at)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    wrote = manifest(out)["wrote"]
    assert wrote and all(sha256_of(out / n) == h for n, h in wrote.items())
    (out / "notes.txt").write_text("mine")
    error = one_line_error(capsys, ["experiment", "context", "--quick", "--out", str(out)],
                           r"already holds files not written by attnkit \(notes\.txt\)")
    assert "an experiment's output" not in error
    assert main(["experiment", "context", "--quick", "--overwrite", "--out", str(out)]) == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert {"context.csv", "context.json", "context.png"} <= set(manifest(out)["wrote"])
    assert outputs.read_manifest(out) is not None
