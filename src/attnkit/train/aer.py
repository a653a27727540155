"""Alignment error rate of attention against gold word alignments (Och & Ney 2003):

    AER(A; S, P) = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

with sure = possible = the gold links here, so AER = 1 - 2|A ∩ G| / (|A| + |G|). The model's
links A come from attention on the *reference* translation (teacher forcing): each target
token is linked to the source token it attends most.

Legend: B batch, T target length, S source length.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..data.batching import batches
from ..data.example import Example
from ..data.vocab import Vocab
from ..models import Seq2Seq


@torch.no_grad()
def forced_attention(
    model: Seq2Seq,
    examples: Sequence[Example],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int = 128,
) -> list[Tensor] | None:
    """Per example, attention (len(tgt), len(src)) while reading the reference, eos rows and
    columns dropped; None when the model has no attention."""
    model.eval()
    device = next(model.parameters()).device
    out: list[Tensor | None] = [None] * len(examples)
    for b in batches(list(examples), src_vocab, tgt_vocab, batch_size):
        b = b.to(device)
        w = model(b.src, b.src_len, b.tgt_in).weights  # (B, T, S)
        if w is None:
            return None
        for k, i in enumerate(b.index):
            e = examples[i]
            out[i] = w[k, : len(e.tgt), : len(e.src)].float().cpu()
    return [x for x in out if x is not None]


def argmax_links(weights: Tensor) -> set[tuple[int, int]]:
    """(src_idx, tgt_idx) for each target row's most-attended source position."""
    return {(int(i), j) for j, i in enumerate(weights.argmax(dim=-1).tolist())}


def alignment_error_rate(
    predicted: Sequence[set[tuple[int, int]]], gold: Sequence[Sequence[tuple[int, int]]]
) -> float:
    """Corpus AER in [0, 1] (sure = possible = gold)."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments but {len(gold)} gold ones")
    hit = sum(len(a & set(g)) for a, g in zip(predicted, gold, strict=True))
    total = sum(len(a) for a in predicted) + sum(len(set(g)) for g in gold)
    return 1.0 - 2.0 * hit / total if total else 0.0


def attention_aer(
    model: Seq2Seq, examples: Sequence[Example], src_vocab: Vocab, tgt_vocab: Vocab
) -> float | None:
    """AER of the model's attention on examples that carry gold links; None if it cannot be
    computed (no attention, or no gold links)."""
    with_links = [e for e in examples if e.links]
    if not with_links:
        return None
    weights = forced_attention(model, with_links, src_vocab, tgt_vocab)
    if weights is None:
        return None
    return alignment_error_rate([argmax_links(w) for w in weights], [e.links for e in with_links])


__all__ = ["alignment_error_rate", "argmax_links", "attention_aer", "forced_attention"]
