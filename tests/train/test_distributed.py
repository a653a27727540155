"""Data-parallel training: two torchrun processes sharing each global batch end with the
parameters of one process trained on the same global batches."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as torch_dist
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load_file

from attnkit.cli import main
from attnkit.data.batching import batches
from attnkit.data.synthetic import generate
from attnkit.data.vocab import Vocab
from attnkit.train.distributed import shard, shard_rows, world_from_env


@given(st.integers(0, 50), st.integers(1, 8))
def test_shards_cover_every_row_once_and_differ_by_at_most_one(n: int, world: int) -> None:
    parts = [shard_rows(n, r, world) for r in range(world)]
    assert [i for p in parts for i in p] == list(range(n))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_shard_keeps_padded_width_and_rows() -> None:
    data = generate("copy", 7, 0, min_len=2, max_len=9)
    v = Vocab.build(e.src for e in data)
    (b,) = batches(data, v, v, 7)
    parts = [shard(b, r, 2) for r in range(2)]
    assert [len(p.index) for p in parts] == [4, 3]
    assert all(p.src.shape[1] == b.src.shape[1] for p in parts)
    assert torch.equal(torch.cat([p.tgt_out for p in parts]), b.tgt_out)
    assert sum(p.tokens for p in parts) == b.tokens


def test_world_from_env() -> None:
    assert world_from_env({}) is None
    assert world_from_env({"WORLD_SIZE": "1", "RANK": "0"}) is None
    w = world_from_env({"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"})
    assert w is not None and (w.rank, w.world_size, w.local_rank) == (1, 2, 1)
    with pytest.raises(ValueError, match="torchrun"):
        world_from_env({"WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match="outside"):
        world_from_env({"WORLD_SIZE": "2", "RANK": "2"})


# 43 pairs in global batches of 7: the last batch has one row, so rank 1 gets none there
ARGS = [
    "train",
    "--task",
    "copy",
    "--train-size",
    "43",
    "--valid-size",
    "8",
    "--test-size",
    "8",
    "--min-len",
    "2",
    "--max-len",
    "9",
    "--preset",
    "tiny",
    "--dropout",
    "0",
    "--batch-size",
    "7",
    "--epochs",
    "2",
    "--patience",
    "0",
    "--save-every",
    "0",
    "--lr",
    "1e-2",
    "--no-progress",
]


@pytest.mark.skipif(
    not (torch_dist.is_available() and torch_dist.is_gloo_available()),
    reason="torch.distributed with the gloo backend is not available in this torch build",
)
def test_two_processes_match_one(tmp_path: Path, one_thread: None) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    assert main([*ARGS, "--out", str(one)]) == 0

    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parents[2] / "src"),
        "OMP_NUM_THREADS": "1",
    }
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    proc = subprocess.run(
        [*cmd, "-m", "attnkit", *ARGS, "--out", str(two)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("x 2 processes (gloo)") == 1  # the run header, rank 0 only
    assert proc.stdout.count("stopped (epochs)") == 1  # only rank 0 prints

    for name in ("last", "best"):
        a = load_file(str(one / name / "model.safetensors"))
        b = load_file(str(two / name / "model.safetensors"))
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(b[k], a[k], rtol=0, atol=1e-5, msg=f"{name}/{k}")
    ha = json.loads((one / "history.json").read_text())
    assert ha[1]["valid_loss"] < ha[0]["valid_loss"]  # it did learn something
    hb = json.loads((two / "history.json").read_text())
    assert [r["valid_loss"] for r in ha] == pytest.approx([r["valid_loss"] for r in hb], abs=1e-3)
    state = json.loads((two / "last" / "train_state.json").read_text())
    assert state["global_step"] == 14  # 7 global batches an epoch, not 14 local ones
