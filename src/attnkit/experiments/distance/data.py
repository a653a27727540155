"""The long-range recall task of ``attnkit experiment distance``: the answer is the one marked
symbol, Δ positions before the end of the sequence.

A sequence of T tokens (read left to right; the classifier answers at the last one):

    position:  0 ........ T−1−Δ ........ T−2   T−1
    token:     s s s s s   ŝ_y   s s s s  s     ?

every ``s`` a plain symbol drawn uniformly from K symbols (the distractors), ``ŝ_y`` the
marked copy of symbol y (the only marked token), ``?`` the query. The label is y. The
distractors are independent of y and the marked token is at the same place for a given Δ,
so nothing but the token Δ back carries any information about the answer: a model that
cannot reach it scores chance, 1/K. This is the "latch" of Bengio, Simard & Frasconi (1994)
and the distractor recall of Hochreiter & Schmidhuber (1997, Exp. 2): store one symbol for
Δ steps while reading noise.

Token ids: plain symbols 0..K−1, marked symbols K..2K−1, the query 2K (vocabulary 2K + 1).
Legend: B batch, T length.
"""

from __future__ import annotations

import torch
from torch import Tensor


def vocab_size(symbols: int) -> int:
    """K plain symbols, K marked symbols and the query: 2K + 1 token ids."""
    return 2 * symbols + 1


def recall_batch(deltas: Tensor, length: int, symbols: int, gen: torch.Generator
                 ) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Sequences whose answer is Δ_b back: deltas (B,) in 1..T−1 -> tokens (B, T), labels
    (B,). Random draws come from ``gen`` only (same generator state -> same batch)."""
    if symbols < 2:
        raise ValueError(f"symbols={symbols}; need at least 2 (chance would be 100%)")
    if len(deltas) and not (1 <= int(deltas.min()) and int(deltas.max()) <= length - 1):
        raise ValueError(
            f"deltas in {int(deltas.min())}..{int(deltas.max())} do not fit length {length}: "
            f"need 1 <= Δ <= length − 1"
        )
    b = len(deltas)
    tokens = torch.randint(0, symbols, (b, length), generator=gen)  # (B, T) distractors
    labels = torch.randint(0, symbols, (b,), generator=gen)  # (B,)
    rows = torch.arange(b)
    tokens[rows, length - 1 - deltas] = symbols + labels  # the marked symbol, Δ back
    tokens[:, -1] = 2 * symbols  # the query
    return tokens, labels


__all__ = ["recall_batch", "vocab_size"]
