"""Packed documents for language modelling (``attnkit train --task lm --pack``): the
training text cut at document boundaries, and the documents laid end to end in rows of at
most L inputs, each row read with the document mask (no position attends across documents)
and positions restarting at each document (models/lm.py), so that a packed row trains as its
documents would, each alone in a padded row.

What a document is:

    --train-text FILE   paragraphs: a document ends after a blank line (a line of only
                        spaces, tabs or "\\r"), or after a run of them
    generated text      its records, one a line: a document ends after each "\\n"

so that the documents, laid end to end, are the text. A document of more than L + 1
characters is cut as ``segments`` cuts a text (pieces of L + 1 characters, consecutive ones
sharing one), each piece a document of its own: a model without memory reads no further back
than L either way. A document of n characters fills n - 1 positions of a row (inputs its
first n - 1 characters, targets its last n - 1); its first character is never predicted, as
when it stands alone in a row. Documents are packed in the order of the text, a row closed
when the next document does not fit (the remainder is padding). Only the training split is
packed: validation and ``attnkit evaluate`` read the held-out text in segments, as for every
run, so that packed and unpacked runs are scored alike.

Legend: N characters, K documents (pieces), R rows, L the segment length (row width).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import numpy as np

from .lm_segments import Segment, Segments
from .text_ids import TextIds
from .vocab import Vocab

RULES = ("paragraph", "line")
"""How ``document_bounds`` finds documents: after blank lines (files), after every newline."""
BLANK = " \t\r"  # the characters a blank line may hold besides its newline


def document_bounds(text: TextIds, rule: str) -> np.ndarray:
    """Where the documents of ``text`` start, and its end: (K + 1,) int64, 0 first and N
    last, ``rule`` "paragraph" (after each run of blank lines) or "line" (after each
    newline)."""
    if rule not in RULES:
        raise ValueError(f"document rule {rule!r}; choose one of {', '.join(RULES)}")
    n = len(text)
    where = {c: i for i, c in enumerate(text.alphabet)}
    if "\n" not in where:
        return np.array([0, n], dtype=np.int64)
    newlines = np.flatnonzero(text.ids == where["\n"])  # (P,) positions of "\n"
    if rule == "line":
        cuts = newlines + 1
    else:
        blank_ids = [where[c] for c in BLANK if c in where]
        inked = np.cumsum(~np.isin(text.ids, [where["\n"], *blank_ids]))  # (N,) non-blank so far
        # line p of newlines[p] .. newlines[p + 1] (exclusive ends) is blank when it holds no
        # non-blank character: the count does not grow between its two newlines
        blank = inked[newlines[1:]] == inked[newlines[:-1]]  # (P - 1,)
        after = np.append(blank[1:], False)  # the line after it is blank too
        cuts = newlines[1:][blank & ~after] + 1  # after the last of a run of blank lines
    return np.unique(np.concatenate([[0], cuts, [n]]).astype(np.int64))


def pieces(bounds: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Documents ``bounds`` (K + 1,) cut into pieces of at most ``length`` + 1 characters,
    consecutive pieces of a document sharing one (``segments``' cut); pieces of one
    character (nothing to predict) dropped -> (starts, stops), (K',) int64 each."""
    starts, stops = bounds[:-1], bounds[1:]
    count = np.maximum((stops - starts - 1 + length - 1) // length, 0)  # (K,) pieces each
    first = np.repeat(starts, count)  # (K',)
    step = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)  # 0, 1, ..
    piece_starts = first + step * length  # (K',)
    piece_stops = np.minimum(piece_starts + length + 1, np.repeat(stops, count))  # (K',)
    return piece_starts.astype(np.int64), piece_stops.astype(np.int64)


def pack_rows(widths: np.ndarray, length: int) -> np.ndarray:
    """Greedy packing in order: documents of ``widths`` (K,) positions each (every one
    <= ``length``) into rows of at most ``length`` -> where each row's documents start,
    (R + 1,) int64 offsets into the documents."""
    offsets = [0]
    used = 0
    for k, w in enumerate(widths.tolist()):
        if used + w > length:
            offsets.append(k)
            used = 0
        used += w
    offsets.append(len(widths))
    return np.array(offsets if len(widths) else [0], dtype=np.int64)


class PackedRows(Sequence[tuple[Segment, ...]]):
    """The packed rows of a text held as ids: row k is a tuple of its documents as
    ``Segment``s; batches read ``row_ids``. ``rule``: what a document is (``RULES``)."""

    def __init__(self, text: TextIds, length: int, rule: str) -> None:
        if length < 1:
            raise ValueError(f"--segment {length}; it must be at least 1")
        self.text, self.length, self.rule = text, length, rule
        self.starts, self.stops = pieces(document_bounds(text, rule), length)  # (K,) each
        self.offsets = pack_rows(self.stops - self.starts - 1, length)  # (R + 1,)
        self._table: tuple[Vocab, np.ndarray] | None = None  # the last vocabulary's lookup

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def documents(self, k: int) -> range:
        """The documents (pieces) of row ``k``."""
        if not 0 <= k < len(self):
            raise IndexError(f"row {k} of {len(self)}")
        return range(int(self.offsets[k]), int(self.offsets[k + 1]))

    @overload
    def __getitem__(self, k: int) -> tuple[Segment, ...]: ...
    @overload
    def __getitem__(self, k: slice) -> list[tuple[Segment, ...]]: ...
    def __getitem__(self, k: int | slice) -> tuple[Segment, ...] | list[tuple[Segment, ...]]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        docs = self.documents(k + len(self) if k < 0 else k)
        return tuple(Segment(self.text.chars(int(self.starts[d]), int(self.stops[d])),
                             int(self.starts[d])) for d in docs)  # fmt: skip

    def row_ids(self, k: int, vocab: Vocab) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row ``k`` as ids of ``vocab``: inputs, targets and document ids (0, 1, .. in the
        order of the row), (W,) int64 each, W <= L the positions its documents fill."""
        if self._table is None or self._table[0] is not vocab:
            self._table = (vocab, self.text.table(vocab))
        table = self._table[1]
        inputs, targets, docs = [], [], []
        for i, d in enumerate(self.documents(k)):
            ids = table[self.text.ids[self.starts[d] : self.stops[d]]]  # (n,)
            inputs.append(ids[:-1])
            targets.append(ids[1:])
            docs.append(np.full(len(ids) - 1, i, dtype=np.int64))
        return np.concatenate(inputs), np.concatenate(targets), np.concatenate(docs)

    def vocab(self, min_freq: int = 1) -> Vocab:
        """The vocabulary of the unpacked segments of the same text (``Segments.vocab``), so
        that packed and unpacked runs on one text read the same ids."""
        return Segments(self.text, self.length).vocab(min_freq)


def train_split(text: TextIds, length: int, pack: bool, rule: str) -> Segments | PackedRows:
    """The training split of ``lm_splits``: the text's segments, or with ``pack`` its
    documents (``rule``) packed in rows of ``length``."""
    return PackedRows(text, length, rule) if pack else Segments(text, length)


__all__ = ["BLANK", "RULES", "PackedRows", "document_bounds", "pack_rows", "pieces",
           "train_split"]  # fmt: skip
