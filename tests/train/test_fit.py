"""``attnkit.fit``, the library entry point: a run from a FitConfig alone, the same run twice
gives the same numbers and weights, and bad settings fail at construction."""

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import attnkit
from attnkit.train.config import DataConfig, FitConfig, ModelConfig, TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread_module")


def config(out: Path, **train) -> FitConfig:
    return FitConfig(
        data=DataConfig(task="copy", train_size=48, valid_size=8, test_size=8, max_len=6),
        model=ModelConfig("rnnsearch", "tiny", {"emb": 12}),
        train=TrainConfig(epochs=2, batch_size=16, lr=1e-2, progress=False, **train),
        out=out,
    )


def test_fit_trains_and_is_deterministic(tmp_path: Path) -> None:
    a = attnkit.fit(config(tmp_path / "a"), log=lambda s: None)
    b = attnkit.fit(config(tmp_path / "b"), log=lambda s: None)
    assert a.steps == 6 and a.epochs_run == 2 and a.stopped == "epochs"
    assert a.history == [{**r, "seconds": a.history[i]["seconds"]} for i, r in enumerate(b.history)]
    assert a.data is not None and len(a.data.test) == 8 and a.best == tmp_path / "a" / "best"
    best = load_file(str(a.best / "model.safetensors"))
    assert a.parameters == sum(t.numel() for t in best.values())
    wa = load_file(str(a.last / "model.safetensors"))
    wb = load_file(str(b.last / "model.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    meta = json.loads((a.best / "config.json").read_text())["meta"]
    assert meta["task"] == "copy" and meta["train"]["lr"] == 1e-2


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: DataConfig(task="copy", train_size=0), "--train-size 0; it must be at least 1"),
        (lambda: DataConfig(task="copy", valid_size=0), "--valid-size 0"),
        (lambda: DataConfig(), "say what to train on"),
        (lambda: DataConfig(task="copy", train_tsv="x.tsv"), "either --task or corpus files"),
        (lambda: TrainConfig(clip=math.nan), "clip=nan; it must be a finite number"),
        (lambda: TrainConfig(lr=math.inf), "lr=inf; it must be a finite number"),
        (lambda: TrainConfig(target_exact=2), "target_exact=2"),
        (lambda: ModelConfig("rnnsearch", "small", {"emb": 0}), "emb=0"),
        (lambda: ModelConfig("nope"), "unknown model 'nope'"),
        (lambda: FitConfig(DataConfig(task="copy"), out=""), "--out is empty"),
        (lambda: FitConfig(DataConfig(task="copy"), out="x", resume=True, overwrite=True),
         "pick one"),
        (lambda: FitConfig(DataConfig(task="copy"), out="x", threads=0), "--threads 0"),
    ],
)  # fmt: skip
def test_bad_settings_fail_at_construction(make, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make()
