"""Checks the sequence-to-sequence model tests share: a tiny model trained on toy-ko through
the library's loop reloads from its checkpoint to the same logits; ``attnkit train`` then
``attnkit translate`` round-trip from the command line; decoding step by step gives the
teacher-forced forward's logits and weights; and small padded batches of random tokens.

    run = train_toy_ko("luong", tmp_path, epochs=3, lr=1e-2, align="local-p")
    loaded = reloads_to_the_same_logits(run, tmp_path)
    trains_and_translates_from_the_cli("luong", {"cell": "gru"}, tmp_path / "run", capsys)
    out = steps_equal_forward(model, src, src_len, tgt)
    src, src_len, tgt_in, tgt_out = padded_batch(seed=0)
    src, src_len, tgt_in = random_sources([7, 4, 1], tgt_len=5)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attnkit.cli import main
from attnkit.data.batching import batches
from attnkit.data.tasks import load_task
from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.train import checkpoint
from attnkit.train.loop import TrainConfig, TrainResult, train, valid_loss


def random_sources(lengths: list[int], tgt_len: int) -> tuple[torch.Tensor, ...]:
    """One random source per length in ``lengths`` (tokens 4..19, padded with 0 to the
    longest) and random decoder inputs (tokens 4..14) of ``tgt_len``, from torch's global
    generator seeded 0: (src (B, S), src_len (B,), tgt_in (B, tgt_len))."""
    torch.manual_seed(0)
    src = torch.randint(4, 20, (len(lengths), max(lengths)))
    src_len = torch.tensor(lengths)
    for i, n in enumerate(lengths):
        src[i, n:] = 0
    return src, src_len, torch.randint(4, 15, (len(lengths), tgt_len))


def padded_batch(seed: int = 0) -> tuple[torch.Tensor, ...]:
    """B=5 random sources of unequal lengths (one of length 1), padded random targets:
    (src, src_len, tgt_in, tgt_out)."""
    g = torch.Generator().manual_seed(seed)
    src_len = torch.tensor([6, 3, 5, 1, 6])
    src = torch.randint(3, 15, (5, 6), generator=g)
    tgt = torch.randint(3, 13, (5, 8), generator=g)
    for i, n in enumerate(src_len.tolist()):
        src[i, n:] = 0
        tgt[i, 2 + n :] = 0
    tgt[:, 0] = 1  # bos
    return src, src_len, tgt[:, :-1], tgt[:, 1:]


@dataclass
class ToyRun:
    """The trained model, its validation loss before training, the loop's result and the
    vocabularies built from the training split."""

    model: torch.nn.Module
    before: float
    result: TrainResult
    src_vocab: Vocab
    tgt_vocab: Vocab

    @property
    def losses(self) -> list[float]:
        """The validation loss before training, then after each epoch."""
        return [self.before] + [row["valid_loss"] for row in self.result.history]


def train_toy_ko(name: str, out: Path, *, epochs: int, lr: float, train_size: int = 240,
                 valid_size: int = 30, **options: Any) -> ToyRun:  # fmt: skip
    """Model ``name`` (preset tiny, ``options``), seeded, trained ``epochs`` epochs of batches
    of 16 at ``lr`` on toy-ko (seed 0), checkpoints in ``out``."""
    sp = load_task("toy-ko", seed=0, train_size=train_size, valid_size=valid_size, test_size=0)
    sv, tv = Vocab.build(e.src for e in sp.train), Vocab.build(e.tgt for e in sp.train)
    torch.manual_seed(0)
    m = build_model(name, src_vocab=len(sv), tgt_vocab=len(tv), preset="tiny", **options)
    before = valid_loss(m, batches(sp.valid, sv, tv, 16))
    cfg = TrainConfig(epochs=epochs, batch_size=16, lr=lr, progress=False, patience=0)
    result = train(m, name, sp.train, sp.valid, sv, tv, cfg, out, log=lambda s: None)
    return ToyRun(m, before, result, sv, tv)


def reloads_to_the_same_logits(run: ToyRun, out: Path) -> checkpoint.Loaded:
    """``out/last`` loaded; its model's logits on a fixed sentence equal the trained one's."""
    loaded = checkpoint.load(out / "last")
    src, src_len, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4]), torch.tensor([[1, 5]])
    run.model.eval()
    with torch.no_grad():
        expect = run.model(src, src_len, tgt).logits
        torch.testing.assert_close(loaded.model(src, src_len, tgt).logits, expect)
    return loaded


def trains_and_translates_from_the_cli(
    model: str, options: dict[str, str], out: Path, capsys: Any
) -> None:
    """``attnkit train --model MODEL --opt KEY=VALUE ...`` for one epoch on toy-ko writes the
    options into the checkpoint's config; ``attnkit translate`` then translates a sentence
    with it (``capsys``: pytest's, to read what it printed)."""
    args = ["train", "--task", "toy-ko", "--model", model, "--preset", "tiny", "--epochs", "1",
            "--train-size", "64", "--valid-size", "8", "--test-size", "8", "--no-progress",
            "--out", str(out)]  # fmt: skip
    for key, value in options.items():
        args += ["--opt", f"{key}={value}"]
    assert main(args) == 0
    config = (out / "best" / "config.json").read_text()
    assert all(f'"{key}": "{value}"' in config for key, value in options.items()), config
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(out), "--beam", "2", "I am a student"]) == 0
    assert capsys.readouterr().out.strip()


@torch.no_grad()
def steps_equal_forward(model: Any, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                        **tolerance: float) -> Any:  # fmt: skip
    """``model.step`` over ``tgt`` (B, T) one token at a time, from ``encode`` and
    ``init_state``, gives the logits and weights of the teacher-forced forward at every step
    (``tolerance``: ``rtol`` and ``atol`` of ``assert_close``); returns the forward's output."""
    out = model(src, src_len, tgt)
    memory = model.encode(src, src_len)
    state = model.init_state(memory)
    for t in range(tgt.shape[1]):
        logits, w, state = model.step(tgt[:, t], state, memory)
        torch.testing.assert_close(logits, out.logits[:, t], **tolerance)
        torch.testing.assert_close(w, out.weights[:, t], **tolerance)
    return out


def training_losses(model: Any, batch: tuple[torch.Tensor, ...], updates: int = 25,
                    lr: float = 1e-2) -> tuple[float, float]:
    """``model.training_loss(*batch)`` before the first and at the last of ``updates`` Adam
    updates on that one batch (training mode): (first, last)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(updates):
        loss, _ = model.training_loss(*batch)
        losses.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses[0], losses[-1]
