"""Translate a list of examples in batches: tokens and attention weights, in input order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..data.batching import batches
from ..data.example import Example
from ..data.vocab import Vocab
from ..models import Seq2Seq
from .search import decode


@dataclass
class Translations:
    """Translations in the order of the input examples: the hypotheses' tokens, and their
    attention weights (T_i + 1, S_i + 1) (hypothesis tokens + eos x source + eos) or None."""

    hyps: list[list[str]]  # in the order of the input examples
    weights: list[Tensor | None]  # (T_i + 1, S_i + 1): hypothesis tokens + eos x source + eos


def translate(
    model: Seq2Seq,
    examples: Sequence[Example],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    batch_size: int = 128,
    beam: int = 1,
    length_penalty: float = 1.0,
) -> Translations:
    """Decode ``examples`` (greedy, or beam search with ``beam`` > 1) in batches of
    ``batch_size``; hypotheses as target tokens, and the weights of each, in input order."""
    hyps: list[list[str]] = [[] for _ in examples]
    weights: list[Tensor | None] = [None for _ in examples]
    device = next(model.parameters()).device
    with torch.no_grad():
        for b in batches(list(examples), src_vocab, tgt_vocab, batch_size):
            d = decode(
                model,
                b.src.to(device),
                b.src_len.to(device),
                beam=beam,
                length_penalty=length_penalty,
            )
            for j, i in enumerate(b.index):
                hyps[i] = tgt_vocab.decode(d.tokens[j])
                weights[i] = d.weights[j]
    return Translations(hyps, weights)


__all__ = ["Translations", "translate"]
