"""The coref sentences as tensors for a gendered translation (``attnkit.data.coref.translate``):
source ids, lengths, the teacher-forced target input and output, and the positions the
measurements read (the pronoun, the noun it means, the other noun).

    src      = ids of the English words                     (B, S), 0-padded on the right
    tgt_out  = ids of the gendered target, word for word     (B, S)  (same length as src)
    tgt_in   = BOS, tgt_out[:-1]                             (B, S)  (query t predicts tgt_out[t])

Legend: B sentences, S length (source = target).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import torch
from torch import Tensor

from ...data.coref import ARTICLE, GENDER, PRONOUNS, CorefItem, gender, translate, vocabulary

PAD, BOS = 0, 1


@cache
def source_ids() -> dict[str, int]:
    """English word -> id; 0 is padding."""
    return {w: i + 1 for i, w in enumerate(vocabulary())}


@cache
def target_ids() -> dict[str, int]:
    """Target word -> id; 0 padding, 1 the start symbol."""
    words = {GENDER[w][0] if w in GENDER else w for w in vocabulary() if w not in ("the", "it")}
    words |= set(ARTICLE.values()) | set(PRONOUNS.values())
    return {w: i + 2 for i, w in enumerate(sorted(words))}


@dataclass(frozen=True)
class Batch:
    """Sentences as tensors: src, tgt_in, tgt_out (B, S); lengths (B,); the pronoun's, the
    referent's and the other noun's positions (B,) each (source = target positions); the
    referent's and the other noun's phrases ("the", fillers, noun) as masks (B, S); whether
    the two nouns' genders differ (B,) (the sentences where the pronoun needs the referent)."""

    src: Tensor
    lengths: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    pronoun: Tensor
    referent: Tensor
    other: Tensor
    referent_phrase: Tensor
    other_phrase: Tensor
    differ: Tensor

    def __len__(self) -> int:
        return len(self.src)


def encode(items: Sequence[CorefItem]) -> Batch:
    """``items`` as one right-padded batch."""
    if not items:
        raise ValueError("no sentences to encode")
    s_ids, t_ids = source_ids(), target_ids()
    s = max(len(x.tokens) for x in items)
    src = torch.full((len(items), s), PAD, dtype=torch.long)  # (B, S)
    tgt = torch.full((len(items), s), PAD, dtype=torch.long)  # (B, S)
    for b, x in enumerate(items):
        src[b, : len(x.tokens)] = torch.tensor([s_ids[w] for w in x.tokens])
        tgt[b, : len(x.tokens)] = torch.tensor([t_ids[w] for w in translate(x)])
    tgt_in = torch.cat([torch.full((len(items), 1), BOS), tgt[:, :-1]], dim=1)  # (B, S)
    cols = torch.tensor([[x.pronoun, x.referent, x.other] for x in items])  # (B, 3)
    differ = torch.tensor([gender(x.tokens[x.referent]) != gender(x.tokens[x.other])
                           for x in items])  # fmt: skip
    lengths = torch.tensor([len(x.tokens) for x in items])
    phrases = torch.zeros(2, len(items), s, dtype=torch.bool)  # (2, B, S)
    for b, x in enumerate(items):
        for k, noun in enumerate((x.referent, x.other)):
            start = max(i for i in range(noun) if x.tokens[i] == "the")
            phrases[k, b, start : noun + 1] = True
    return Batch(src, lengths, tgt_in, tgt, cols[:, 0], cols[:, 1], cols[:, 2], phrases[0],
                 phrases[1], differ)  # fmt: skip


def chunks(items: Sequence[CorefItem], size: int = 1024) -> list[Batch]:
    """``items`` in batches of ``size``, in order (for scoring)."""
    return [encode(items[i : i + size]) for i in range(0, len(items), size)]


__all__ = ["BOS", "PAD", "Batch", "chunks", "encode", "source_ids", "target_ids"]
