"""``attnkit train --out``: an existing run is continued only with --resume, replaced only with
--overwrite, refused otherwise; every refusal is one line, exit 2, and changes no file."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnkit.cli import main

pytestmark = pytest.mark.usefixtures("one_thread_module")

ARGS = [
    "train", "--task", "copy", "--train-size", "32", "--valid-size", "8", "--test-size", "8",
    "--max-len", "6", "--preset", "tiny", "--batch-size", "16", "--epochs", "1",
    "--no-progress",
]  # fmt: skip


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a folder)."""
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "out"
    assert main([*ARGS, "--out", str(out)]) == 0
    (out / "notes.txt").write_text("mine")
    return out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "already holds a run (best/, history.json, last/); pass --resume to continue it "
             "or --overwrite to replace it"),
        (["--resume", "--overwrite"], "pick one"),
        (["--seed", "1"], "already holds a run"),
    ],
)  # fmt: skip
def test_refusals_change_nothing(trained: Path, capsys, extra: list[str], message: str) -> None:
    before = snapshot(trained.parent)
    assert main([*ARGS, *extra, "--out", str(trained)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("attnkit train: error: ")
    assert snapshot(trained.parent) == before


@pytest.mark.parametrize(
    ("out", "message"),
    [("", "--out is empty"), ("{file}", "is a file, not a folder"), ("{file}/x", "a file")],
)
def test_bad_out_paths(tmp_path: Path, capsys, out: str, message: str) -> None:
    (tmp_path / "f").write_text("x")
    out = out.format(file=tmp_path / "f")
    assert main([*ARGS, "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_overwrite_keeps_user_files_and_resume_continues(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main([*ARGS, "--out", str(out)]) == 0
    (out / "notes.txt").write_text("mine")
    assert main([*ARGS, "--overwrite", "--seed", "1", "--out", str(out)]) == 0
    assert (out / "notes.txt").read_text() == "mine"
    meta = json.loads((out / "best" / "config.json").read_text())["meta"]
    assert meta["train"]["seed"] == 1  # best/ and last/ both come from the new run
    assert json.loads((out / "last" / "config.json").read_text())["meta"]["train"]["seed"] == 1
    assert main([*ARGS, "--resume", "--epochs", "2", "--seed", "1", "--out", str(out)]) == 0
    assert len(json.loads((out / "history.json").read_text())) == 2


def test_a_second_run_on_the_same_folder_fails_at_once(tmp_path: Path, slow_attnkit) -> None:
    """While one run holds OUT, another fails at once naming the holder's pid; SIGINT makes
    the holder save last/ and history.json and exit 130."""
    out = tmp_path / "out"
    slow = [*ARGS, "--epochs", "1000", "--out", str(out)]  # runs until SIGINT
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [*slow_attnkit(0.2), *slow]
    pipe = subprocess.PIPE
    holder = subprocess.Popen(cmd, env=env, stdout=pipe, stderr=pipe, text=True)
    try:
        deadline = time.time() + 60
        while not (out / "history.json").exists() and time.time() < deadline:
            time.sleep(0.1)  # the first epoch is done: the lock is certainly held
        second = subprocess.run([sys.executable, "-m", "attnkit", *slow, "--resume"],
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        assert second.returncode == 2
        assert f"in use by attnkit pid {holder.pid}" in second.stderr
        holder.send_signal(signal.SIGINT)
        _, err = holder.communicate(timeout=60)
    finally:
        holder.kill()
    assert holder.returncode == 130, err[-2000:]
    state = json.loads((out / "last" / "train_state.json").read_text())
    assert state["global_step"] >= 2 and "interrupted at step" in err
    assert len(json.loads((out / "history.json").read_text())) == state["epoch"] >= 1
