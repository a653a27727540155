"""The long-range recall tasks of ``attnkit experiment distance``: the answer is one symbol,
Δ positions before the end of the sequence.

A sequence of T tokens (read left to right; the classifier answers at the last one). In a
run every Δ uses the same T = LEAD + Δmax + 1 (``length_for(Δmax)``), so that only the
distance changes, not the number of tokens a model reads:

    position:  0 ......... T−1−Δ ......... T−2   T−1
    token:     s  ...  s   ŝ_y / y   s ...  s     ?

every ``s`` a plain symbol drawn uniformly from K symbols (the distractors), ``?`` the query,
the label y. Three tasks:

  * ``marked``: the answer is a *marked* copy ŝ_y of symbol y, the only marked token. This
    is the latch of Bengio, Simard & Frasconi (1994) and the distractor recall of Hochreiter
    & Schmidhuber (1997, Exp. 2): store one flagged symbol for Δ steps while reading noise.
  * ``plain`` (no marker): the answer is the plain symbol exactly Δ back; nothing flags it,
    the model must know where it is (every symbol is a distractor until it is the one).
  * ``assoc`` (associative recall; Graves, Wayne & Danihelka 2014, §4.3; Ba et al. 2016;
    the single-query case of Arora et al. 2023's multi-query associative recall): the
    sequence mixes plain symbols and *keys* (the K marked ids), a key k followed, Δ back
    from the end, by the value y; the query at the end is k itself, so the model must
    find where k stood by its content and read the token after it. Every other key in the
    sequence is one of the other K − 1, so k occurs once before the query::

        position:  0 ........ T−2−Δ  T−1−Δ ........ T−1
        token:     s / k' ...   k      y    s / k'    k

    Here the query is a key, not ``?``: a model that only stores the last flagged token
    cannot tell which of the keys it read is asked for.

The distractors are independent of y, so nothing but the token Δ back carries information
about the answer: a model that cannot reach it scores chance, 1/K. At least ``LEAD``
distractors come first, so that the answer is never the first token (position 0 is special
to every model: a recurrent state starts there, attention has its first key there).

Token ids: plain symbols 0..K−1, marked symbols K..2K−1, the query 2K (vocabulary 2K + 1,
for both tasks, so that the models' sizes do not depend on the task).
Legend: B batch, T length.
"""

from __future__ import annotations

import torch
from torch import Tensor

TASKS = ("marked", "plain", "assoc")
LEAD = 10  # distractors before the answer's position


def vocab_size(symbols: int) -> int:
    """K plain symbols, K marked symbols and the query: 2K + 1 token ids."""
    return 2 * symbols + 1


def length_for(delta_max: int) -> int:
    """The sequence length T = LEAD + Δmax + 1 of a run whose longest distance is Δmax."""
    return LEAD + delta_max + 1


def _check(deltas: Tensor, length: int, symbols: int, most: int, why: str) -> None:
    """Raise unless K >= 2 and every Δ lies in 1..``most`` (``why`` ends the message)."""
    if symbols < 2:
        raise ValueError(f"symbols={symbols}; need at least 2 (chance would be 100%)")
    if len(deltas) and not (1 <= int(deltas.min()) and int(deltas.max()) <= most):
        raise ValueError(
            f"deltas in {int(deltas.min())}..{int(deltas.max())} do not fit length {length}: "
            f"need 1 <= Δ <= length − {length - most}{why}"
        )


def recall_batch(deltas: Tensor, length: int, symbols: int, gen: torch.Generator,
                 marked: bool = True) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Sequences whose answer is Δ_b back: deltas (B,) in 1..T−1 -> tokens (B, T), labels
    (B,). ``marked``: the answer is a marked symbol (K + y); else the plain symbol y there.
    Random draws come from ``gen`` only (same generator state -> same batch)."""
    _check(deltas, length, symbols, length - 1, "")
    b = len(deltas)
    tokens = torch.randint(0, symbols, (b, length), generator=gen)  # (B, T) distractors
    labels = torch.randint(0, symbols, (b,), generator=gen)  # (B,)
    rows = torch.arange(b)
    tokens[rows, length - 1 - deltas] = labels + (symbols if marked else 0)  # Δ back
    tokens[:, -1] = 2 * symbols  # the query
    return tokens, labels


def assoc_batch(deltas: Tensor, length: int, symbols: int, gen: torch.Generator
                ) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Associative recall (module docstring): deltas (B,) in 1..T−2 -> tokens (B, T), labels
    (B,). The key k_b (id K + k) at T−2−Δ_b, its value y_b (a plain symbol) at T−1−Δ_b, k_b
    again as the last token; every other token is a plain symbol or one of the other keys,
    each with probability 1/2. Random draws come from ``gen`` only."""
    _check(deltas, length, symbols, length - 2, " (the key stands before its value)")
    b = len(deltas)
    keys = torch.randint(0, symbols, (b,), generator=gen)  # (B,) the key asked for
    labels = torch.randint(0, symbols, (b,), generator=gen)  # (B,) its value
    plain = torch.randint(0, symbols, (b, length), generator=gen)  # (B, T)
    other = torch.randint(0, symbols - 1, (b, length), generator=gen)  # (B, T) keys != k
    other = other + (other >= keys[:, None]).long()  # skip k: uniform over the other K − 1
    is_key = torch.rand((b, length), generator=gen) < 0.5  # (B, T)
    tokens = torch.where(is_key, symbols + other, plain)  # (B, T)
    rows = torch.arange(b)
    tokens[rows, length - 2 - deltas] = symbols + keys  # the key, Δ + 1 back
    tokens[rows, length - 1 - deltas] = labels  # its value, Δ back
    tokens[:, -1] = symbols + keys  # the query: the key again
    return tokens, labels


def task_batch(task: str, delta: int, length: int, size: int, symbols: int,
               gen: torch.Generator) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``size`` sequences of ``task`` at distance ``delta``, ``length`` tokens each:
    tokens (size, T), labels (size,)."""
    if task not in TASKS:
        raise ValueError(f"task {task!r}; choose one of {TASKS}")
    deltas = torch.full((size,), delta)  # (B,)
    if task == "assoc":
        return assoc_batch(deltas, length, symbols, gen)
    return recall_batch(deltas, length, symbols, gen, marked=task == "marked")


__all__ = ["LEAD", "TASKS", "assoc_batch", "length_for", "recall_batch", "task_batch", "vocab_size"]
