"""What every sequence-to-sequence model offers: encode once, then step the decoder.

    memory = model.encode(src, src_len)           # dict of (B, ...) tensors
    state = model.init_state(memory)              # tuple of (B, ...) tensors
    logits, weights, state = model.step(prev, state, memory)   # (B, V), (B, S) | None

``forward`` (teacher forcing) runs ``step`` over the target; greedy and beam search
(attnkit.decode) use only these three methods, reordering the batch dim of memory
and state with ``select``.

Legend: B batch, S source length, T target length, V target vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._checks import get_checks
from ..masks import padding_mask

Memory = dict[str, Tensor]
State = tuple[Tensor, ...]


def dropped(drop: nn.Dropout, x: Tensor) -> Tensor:
    """``drop(x)``, skipping the module call where it is the identity (evaluation, p = 0):
    a decoding step would otherwise spend a module call on each of its dropouts, and a
    recurrent step's output stays the very tensor it was given."""
    return drop(x) if drop.training and drop.p > 0 else x


@dataclass
class Seq2SeqOutput:
    """What teacher forcing returns: logits (B, T, V), and the attention weights (B, T, S)
    over source positions, or None for a model without attention."""

    logits: Tensor  # (B, T, V)
    weights: Tensor | None  # (B, T, S) attention over source positions; None without attention


def source_mask(src_len: Tensor, max_len: int) -> Tensor:
    """(B, 1, S) bool, True = a real source token (may attend). Reads no value back to the
    host (a model's forward stays free of device synchronisations); under
    ``attnkit.set_checks("full")`` the lengths are checked as ``padding_mask`` checks them."""
    if get_checks() == "full":
        return padding_mask(src_len, max_len)
    positions = torch.arange(max_len, device=src_len.device)  # (S,)
    return (positions[None, :] < src_len[:, None])[:, None, :]  # (B, 1, S)


def select(tensors: dict[str, Tensor] | tuple[Tensor, ...], index: Tensor):
    """Reorder / repeat the batch dim (dim 0) of every tensor in a memory dict or state tuple."""
    if isinstance(tensors, dict):
        return {k: v.index_select(0, index) for k, v in tensors.items()}
    return tuple(t.index_select(0, index) for t in tensors)


class Seq2Seq(nn.Module):
    """Base class: subclasses implement ``encode``, ``init_state`` and ``step``."""

    name = "seq2seq"

    def encode(self, src: Tensor, src_len: Tensor) -> Memory:
        """Read the source once: src (B, S), src_len (B,) -> a dict of (B, ...) tensors."""
        raise NotImplementedError

    def init_state(self, memory: Memory) -> State:
        """The decoder's first state, a tuple of (B, ...) tensors, from the memory."""
        raise NotImplementedError

    def step(
        self, prev: Tensor, state: State, memory: Memory
    ) -> tuple[Tensor, Tensor | None, State]:
        """One decoder step from the previous tokens prev (B,): logits (B, V), attention
        weights (B, S) or None, and the next state. Under beam search B counts hypotheses and
        ``memory`` is what ``beam_memory`` made (after a first step once per sentence)."""
        raise NotImplementedError

    def beam_memory(self, memory: Memory, beam: int) -> Memory:
        """The memory ``step`` reads for B·K hypotheses (K = ``beam``; sentence b's at rows
        b·K .. b·K+K-1), from ``encode``'s memory of B sentences. By default every tensor
        is repeated K times; a model whose ``step`` reads one memory row for a sentence's K
        hypotheses returns it unrepeated."""
        first = next(iter(memory.values()))  # (B, ...)
        rep = torch.arange(first.shape[0], device=first.device).repeat_interleave(beam)  # (B·K,)
        return select(memory, rep)

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Seq2SeqOutput:
        """Teacher forcing: src (B, S), src_len (B,), tgt_in (B, T) starting with bos."""
        memory = self.encode(src, src_len)
        state = self.init_state(memory)
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            step_logits, w, state = self.step(tgt_in[:, t], state, memory)
            logits.append(step_logits)  # (B, V)
            if w is not None:
                weights.append(w)  # (B, S)
        return Seq2SeqOutput(
            torch.stack(logits, dim=1),  # (B, T, V)
            torch.stack(weights, dim=1) if weights else None,  # (B, T, S)
        )


def maxout(x: Tensor, pool: int = 2) -> Tensor:
    """Maxout (Goodfellow 2013) over consecutive groups of ``pool`` units:
    (..., pool·k) -> (..., k)."""
    return x.unflatten(-1, (-1, pool)).amax(dim=-1)


class DeepOutput(nn.Module):
    """Bahdanau 2015, App. A.2.2: t̃ = U_o s + V_o E y_{i-1} + C_o c; t = maxout(t̃);
    p(y_i) ∝ exp(W_o t). With ``maxout_dim=0``: logits = W_o [s; E y_{i-1}; c] (no maxout)."""

    def __init__(
        self, state_dim: int, emb_dim: int, ctx_dim: int, maxout_dim: int, vocab: int
    ) -> None:
        super().__init__()
        width = state_dim + emb_dim + ctx_dim
        self.pre = nn.Linear(width, 2 * maxout_dim) if maxout_dim else None
        self.out = nn.Linear(maxout_dim if maxout_dim else width, vocab)

    def forward(self, s: Tensor, y_emb: Tensor, c: Tensor) -> Tensor:
        x = torch.cat([s, y_emb, c], dim=-1)  # (B, Ds + E + Dc)
        if self.pre is not None:
            x = maxout(self.pre(x))  # (B, maxout_dim)
        return self.out(x)  # (B, V)


__all__ = [
    "DeepOutput",
    "Memory",
    "Seq2Seq",
    "Seq2SeqOutput",
    "State",
    "dropped",
    "maxout",
    "select",
    "source_mask",
]
