"""Teacher forcing over packed targets: a recurrent decoder's step t runs only the sentences
whose target is longer than t, and the output layer and the cross-entropy run once over the
real positions only.

A padded batch of targets (B, T) with real lengths ℓ_b costs B·T decoder steps and B·T rows
of the output layer, of which only N = Σ_b ℓ_b count in the loss; on toy-ko's batches of 64,
16–30% of the positions are padding. Packed as torch packs a sequence for ``nn.GRU``
(``pack_padded_sequence``: sentences sorted by length, longest first, so that the ones still
running at step t are the first b_t rows), the recurrence runs b_t rows at step t and the
output layer N rows in all. The loss is the padded path's: the token-mean cross-entropy

    loss = −(1/N') Σ_{b, t < ℓ_b, y_bt ≠ pad} log p(y_bt | y_b,<t, x_b)

with ℓ_b the last non-pad position + 1, so a pad id inside a target is ignored as before, and
the same gradients (``tests/models/test_packed.py``, float64). A dropout inside the step or
the output layer draws its masks for the N real rows only: the same distribution, other draws
than the padded path.

Legend: B batch, T target length, S source length, b_t rows running at step t, N = Σ_t b_t
real positions (time-major, as ``PackedSequence.data``), Dv value width, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from .base import Memory, Seq2SeqOutput


def target_lengths(tgt_out: Tensor) -> Tensor:
    """(B,) int64 on the CPU: the last non-pad position of each target + 1, at least 1 (an
    all-pad target runs one step, which the loss ignores), as ``pack_padded_sequence`` takes."""
    positions = torch.arange(1, tgt_out.shape[1] + 1, device=tgt_out.device)  # (T,)
    return ((tgt_out != 0) * positions).amax(1).clamp_min(1).cpu()  # (B,)


def rejoined(
    pieces: Sequence[Tensor], given: Sequence[Tensor], whole: Tensor,
    join: Callable[[Sequence[Tensor]], Tensor],
) -> Tensor:  # fmt: skip
    """``join(pieces)``, or ``whole`` itself when each piece is the very tensor ``given`` to
    its step (a step that passed its slice of the target embeddings on as a feature): no
    copy, and autograd does not split the gradient into pieces only to join it again."""
    if all(p is g for p, g in zip(pieces, given, strict=True)):
        return whole
    return join(pieces)


def _padded(packed: PackedSequence, data: Tensor, length: int) -> Tensor:
    """Packed rows data (N, ·) laid out as ``packed`` -> (B, T, ·), 0 after each length."""
    return pad_packed_sequence(packed._replace(data=data), batch_first=True, total_length=length)[0]


def packed_cross_entropy(
    model: Any, memory: Memory, tgt_in: Tensor, tgt_out: Tensor, label_smoothing: float = 0.0
) -> tuple[Tensor, Seq2SeqOutput]:
    """The cross-entropy of a recurrent decoder (``model.parts``, ``model.init_state``,
    ``model.tgt_emb``; RNNsearch, Luong) teacher-forced over tgt_in (B, T) against tgt_out
    (B, T), the recurrence and the output layer run on the real positions only (the module
    docstring). Returns the token-mean loss and the output padded back to (B, T, ·): logits
    (B, T, V) and weights (B, T, S), zero after each target's end."""
    pairs = torch.stack([tgt_in, tgt_out], -1)  # (B, T, 2): input and gold id, packed as one
    lengths = target_lengths(tgt_out)  # (B,) on the CPU
    ids = pack_padded_sequence(pairs, lengths, batch_first=True, enforce_sorted=False)  # (N, 2)
    sizes: list[int] = ids.batch_sizes.tolist()  # b_t, CPU-side: no device read
    order = ids.sorted_indices  # (B,) longest target first
    assert order is not None  # enforce_sorted=False always sorts
    memory = {k: v.index_select(0, order) for k, v in memory.items()}  # (B, ·) sorted
    prev, target = ids.data.unbind(-1)  # (N,) each: the inputs, the gold ids, rows alike
    embedded = model.tgt_emb(prev)  # (N, E): one lookup for the real positions
    prevs, inputs = prev.split(sizes), embedded.split(sizes)  # T x (b_t,), T x (b_t, E)
    state, running = model.init_state(memory), memory
    alphas, contexts, features = [], [], []
    for t, b in enumerate(sizes):
        if b != state[0].shape[0]:  # sentences ended: keep the first b rows (views)
            state = tuple(s[:b] for s in state)
            running = {k: v[:b] for k, v in memory.items()}
        parts = model.parts(prevs[t], state, running, inputs[t])
        state = parts.state
        alphas.append(parts.alpha)  # (b_t, S)
        contexts.append(parts.context)  # (b_t, Dv)
        features.append(parts.features)
    joined = tuple(
        rejoined(f, inputs, embedded, lambda x: torch.cat(list(x), 0))
        for f in zip(*features, strict=True)
    )  # (N, ·) each
    logits = parts.output(joined, torch.cat(contexts, 0))  # (N, V)
    loss = F.cross_entropy(logits, target, ignore_index=0, label_smoothing=label_smoothing)
    length = tgt_in.shape[1]
    alpha = _padded(ids, torch.cat(alphas, 0), length)  # (B, T, S)
    return loss, Seq2SeqOutput(_padded(ids, logits, length), alpha)


__all__ = ["packed_cross_entropy", "rejoined", "target_lengths"]
