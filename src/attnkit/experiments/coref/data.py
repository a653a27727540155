"""The coref sentences as tensors for the pronoun tagger: source ids, lengths, the tag at the
pronoun (il / elle: the French gender of the noun it means, ``attnkit.data.coref.translate``),
and the positions the measurements read (the pronoun, the noun it means, the other noun).

    src      = ids of the English words                     (B, S), 0-padded on the right
    tag      = 0 (il) or 1 (elle), the pronoun's target word  (B,)

Legend: B sentences, S length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import torch
from torch import Tensor

from ...data.coref import PRONOUNS, CorefItem, gender, translate, vocabulary

PAD = 0
TAGS = (PRONOUNS["m"], PRONOUNS["f"])  # tag 0 = il, 1 = elle


@cache
def source_ids() -> dict[str, int]:
    """English word -> id; 0 is padding."""
    return {w: i + 1 for i, w in enumerate(vocabulary())}


@dataclass(frozen=True)
class Batch:
    """Sentences as tensors: src (B, S); lengths (B,); the pronoun's tag (B,) (0 il, 1 elle);
    the pronoun's, the referent's and the other noun's positions (B,) each; the referent's
    and the other noun's phrases ("the", fillers, noun) as masks (B, S); whether the two
    nouns' genders differ (B,) (the sentences where the tag needs the referent)."""

    src: Tensor
    lengths: Tensor
    tag: Tensor
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
    ids = source_ids()
    s = max(len(x.tokens) for x in items)
    src = torch.full((len(items), s), PAD, dtype=torch.long)  # (B, S)
    for b, x in enumerate(items):
        src[b, : len(x.tokens)] = torch.tensor([ids[w] for w in x.tokens])
    tag = torch.tensor([TAGS.index(translate(x)[x.pronoun]) for x in items])  # (B,)
    cols = torch.tensor([[x.pronoun, x.referent, x.other] for x in items])  # (B, 3)
    differ = torch.tensor([gender(x.tokens[x.referent]) != gender(x.tokens[x.other])
                           for x in items])  # fmt: skip
    lengths = torch.tensor([len(x.tokens) for x in items])
    phrases = torch.zeros(2, len(items), s, dtype=torch.bool)  # (2, B, S)
    for b, x in enumerate(items):
        for k, noun in enumerate((x.referent, x.other)):
            start = max(i for i in range(noun) if x.tokens[i] == "the")
            phrases[k, b, start : noun + 1] = True
    return Batch(src, lengths, tag, cols[:, 0], cols[:, 1], cols[:, 2], phrases[0],
                 phrases[1], differ)  # fmt: skip


def chunks(items: Sequence[CorefItem], size: int = 1024) -> list[Batch]:
    """``items`` in batches of ``size``, in order (for scoring; an even ``size`` keeps the
    minimal pairs, interleaved, together)."""
    return [encode(items[i : i + size]) for i in range(0, len(items), size)]


__all__ = ["PAD", "TAGS", "Batch", "chunks", "encode", "source_ids"]
