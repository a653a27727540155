"""Decoder-only language models: Transformer-XL (Dai et al. 2019) and a vanilla Transformer
LM beside it (absolute positions, no memory), at equal parameters.

Transformer-XL, §3.2 (segment-level recurrence) and §3.3 (relative positions), for layer n
and segment τ, SG the stop-gradient (``detach``), ∘ concatenation along the length:

    h̃^{n-1}_τ = [SG(m^{n-1}_τ) ∘ h^{n-1}_τ]           the memory: the last M inputs of layer n
    q = h^{n-1}_τ W_q,  k = h̃^{n-1}_τ W_k,E,  v = h̃^{n-1}_τ W_v
    A^rel_ij = q_iᵀk_j + q_iᵀW_k,R R_{i-j} + uᵀk_j + vᵀW_k,R R_{i-j}   (the ``xl`` stage)
    a = Masked-Softmax(A^rel / √d_h)   query i (at M + i) sees memory and segment keys j <= M + i
    m^{n-1}_{τ+1} = the last M rows of [m^{n-1}_τ ∘ h^{n-1}_τ]

The memory of layer n is the input of layer n (the embeddings for n = 1), as in the authors'
code; with pre-norm the memory is normalised with the segment, LayerNorm([m ∘ h]). The
vanilla LM adds the sinusoid PE (Vaswani 2017, §3.5) of positions 0 .. L-1 to each
segment's embeddings and attends within the segment only (Al-Rfou et al. 2018's setting);
its feed-forward layers are widened by ``xl_extra_ff`` so that both have the same number of
parameters at the same flags (XL's W_k,R, u and v are its only extra weights).

Legend: B batch (streams), L segment length, M memory length, D model width, H heads,
Dh = D / H head width, N layers, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_ranges
from ..core import AttentionResult
from ..modules import AttentionHeads, check_heads
from ..registry import build_position, canonical
from ..stages.alignment import CausalAlignment
from ..stages.position import Position, XLPosition
from .base import dropped
from .transformer import FeedForward, Residual, sinusoids


@dataclass
class LMConfig:
    """A decoder-only LM. ``src_vocab`` is unused (a language model reads and predicts one
    vocabulary, ``tgt_vocab``); it is kept so that every model builds from the same sizes."""

    src_vocab: int
    tgt_vocab: int
    dim: int = 128
    heads: int = 4
    layers: int = 2
    ff: int = 512
    dropout: float = 0.1
    norm: str = "pre"  # pre (x + Sublayer(LayerNorm(x))) | post (the paper's code default)

    def __post_init__(self) -> None:
        check_ranges(self, positive=("src_vocab", "tgt_vocab", "dim", "layers", "ff"))
        check_heads(self.dim, self.heads)
        if self.dim % 2 or (self.dim // self.heads) % 2:
            raise ValueError(
                f"{type(self).__name__}: dim={self.dim}, heads={self.heads}; the sinusoids "
                "need an even width and an even head width (dim / heads)"
            )
        if self.norm not in ("pre", "post"):
            raise ValueError(f"{type(self).__name__}.norm={self.norm!r}; choose 'pre' or 'post'")


@dataclass
class TransformerXLConfig(LMConfig):
    """``memory``: the memory length M, hidden states kept per layer (0: none)."""

    memory: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ranges(self, non_negative=("memory",), fractions=())


@dataclass
class TransformerLMConfig(LMConfig):
    """``match_xl``: widen the feed-forward layers by ``xl_extra_ff`` units, so that the
    parameters equal Transformer-XL's at the same sizes. ``position``: "sinusoidal" (the
    sinusoid PE added to the embeddings, the default) or a position stage in every attention
    (``attnkit.registry.POSITIONS``: learned, shaw, t5, alibi, rope, xl; T5 with causal
    buckets); ``max_len`` bounds the learned positions (a longer input is an error)."""

    match_xl: bool = True
    position: str = "sinusoidal"
    max_len: int = 512

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ranges(self, positive=("max_len",), fractions=())
        if self.position != "sinusoidal":
            canonical("position", self.position)  # a ValueError naming the known ones


PRESETS: dict[str, dict[str, float | int | str]] = {
    "tiny": dict(dim=32, heads=2, layers=2, ff=64, dropout=0.0),
    "small": dict(dim=64, heads=4, layers=2, ff=256, dropout=0.1),
    "base": dict(dim=256, heads=8, layers=4, ff=1024, dropout=0.1),
}
"""Sizes shared by both models (the vocabulary comes from the data)."""
XL_PRESETS = {k: {**v, "memory": {"tiny": 32, "small": 64, "base": 128}[k]}
              for k, v in PRESETS.items()}  # fmt: skip
"""Transformer-XL's presets: the shared sizes and a memory length M."""


def xl_extra_ff(dim: int, heads: int) -> int:
    """The feed-forward units that carry as many parameters as one XL layer's relative
    stage (W_k,R, u, v): (H·Dh·Dh + 2·H·Dh) / (2D + 1), rounded (a unit is a row of W_1, its
    bias and a column of W_2)."""
    with torch.device("meta"):
        extra = sum(p.numel() for p in XLPosition(heads, dim // heads).parameters())
    return round(extra / (2 * dim + 1))


@dataclass
class LMOutput:
    """logits (B, L, V); mems: per layer the memory for the next segment (B, M', D), detached,
    or None (no memory); weights: per layer (B, H, L, M' + L) when asked, memory keys first."""

    logits: Tensor
    mems: list[Tensor] | None = None
    weights: list[Tensor] | None = None


def update_memory(mems: Sequence[Tensor] | None, hids: Sequence[Tensor], length: int
                  ) -> list[Tensor] | None:  # fmt: skip
    """Dai 2019, §3.2: m_{τ+1} = SG(the last ``length`` rows of [m_τ ∘ h_τ]) per layer;
    hids: each layer's input (B, L, D), mems (B, M, D) or None -> (B, min(M + L, length), D)
    each, detached (no gradient flows into a previous segment), or None for length 0."""
    if length == 0:
        return None
    if mems is None:
        return [h[:, -length:].detach() for h in hids]
    return [torch.cat([m, h], dim=1)[:, -length:].detach() for m, h in zip(mems, hids, strict=True)]


def attend_with_memory(attn: AttentionHeads, h: Tensor, mem: Tensor | None,
                       need_weights: bool = False) -> AttentionResult:  # fmt: skip
    """Self-attention of a segment h (B, L, D) over [mem ∘ h] ((B, M, D) memory first):
    queries at positions M .. M + L - 1, keys at 0 .. M + L - 1, so that a causal alignment
    lets query i see every memory key and the segment keys up to i, and a position stage sees
    the distances i - j across the boundary. -> context (B, L, D), weights (B, H, L, M + L)."""
    if mem is None or mem.shape[1] == 0:
        return attn(h, need_weights=need_weights)
    m = mem.shape[1]
    keys = torch.cat([mem, h], dim=1)  # (B, M + L, D)
    at = torch.arange(m, m + h.shape[1], device=h.device)  # (L,) query positions
    return attn(h, keys, keys, need_weights=need_weights, positions=at)


class LMLayer(nn.Module):
    """Causal self-attention (over the memory and the segment) and a feed-forward sublayer."""

    def __init__(self, c: LMConfig, ff: int, position: Position | None) -> None:
        super().__init__()
        pre = c.norm == "pre"
        self.attn = AttentionHeads(c.dim, c.heads, align=CausalAlignment(),
                                       dropout=c.dropout, position=position)  # fmt: skip
        self.ffn = FeedForward(c.dim, ff, c.dropout)
        self.res1, self.res2 = Residual(c.dim, c.dropout, pre), Residual(c.dim, c.dropout, pre)

    def forward(self, x: Tensor, mem: Tensor | None, need_weights: bool = False
                ) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """x (B, L, D), mem (B, M, D) | None -> x (B, L, D), weights (B, H, L, M + L) | None."""
        h = self.res1.inner(x)  # LayerNorm(x) (pre-norm) or x
        m = None if mem is None else self.res1.inner(mem)
        r = attend_with_memory(self.attn, h, m, need_weights)
        x = self.res1.merge(x, r.context)  # (B, L, D)
        x, _ = self.res2(x, self.ffn)
        return x, r.weights


class DecoderLM(nn.Module):
    """The shared body: embeddings (tied to the output), N layers, a final LayerNorm with
    pre-norm. ``forward(ids (B, L), mems, need_weights, memory) -> LMOutput``."""

    family = "lm"
    name = "lm"

    config: LMConfig

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.config = c = config
        self.emb = nn.Embedding(c.tgt_vocab, c.dim, padding_idx=0)
        nn.init.normal_(self.emb.weight, std=c.dim**-0.5)
        ff = c.ff + self.extra_ff()
        self.layers = nn.ModuleList(LMLayer(c, ff, self.make_position()) for _ in range(c.layers))
        self.norm = nn.LayerNorm(c.dim) if c.norm == "pre" else nn.Identity()
        self.out_bias = nn.Parameter(torch.zeros(c.tgt_vocab))
        self.drop = nn.Dropout(c.dropout)

    def make_position(self) -> Position | None:
        """A fresh position stage for one layer's attention (None: positions in ``embed``)."""
        return None

    def extra_ff(self) -> int:
        """Feed-forward units added to ``config.ff`` in every layer."""
        return 0

    def embed(self, ids: Tensor) -> Tensor:
        """ids (B, L) -> √D E[ids] (B, L, D)."""
        return self.emb(ids) * math.sqrt(self.config.dim)

    def memory_length(self, memory: int | None) -> int:
        """How many hidden states per layer to keep for the next segment (0: no memory)."""
        return 0

    def forward(
        self,
        ids: Tensor,
        mems: Sequence[Tensor] | None = None,
        need_weights: bool = False,
        memory: int | None = None,
    ) -> LMOutput:
        """ids (B, L); mems: per layer (B, M', D) from the previous segment's output (None at
        a stream's start); memory: the memory length to keep (default the config's) ->
        LMOutput(logits (B, L, V), the next memory, weights per layer when asked)."""
        if mems is not None and len(mems) != len(self.layers):
            raise ValueError(f"mems has {len(mems)} tensors; pass one per layer "
                             f"({len(self.layers)}) or None")  # fmt: skip
        x = dropped(self.drop, self.embed(ids))  # (B, L, D)
        hids, weights = [], []
        for i, layer in enumerate(self.layers):
            hids.append(x)  # the input of layer i: what its memory keeps
            x, w = layer(x, None if mems is None else mems[i], need_weights)
            weights.append(w)
        x = self.norm(x)  # (B, L, D)
        logits = F.linear(x, self.emb.weight, self.out_bias)  # (B, L, V)
        kept = update_memory(mems, hids, self.memory_length(memory))
        return LMOutput(logits, kept, weights if need_weights else None)


class TransformerXL(DecoderLM):
    """Transformer-XL (Dai et al. 2019): segment-level recurrence with a memory of M hidden
    states per layer (§3.2) and relative positions in every attention (§3.3, the ``xl``
    stage: W_k,R, u and v per layer and head)."""

    name = "transformer-xl"
    config: TransformerXLConfig

    def make_position(self) -> Position | None:
        """The ``xl`` stage (W_k,R, u, v) for one layer, H heads of width D / H."""
        return XLPosition(self.config.heads, self.config.dim // self.config.heads)

    def memory_length(self, memory: int | None) -> int:
        """``memory`` when given (an evaluation may keep more than training did), else M."""
        length = self.config.memory if memory is None else memory
        if length < 0:
            raise ValueError(f"memory={length}; it must be >= 0")
        return length


class TransformerLM(DecoderLM):
    """The vanilla Transformer LM: absolute sinusoid positions 0 .. L-1 added to each
    segment's embeddings (or the ``position`` stage of its config in every attention),
    attention within the segment, no memory (``config.memory`` unused); with ``match_xl``
    its feed-forward width is ff + ``xl_extra_ff`` (equal parameters)."""

    name = "transformer-lm"
    config: TransformerLMConfig

    def make_position(self) -> Position | None:
        """None with ``position="sinusoidal"`` (PE in ``embed``), else the named stage for
        one layer's attention, H heads of width D / H, causal (T5's one-directional buckets)."""
        c = self.config
        if c.position == "sinusoidal":
            return None
        return build_position(c.position, c.heads, c.dim // c.heads, max_len=c.max_len,
                              causal=True)  # fmt: skip

    def extra_ff(self) -> int:
        """``xl_extra_ff(dim, heads)`` with ``match_xl`` (equal parameters), else 0."""
        return xl_extra_ff(self.config.dim, self.config.heads) if self.config.match_xl else 0

    def embed(self, ids: Tensor) -> Tensor:
        """ids (B, L) -> √D E[ids] + PE(0 .. L-1) (B, L, D) (Vaswani 2017, §3.5); without PE
        when a position stage in the attention carries the positions."""
        x = super().embed(ids)  # (B, L, D)
        if self.config.position != "sinusoidal":
            return x
        return x + sinusoids(ids.shape[1], self.config.dim, ids.device).to(x.dtype)


__all__ = [
    "PRESETS",
    "DecoderLM",
    "LMConfig",
    "LMLayer",
    "LMOutput",
    "XL_PRESETS",
    "TransformerLM",
    "TransformerLMConfig",
    "TransformerXL",
    "TransformerXLConfig",
    "attend_with_memory",
    "update_memory",
    "xl_extra_ff",
]
