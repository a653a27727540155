"""The training house is one loop over task families: a family that is not translation (here
a toy "are at least two of four bits set" family, registered only inside the test) trains through
``attnkit.fit``, checkpoints, resumes, and is scored and shown by the CLI; a model that cannot
learn a task is refused before any work."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnkit
from attnkit._registry import Lazy
from attnkit.cli import main
from attnkit.data import tasks
from attnkit.data.example import Splits
from attnkit.models import MODELS, ModelEntry
from attnkit.tasks import registry as fam_mod
from attnkit.tasks.family import Family
from attnkit.train import checkpoint
from attnkit.train.config import DataConfig, FitConfig, ModelConfig, TrainConfig


@dataclass(frozen=True)
class Item:
    bits: tuple[int, ...]
    label: int  # 1 when at least two bits are set


@dataclass
class ParityBatch:
    x: torch.Tensor  # (B, N) float
    y: torch.Tensor  # (B,)
    index: list[int]

    def to(self, device):
        return ParityBatch(self.x.to(device), self.y.to(device), self.index)

    @property
    def tokens(self) -> int:
        return len(self.index)


@dataclass
class ParityConfig:
    src_vocab: int = 1
    tgt_vocab: int = 1
    width: int = 32


class Parity(nn.Module):
    family = "parity"

    def __init__(self, config: ParityConfig) -> None:
        super().__init__()
        self.config = config
        self.net = nn.Sequential(nn.Linear(4, config.width), nn.Tanh(), nn.Linear(config.width, 2))

    def forward(self, x):
        return self.net(x)  # (B, 2)


def _task(sizes, seed, **_):
    rng = random.Random(seed)
    items = []
    for _ in range(sum(sizes)):
        bits = tuple(rng.randrange(2) for _ in range(4))
        items.append(Item(bits, int(sum(bits) >= 2)))
    return tasks.split(items, sizes, seed + 1)


def _batches(examples, src_vocab, tgt_vocab, size, rng):
    order = list(range(len(examples)))
    if rng is not None:
        rng.shuffle(order)
    out = []
    for i in range(0, len(order), size):
        idx = order[i : i + size]
        x = torch.tensor([examples[j].bits for j in idx], dtype=torch.float32)
        y = torch.tensor([examples[j].label for j in idx])
        out.append(ParityBatch(x, y, idx))
    return out


def _loss(model, b, label_smoothing):
    logits = model(b.x)
    return F.cross_entropy(logits, b.y, label_smoothing=label_smoothing), logits


def _eval_loss(model, b):
    return float(F.cross_entropy(model(b.x), b.y, reduction="sum")), len(b.index)


def _accuracy(model, examples, src_vocab, tgt_vocab):
    (b,) = _batches(examples, src_vocab, tgt_vocab, len(examples), None)
    with torch.no_grad():
        return float((model(b.x).argmax(-1) == b.y).float().mean())


def _evaluate(loaded, examples):
    return {"accuracy": _accuracy(loaded.model, examples, None, None)}


def _show(loaded, examples, index, out, png):
    return [f"example {index}: bits {examples[index].bits}"]


PARITY = Family(
    name="parity",
    tokens=lambda e: ((), ()),
    batches=_batches,
    loss_of=_loss,
    eval_loss=_eval_loss,
    score=_accuracy,
    score_name="accuracy",
    evaluate=_evaluate,
    show=_show,
)


@pytest.fixture
def parity(monkeypatch):
    monkeypatch.setitem(fam_mod.FAMILIES.entries, "parity", Lazy("parity", f"{__name__}:PARITY"))
    monkeypatch.setitem(
        tasks.TASKS.entries, "parity", tasks.Task("parity", _task, (400, 64, 64), "parity")
    )
    parity_model = ModelEntry("parity-mlp", Parity, ParityConfig, {"small": {}})
    monkeypatch.setitem(MODELS.entries, "parity-mlp", parity_model)


def _config(out, **train):
    return FitConfig(
        data=DataConfig(task="parity"),
        model=ModelConfig("parity-mlp"),
        train=TrainConfig(**{"epochs": 8, "batch_size": 32, "lr": 3e-2, "patience": 0,
                             "progress": False, **train}),  # fmt: skip
        out=out,
    )


def test_a_non_translation_family_trains_through_fit_and_the_cli_scores_it(
    parity, tmp_path, capsys
):
    result = attnkit.fit(_config(tmp_path / "run"), log=lambda s: None)
    scores = [row["valid_exact"] for row in result.history]
    assert scores[-1] >= 0.95  # the rule is learned: the loop trained the model
    assert result.history[-1]["valid_loss"] < result.history[0]["valid_loss"]
    assert main(["evaluate", "--checkpoint", str(tmp_path / "run"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 64 and report["accuracy"] >= 0.95
    assert main(["view", "--checkpoint", str(tmp_path / "run"), "--example", "3"]) == 0
    assert "example 3: bits" in capsys.readouterr().out


def test_resume_continues_a_non_translation_run_to_the_same_weights(parity, tmp_path):
    whole = attnkit.fit(_config(tmp_path / "whole", epochs=4), log=lambda s: None)
    attnkit.fit(_config(tmp_path / "part", epochs=2), log=lambda s: None)
    cfg = _config(tmp_path / "part", epochs=4)
    cfg.resume = True
    part = attnkit.fit(cfg, log=lambda s: None)
    a = checkpoint.load(whole.last).model.state_dict()
    b = checkpoint.load(part.last).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_model_that_cannot_learn_the_task_is_refused_before_any_work(parity, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"learns translate tasks.*parity.*--model parity-mlp"):
        attnkit.fit(
            FitConfig(data=DataConfig(task="parity"), model=ModelConfig("rnnsearch"), out=out)
        )
    with pytest.raises(ValueError, match=r"learns parity tasks.*toy-ko.*translate"):
        attnkit.fit(
            FitConfig(data=DataConfig(task="toy-ko"), model=ModelConfig("parity-mlp"), out=out)
        )
    assert not out.exists()


def test_translate_refuses_a_model_of_another_family_with_what_to_do(parity, tmp_path, capsys):
    attnkit.fit(_config(tmp_path / "run", epochs=1), log=lambda s: None)
    assert main(["translate", "--checkpoint", str(tmp_path / "run"), "a b"]) == 2
    err = capsys.readouterr().err
    assert "parity model, not a translation model" in err and "attnkit evaluate" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["view", "--checkpoint", str(tmp_path / "run"), "a sentence"]) == 2
    assert "--example N" in capsys.readouterr().err


def test_every_registered_task_and_model_names_a_registered_family():
    for name in tasks.TASKS:
        fam_mod.family(tasks.task_family(name))
    for name in MODELS:
        fam_mod.family(fam_mod.model_family(name))
    assert Splits  # the splits type the tasks return


def test_train_without_model_picks_the_tasks_own_model():
    from attnkit.cli import make_parser
    from attnkit.cli.train import fit_config

    for task, model in (("toy-ko", "rnnsearch"), ("series", "forecaster"), ("docs", "han"),
                        ("digit-qa", "digit-qa"), ("digit-captions", "captioner")):  # fmt: skip
        args = make_parser().parse_args(["train", "--task", task, "--out", "x"])
        assert fit_config(args).model.name == model
