"""`attnkit experiment NAME --overwrite` removes or replaces only files whose name and sha256
attnkit recorded when it wrote them (train/outputs.py): a kill at any instant leaves a manifest
that lists exactly what was written, a user's file is never replaced (even one with an output's
name), and nothing is written through a link."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from _reliability import one_line_error
from _run_dirs import holding_link, holding_users_file, linked_to_precious

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
    return linked_to_precious(out, "a.png")


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


own_output = holding_users_file("context.csv")  # the user's, made before any run
linked_output = holding_link("context.json")  # context.json -> ../precious.txt


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
@pytest.mark.parametrize("kill_at", [7, 55], ids=["training", "report"])  # 51-61: the report
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


# -- a pool worker whose experiment was SIGKILLed alone -------------------------------------------

LONG_POOL = ["experiment", "context", "--quick", "--jobs", "2", "--epochs", "1000",
             "--patience", "1000"]  # fmt: skip
"""Two tiny language models in a pool, each trained far longer than the test waits."""


def _pool_workers(pid: int) -> list[int]:
    """The pool's workers among ``pid``'s children (not multiprocessing's resource tracker)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    found = []
    for c in children:
        with contextlib.suppress(OSError):
            if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes():
                found.append(int(c))
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no init reaped has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow  # an experiment's start and its pool's: about 20 s on a loaded machine
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc for the workers")
def test_pool_workers_of_a_killed_experiment_end_and_record_nothing(tmp_path: Path) -> None:
    """`attnkit experiment context --jobs 2 ...`, then `kill -9` of that process alone: its
    workers ended within seconds (before, each trained its run to the end and recorded it in
    the manifest of a folder no experiment held any more)."""
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(Path(__file__).parents[2] / "src")}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "attnkit", *LONG_POOL, "--out", str(out)],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 600  # bounds only a start that never comes
        while not (len(workers) == 2 and list(out.glob("*/last/model.safetensors"))):
            assert proc.poll() is None and time.monotonic() < deadline, "no run began training"
            time.sleep(0.1)
            workers = _pool_workers(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)  # the experiment alone, not its process group
        proc.wait()
        at_kill = (out / MANIFEST).read_bytes()
        deadline = time.monotonic() + 5
        while any(_running(w) for w in workers):
            assert time.monotonic() < deadline, "a worker outlived its experiment by 5 s"
            time.sleep(0.05)
        time.sleep(1.0)
        assert (out / MANIFEST).read_bytes() == at_kill
        assert not [n for n in manifest(out)["wrote"] if n.endswith(".log")]  # no run ended
    finally:
        for pid in [proc.pid, *workers]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# -- a training run killed inside an experiment -------------------------------------------------

KILLED_TRAINING = """
import json, os, signal, sys
from pathlib import Path
from attnkit.cli import main
from attnkit.train.run_dir import open_experiment
out, label, k, argv = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
seen = []
def counted(name):
    real = getattr(os, name)
    def call(*args, **kwargs):
        path = Path(os.fsdecode(args[-1] if name == "replace" else args[0]))
        seen.append(f"{name} {path.name if name == 'replace' else path.parent.name}")
        if seen.count(label) == k and seen[-1] == label:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return call
with open_experiment(out, "len"):
    os.replace, os.unlink = counted("replace"), counted("unlink")
    assert main(["train", *argv, "--out", str(out / "run")]) == 0
    print(json.dumps(seen))
"""
"""A run trained inside an experiment's folder, SIGKILLed before the ``k``-th file operation
labelled ``label`` ("replace NAME": a rename to NAME; "unlink FOLDER": a removal in FOLDER)."""


def _train_killed(out: Path, label: str, k: int) -> list[str]:
    from _reliability import TINY

    argv = [*TINY, "--epochs", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(Path(__file__).parents[2] / "src")}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", KILLED_TRAINING, str(out), label, str(k),
                           json.dumps(argv)], env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    if k:
        assert done.returncode == -signal.SIGKILL, done.stderr
        return []
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _overwrite_takes_every_file_but_the_users(out: Path) -> None:
    """After the kill: every file of the run is the experiment's (a later `notes.txt` alone is
    named as the user's); one of them edited is refused; --overwrite removes all but notes."""
    (out / "notes.txt").write_text("mine")
    with pytest.raises(RunDirError, match=r"files not written by attnkit \(notes\.txt\);"):
        with open_experiment(out, "len"):
            pytest.fail("opened")
    edited = out / "run" / "best" / "config.json"
    kept = edited.read_bytes()
    edited.write_bytes(kept + b" ")
    with pytest.raises(RunDirError, match=r"best/config\.json was written by attnkit but has "):
        with open_experiment(out, "len", overwrite=True):
            pytest.fail("opened")
    assert edited.read_bytes() == kept + b" "
    edited.write_bytes(kept)
    with open_experiment(out, "len", overwrite=True):
        assert sorted(os.listdir(out)) == sorted([LOCK, MANIFEST, "notes.txt"])
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("label", "k"),
    [
        ("replace .last.old", 1),  # `last` moved aside for the second epoch's
        ("replace last", 2),  # the second epoch's `last` taking its name: none there
        ("unlink .last.old", 1),  # the backup half removed
        ("replace history.json", 2),
        ("replace .attnkit-experiment.json", 9),  # between two records of the first save
    ],
)
def test_a_training_run_killed_in_an_experiment_leaves_only_recorded_files(
    tmp_path: Path, label: str, k: int
) -> None:
    """Before, the files of a run were hashed when it ended: killed midway, its checkpoint
    files (and its lock) were nobody's, and --overwrite left them."""
    out = tmp_path / "out"
    _train_killed(out, label, k)
    _overwrite_takes_every_file_but_the_users(out)


@pytest.mark.slow  # a run killed at each of its renames and removals: minutes
def test_a_training_run_killed_at_any_rename_or_removal_leaves_only_recorded_files(
    tmp_path: Path,
) -> None:
    calls = _train_killed(tmp_path / "whole", "", 0)
    points = sorted({(c, calls[: i + 1].count(c)) for i, c in enumerate(calls)},
                    key=lambda p: calls.index(p[0]))  # fmt: skip
    assert len(points) > 20, calls
    for n, (label, k) in enumerate(points):
        out = tmp_path / f"killed-{n}"
        _train_killed(out, label, k)
        if (out / "run" / "best" / "config.json").is_file():
            _overwrite_takes_every_file_but_the_users(out)
        else:  # killed before the first checkpoint took its name
            with open_experiment(out, "len", overwrite=True):
                assert sorted(os.listdir(out)) == sorted([LOCK, MANIFEST]), (label, k)
