"""Length-bucketed batches of padded id tensors.

Legend: B batch, S source length (with eos), T target length (with eos).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self

import torch
from torch import Tensor

from .example import Example
from .vocab import Vocab


class TensorBatch:
    """A batch (a dataclass) whose ``to(device)`` is a copy with every tensor field on
    ``device`` and the others (example positions, counts, a memory carry) as they are."""

    def to(self, device: Any) -> Self:
        moved = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, Tensor):
                setattr(moved, name, value.to(device))
        return moved


@dataclass
class Batch(TensorBatch):
    src: Tensor  # (B, S) ids, padded with pad_id
    src_len: Tensor  # (B,)
    tgt_in: Tensor  # (B, T) bos y_1 .. y_{T-1}
    tgt_out: Tensor  # (B, T) y_1 .. y_T (eos last), padded with pad_id
    index: list[int]  # positions of the examples in the dataset

    @property
    def tokens(self) -> int:
        return int((self.tgt_out != 0).sum())


def pad(rows: Sequence[Sequence[int]], pad_id: int = 0) -> Tensor:
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, max len)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def make_batch(
    examples: Sequence[Example], index: list[int], src_vocab: Vocab, tgt_vocab: Vocab
) -> Batch:
    src = [src_vocab.encode(e.src) for e in examples]
    tgt = [tgt_vocab.encode(e.tgt, bos=True) for e in examples]
    return Batch(
        src=pad(src),
        src_len=torch.tensor([len(s) for s in src]),
        tgt_in=pad([t[:-1] for t in tgt]),
        tgt_out=pad([t[1:] for t in tgt]),
        index=index,
    )


def bucket_order(
    lengths: Sequence[int], batch_size: int, rng: random.Random | None
) -> list[list[int]]:
    """Batches of indices with similar lengths. With ``rng``: shuffled within length ties and
    in batch order (training); without: sorted by length, deterministic (evaluation)."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}; it must be at least 1")
    idx = list(range(len(lengths)))
    if rng is not None:
        rng.shuffle(idx)
    idx.sort(key=lambda i: lengths[i])  # stable: shuffled within equal lengths
    batches = [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]
    if rng is not None:
        rng.shuffle(batches)
    return batches


def batches(
    examples: Sequence[Example],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int,
    rng: random.Random | None = None,
) -> list[Batch]:
    order = bucket_order([len(e.src) for e in examples], batch_size, rng)
    return [make_batch([examples[i] for i in b], b, src_vocab, tgt_vocab) for b in order]


__all__ = ["Batch", "batches", "bucket_order", "make_batch", "pad"]
