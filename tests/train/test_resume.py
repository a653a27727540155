"""A training run killed with SIGKILL mid-epoch and resumed ends with exactly the parameters
of a run that was never interrupted."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from attnkit.cli import main

pytestmark = pytest.mark.usefixtures("one_thread_module")


ARGS = [
    "train",
    "--task",
    "toy-ko",
    "--train-size",
    "160",
    "--valid-size",
    "16",
    "--test-size",
    "16",
    "--preset",
    "tiny",
    "--batch-size",
    "16",
    "--epochs",
    "3",
    "--patience",
    "0",
    "--save-every",
    "3",
    "--lr",
    "5e-3",
    "--no-progress",
]  # 10 steps/epoch


def read_state(out: Path) -> dict | None:
    try:
        return json.loads((out / "last" / "train_state.json").read_text())
    except (OSError, ValueError):
        return None


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_sigkill_then_resume_matches_uninterrupted(tmp_path, slow_attnkit) -> None:
    ref, run = tmp_path / "ref", tmp_path / "run"
    assert main([*ARGS, "--out", str(ref)]) == 0

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    cmd = [*slow_attnkit(0.2), *ARGS, "--out", str(run)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            st = read_state(run)
            if st is not None and st["epoch"] >= 1 and st["step_in_epoch"] > 0:
                break  # a mid-epoch checkpoint of the second epoch is on disk
            if proc.poll() is not None:
                pytest.fail("training finished before it could be killed")
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    st = read_state(run)
    assert st is not None and st["epoch"] < 3

    assert main([*ARGS, "--out", str(run), "--resume"]) == 0
    for name in ("last", "best"):
        a = load_file(str(ref / name / "model.safetensors"))
        b = load_file(str(run / name / "model.safetensors"))
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), (name, k)
    ha = json.loads((ref / "history.json").read_text())
    hb = json.loads((run / "history.json").read_text())
    assert [r["valid_loss"] for r in ha] == [r["valid_loss"] for r in hb]
