"""A language-model text cut into segments (data/lm_text.py): segment k of a text is characters
k·L .. k·L + L (L = ``segment``), its first L characters the inputs and its last L the targets.
``Segments`` makes them on demand from compact ids (data/text_ids.py); the packed rows of
data/lm_packed.py are made of the same ``Segment``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from .text_ids import TextIds, count_ids
from .vocab import Vocab


@dataclass(frozen=True)
class Segment:
    """``tokens``: up to L + 1 characters (inputs ``tokens[:-1]``, targets ``tokens[1:]``);
    ``start``: where its first character stands in its split's text."""

    tokens: tuple[str, ...]
    start: int


class Segments(Sequence[Segment]):
    """The segments of a text held as ids (``TextIds``), made on demand: segment k is
    characters k·L .. k·L + L, as ``segments`` cuts a string. Batches read the ids
    (``vocab_ids``); only what asks for a ``Segment`` gets one."""

    def __init__(self, text: TextIds, length: int) -> None:
        if length < 1:
            raise ValueError(f"--segment {length}; it must be at least 1")
        self.text, self.length = text, length
        self._table: tuple[Vocab, np.ndarray] | None = None  # the last vocabulary's lookup

    def __len__(self) -> int:
        return len(range(0, len(self.text) - 1, self.length))

    def bounds(self, k: int) -> tuple[int, int]:
        """(first character, one past the last) of segment ``k``."""
        if not 0 <= k < len(self):
            raise IndexError(f"segment {k} of {len(self)}")
        return k * self.length, min(k * self.length + self.length + 1, len(self.text))

    @overload
    def __getitem__(self, k: int) -> Segment: ...
    @overload
    def __getitem__(self, k: slice) -> list[Segment]: ...
    def __getitem__(self, k: int | slice) -> Segment | list[Segment]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        start, stop = self.bounds(k + len(self) if k < 0 else k)
        return Segment(self.text.chars(start, stop), start)

    def vocab_ids(self, k: int, vocab: Vocab) -> np.ndarray:
        """(L_k + 1,) int64: segment ``k`` as ids of ``vocab`` (``<unk>`` for a character it
        lacks), as ``vocab.encode(self[k].tokens, eos=False)`` but without the strings."""
        if self._table is None or self._table[0] is not vocab:
            self._table = (vocab, self.text.table(vocab))
        start, stop = self.bounds(k)
        return self._table[1][self.text.ids[start:stop]]  # (L_k + 1,)

    def vocab(self, min_freq: int = 1) -> Vocab:
        """``Vocab.build`` over the segments' tokens, counted from the ids: a character where
        two segments meet is in both, so it counts twice, as it does there."""
        n, length = len(self.text), self.length
        counts = self.text.counts() + count_ids(self.text.ids[length : n - 1 : length],
                                                len(self.text.alphabet))  # (A,)
        return Vocab.from_counts(dict(zip(self.text.alphabet, counts.tolist(), strict=True)),
                                 min_freq)  # fmt: skip


__all__ = ["Segment", "Segments"]
