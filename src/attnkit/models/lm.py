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
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_ranges
from ..core import AttentionResult
from ..grouped import check_kv_heads
from ..kv_cache import KVCache
from ..linear import LinearState, step_heads
from ..mask_mods import document
from ..modules import AttentionHeads, check_heads
from ..registry import (
    STRIDED,
    build_alignment,
    build_position,
    build_score,
    canonical,
    window_or_stride,
)
from ..stages.alignment import Alignment, CausalAlignment
from ..stages.kernels import ratio
from ..stages.normalisers import softmax
from ..stages.position import Position, XLPosition
from ..stages.rope_scaling import scaling_name
from ..stages.scores import Score
from ..stages.sparse import PatternSpec
from .base import dropped
from .registry import MODELS, ModelEntry
from .transformer import FeedForward, Residual, sinusoids


@dataclass
class LMConfig:
    """A decoder-only LM. ``src_vocab`` is unused (a language model reads and predicts one
    vocabulary, ``tgt_vocab``); it is kept so that every model builds from the same sizes.
    ``kv_heads``: key/value heads shared by groups of heads / kv_heads query heads
    (grouped-query attention, Ainslie et al. 2023; 1: multi-query; None: one per head)."""

    src_vocab: int
    tgt_vocab: int
    dim: int = 128
    heads: int = 4
    layers: int = 2
    ff: int = 512
    dropout: float = 0.1
    norm: str = "pre"  # pre (x + Sublayer(LayerNorm(x))) | post (the paper's code default)
    kv_heads: int | None = None  # key/value heads (grouped-query attention); None: heads

    def __post_init__(self) -> None:
        check_ranges(self, positive=("src_vocab", "tgt_vocab", "dim", "layers", "ff"))
        check_heads(self.dim, self.heads)
        check_kv_heads(self.heads, self.kv_heads)
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
    buckets); ``max_len`` bounds the learned positions (a longer input is an error).
    ``align``: the attention's alignment, one of ``CAUSAL_ALIGNMENTS`` (default "causal",
    dense; the Sparse Transformer's strided / fixed patterns, Child et al. 2019, merged or
    split across heads; a causal sliding window), with ``stride`` the patterns' stride l
    (strided, fixed) and ``window`` the sliding window's radius, one of them required by all
    but "causal" (``window`` for a pattern is read as its stride, with a DeprecationWarning);
    ``summary`` the fixed pattern's summary columns c (1 .. l; §4.2: c ∈ {8, 16, 32} for
    l ∈ {128, 256}, c = 32 with l = 128 on enwik8).
    ``rope_scaling`` ("linear", "ntk", "yarn") and ``rope_factor`` s: RoPE trained at
    ``max_len`` positions stretched to s·max_len (``attnkit.stages.rope_scaling``). ``attention``:
    "softmax" (default) or a kernel score of ``ATTENTIONS``, causal linear attention in
    O(L·Dh²) (Katharopoulos et al. 2020, φ = elu + 1; "performer": FAVOR+, Choromanski et al.
    2021, with ``features`` random features, 0: round(Dh·ln Dh)); it takes the causal
    alignment and no attention dropout (there are no weights to drop)."""

    match_xl: bool = True
    position: str = "sinusoidal"
    max_len: int = 512
    align: str = "causal"
    window: int = 0
    stride: int = 0
    summary: int = 1
    attention: str = "softmax"
    features: int = 0
    rope_scaling: str = "none"
    rope_factor: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ranges(self, positive=("max_len",), non_negative=("window", "stride"),
                     fractions=())  # fmt: skip
        if self.position != "sinusoidal":
            canonical("position", self.position)  # a ValueError naming the known ones
        if self.align not in CAUSAL_ALIGNMENTS:
            raise ValueError(
                f"{type(self).__name__}.align={self.align!r}: a language model needs a causal "
                f"alignment; choose one of {', '.join(CAUSAL_ALIGNMENTS)}"
            )
        window, stride = window_or_stride(self.align, self.window or None, self.stride or None,
                                          stacklevel=2)  # fmt: skip
        self.window, self.stride = window or 0, stride or 0
        size = "stride" if self.align in STRIDED else "window"
        if self.align != "causal" and max(self.window, self.stride) < 1:
            raise ValueError(
                f"{type(self).__name__}: align={self.align!r} needs {size} >= 1 (the stride l "
                f"of strided / fixed, the radius of sliding-causal; got {size}=0)"
            )
        if self.summary != 1 and not self.align.startswith("fixed"):
            raise ValueError(f"{type(self).__name__}: summary={self.summary} is the fixed "
                             f"pattern's summary columns c; align={self.align!r} has none "
                             "(use align='fixed-causal')")  # fmt: skip
        if self.align.startswith("fixed"):
            PatternSpec("fixed", self.stride, self.summary)  # c in 1 .. l, or a ValueError
        if (self.rope_scaling != "none" or self.rope_factor != 1.0) and self.position != "rope":
            raise ValueError(f"{type(self).__name__}: rope_scaling / rope_factor stretch RoPE; "
                             f"use position='rope' (got {self.position!r})")  # fmt: skip
        scaling_name(self.rope_scaling)  # a ValueError naming the known ones
        if not self.rope_factor >= 1:
            raise ValueError(f"{type(self).__name__}.rope_factor={self.rope_factor}; give the "
                             "context extension s >= 1 (1: none)")  # fmt: skip
        if self.attention not in ATTENTIONS:
            raise ValueError(f"{type(self).__name__}.attention={self.attention!r}; choose one "
                             f"of {', '.join(ATTENTIONS)}")  # fmt: skip
        if self.attention != "softmax" and self.align != "causal":
            raise ValueError(
                f"{type(self).__name__}: attention={self.attention!r} sums over the causal "
                f"prefix; it cannot honour align={self.align!r}: use align='causal'"
            )
        if self.features < 0 or (self.features and self.attention != "performer"):
            raise ValueError(f"{type(self).__name__}.features={self.features}: the random "
                             "feature count of attention='performer' (0: its default)")  # fmt: skip
        if self.align.endswith("-heads") and self.heads < 2:
            raise ValueError(f"{type(self).__name__}: align={self.align!r} splits its two "
                             f"parts across heads; use heads >= 2 (got {self.heads})")  # fmt: skip


CAUSAL_ALIGNMENTS = ("causal", "sliding-causal", "strided-causal", "fixed-causal",
                     "strided-causal-heads", "fixed-causal-heads")  # fmt: skip
"""The alignments a language model may use (no position sees a later one)."""
ATTENTIONS = ("softmax", "linear", "performer")
"""The attention of ``TransformerLMConfig.attention``: softmax, or a kernel score (registry)."""


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


def pack_refusal(config: LMConfig) -> str | None:
    """Why a model of ``config`` cannot train on packed documents (``--pack``), in one line
    that says what can; None when it can. A packed row must train as its documents would
    alone: no memory across them, a mask per row (softmax attention), and positions that
    either restart per document (the sinusoids added to the embeddings) or enter as
    distances i - j (RoPE, ALiBi, T5, Shaw, XL; equal within a document wherever it starts)."""
    if not isinstance(config, LMConfig):
        return None  # not a language model: the task's pairing check says which models fit
    if not isinstance(config, TransformerLMConfig):
        return (
            "--pack: transformer-xl's memory carries hidden states from one segment to "
            "the next, across documents; use --model transformer-lm"
        )
    if config.attention != "softmax":
        return (
            f"--pack: attention={config.attention!r} keeps running sums over the causal "
            "prefix and cannot honour the document mask; use --attention softmax"
        )
    if config.position == "learned":
        return (
            "--pack: learned positions in the attention number from the row's start, not "
            "the document's; use --position sinusoidal (restarted per document) or a "
            "relative one (rope, alibi, t5, shaw, xl)"
        )
    if config.align.startswith("fixed"):
        return (
            f"--pack: align={config.align!r} puts its blocks at absolute positions of the "
            "row; use causal, sliding-causal or strided-causal"
        )
    return None


def check_documents(documents: Tensor, ids: Tensor) -> None:
    """Packed documents' ids: integers of ``ids``' shape (B, L), non-decreasing along each
    row (a document is one run of positions); a ValueError saying what to give."""
    if (
        documents.shape != ids.shape
        or documents.dtype.is_floating_point
        or documents.dtype in (torch.bool, torch.complex64, torch.complex128)
    ):
        raise ValueError(f"documents of shape {tuple(documents.shape)} and dtype "
                         f"{documents.dtype}; give integer document ids of the ids' shape "
                         f"{tuple(ids.shape)}, one per position")  # fmt: skip
    if documents.shape[1] > 1 and bool((documents[:, 1:] < documents[:, :-1]).any()):
        raise ValueError(
            "documents must be non-decreasing along each row (0 0 0 1 1 2 ..): "
            "a document is one run of positions; renumber them in row order"
        )


def document_positions(documents: Tensor) -> Tensor:
    """documents (B, L), non-decreasing ids -> (B, L) each position's offset from the start
    of its document (0 1 2 0 1 0 1 2 for 0 0 0 1 1 2 2 2)."""
    at = torch.arange(documents.shape[1], device=documents.device).expand_as(documents)  # (B, L)
    new = torch.ones_like(documents, dtype=torch.bool)  # (B, L) a document starts here
    new[:, 1:] = documents[:, 1:] != documents[:, :-1]
    start = torch.where(new, at, torch.zeros_like(at)).cummax(dim=1).values  # (B, L)
    return at - start


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
                       need_weights: bool = False, mask: Tensor | None = None
                       ) -> AttentionResult:  # fmt: skip
    """Self-attention of a segment h (B, L, D) over [mem ∘ h] ((B, M, D) memory first):
    queries at positions M .. M + L - 1, keys at 0 .. M + L - 1, so that a causal alignment
    lets query i see every memory key and the segment keys up to i, and a position stage sees
    the distances i - j across the boundary. -> context (B, L, D), weights (B, H, L, M + L).
    ``mask`` (B, L, L), True = may attend (packed documents), goes with no memory only."""
    if mem is None or mem.shape[1] == 0:
        return attn(h, need_weights=need_weights, mask=mask)
    if mask is not None:
        raise ValueError("a mask over the segment goes with no memory; pass mem=None")
    m = mem.shape[1]
    keys = torch.cat([mem, h], dim=1)  # (B, M + L, D)
    at = torch.arange(m, m + h.shape[1], device=h.device)  # (L,) query positions
    return attn(h, keys, keys, need_weights=need_weights, positions=at)


class LMLayer(nn.Module):
    """Causal self-attention (over the memory and the segment) and a feed-forward sublayer."""

    def __init__(self, c: LMConfig, ff: int, position: Position | None,
                 align: Alignment | None = None, score: Score | None = None) -> None:  # fmt: skip
        super().__init__()
        pre = c.norm == "pre"
        align = CausalAlignment() if align is None else align
        # a kernel score (linear attention) is normalised by its row sum and has no weights
        # to drop; any other score, the scaled dot product's softmax
        kernel = getattr(score, "feature_map", False)
        self.attn = AttentionHeads(c.dim, c.heads, align=align,
                                   dropout=0.0 if kernel else c.dropout, position=position,
                                   kv_heads=c.kv_heads, score=score,
                                   normaliser=ratio if kernel else softmax)  # fmt: skip
        self.ffn = FeedForward(c.dim, ff, c.dropout)
        self.res1, self.res2 = Residual(c.dim, c.dropout, pre), Residual(c.dim, c.dropout, pre)

    def forward(self, x: Tensor, mem: Tensor | None, need_weights: bool = False,
                mask: Tensor | None = None) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """x (B, L, D), mem (B, M, D) | None, mask (B, L, L) | None (True = may attend) -> x
        (B, L, D), weights (B, H, L, M + L) | None."""
        h = self.res1.inner(x)  # LayerNorm(x) (pre-norm) or x
        m = None if mem is None else self.res1.inner(mem)
        r = attend_with_memory(self.attn, h, m, need_weights, mask)
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
        self.layers = nn.ModuleList(LMLayer(c, ff, self.make_position(), self.make_alignment(),
                                            self.make_score())
                                    for _ in range(c.layers))  # fmt: skip
        self.norm = nn.LayerNorm(c.dim) if c.norm == "pre" else nn.Identity()
        self.out_bias = nn.Parameter(torch.zeros(c.tgt_vocab))
        self.drop = nn.Dropout(c.dropout)

    def make_position(self) -> Position | None:
        """A fresh position stage for one layer's attention (None: positions in ``embed``)."""
        return None

    def make_alignment(self) -> Alignment:
        """A fresh alignment for one layer's attention: causal (j <= i)."""
        return CausalAlignment()

    def make_score(self) -> Score | None:
        """A fresh score for one layer's attention (None: scaled dot product, softmax)."""
        return None

    def extra_ff(self) -> int:
        """Feed-forward units added to ``config.ff`` in every layer."""
        return 0

    def embed(self, ids: Tensor, positions: Tensor | None = None) -> Tensor:
        """ids (B, L) -> √D E[ids] (B, L, D); ``positions`` (B, L) are for a model whose
        embeddings carry them (none here)."""
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
        documents: Tensor | None = None,
    ) -> LMOutput:
        """ids (B, L); mems: per layer (B, M', D) from the previous segment's output (None at
        a stream's start); memory: the memory length to keep (default the config's);
        documents (B, L): packed documents, each row's document ids non-decreasing (0 0 0 1 1
        2 ..): no position attends another document and positions restart at each
        (``document_positions``), as if each document stood alone in a row ->
        LMOutput(logits (B, L, V), the next memory, weights per layer when asked)."""
        if mems is not None and len(mems) != len(self.layers):
            raise ValueError(f"mems has {len(mems)} tensors; pass one per layer "
                             f"({len(self.layers)}) or None")  # fmt: skip
        mask, positions = None, None
        if documents is not None:
            refusal = pack_refusal(self.config)
            if refusal is not None:
                raise ValueError(refusal)
            check_documents(documents, ids)
            if mems is not None:
                raise ValueError("packed documents start without memory; pass mems=None")
            length = ids.shape[1]
            mask = document(documents).dense(length, length, device=ids.device)  # (B, L, L)
            positions = document_positions(documents)  # (B, L)
        x = dropped(self.drop, self.embed(ids, positions))  # (B, L, D)
        hids, weights = [], []
        for i, layer in enumerate(self.layers):
            hids.append(x)  # the input of layer i: what its memory keeps
            x, w = layer(x, None if mems is None else mems[i], need_weights, mask)
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


def sinusoid_at(t: int, dim: int, device: torch.device | None = None) -> Tensor:
    """``sinusoids``' row t alone (Vaswani 2017, §3.5), O(D) whatever t: PE(t, 2i) =
    sin(t/10000^(2i/d)), PE(t, 2i+1) = cos(...) -> (D,)."""
    inv = torch.exp(
        torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim)
    )  # (D/2,)
    angle = t * inv  # (D/2,)
    return torch.stack((angle.sin(), angle.cos()), dim=-1).flatten()  # (D,)


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
                              causal=True, rope_scaling=c.rope_scaling,
                              rope_factor=c.rope_factor)  # fmt: skip

    def make_alignment(self) -> Alignment:
        """The config's ``align`` (default causal) with its ``window`` or ``stride``, for one
        layer."""
        c = self.config
        if c.align == "causal":
            return CausalAlignment()
        return build_alignment(c.align, c.dim // c.heads, c.window or None,
                               stride=c.stride or None,
                               summary=None if c.summary == 1 else c.summary)  # fmt: skip

    def make_score(self) -> Score | None:
        """None for softmax attention, else the config's kernel score for one layer, heads of
        width D / H (``attention``, ``features``)."""
        c = self.config
        if c.attention == "softmax":
            return None
        return build_score(c.attention, c.dim // c.heads, hidden=c.features or None)

    def step(self, ids: Tensor, state: list[Any] | None, t: int, *, window: int | None = None,
             sinks: int = 0, renumber: bool = False,
             ) -> tuple[Tensor, list[LinearState | KVCache | None]]:  # fmt: skip
        """Decoding one token: the tokens ids (B,) at position t, per layer the state after
        t - 1 (None at t = 0) -> logits (B, V) for position t + 1 and the states after t;
        equal to ``forward``'s row t on ids 0 .. t. Linear attention runs as an RNN
        (Katharopoulos et al. 2020, §3.4), O(H·M·Dh) per layer whatever t; softmax attention
        (the causal alignment) with an ``attnkit.KVCache`` per layer, written in place:
        full (doubling from 64 tokens), or with ``window`` a sliding window of w tokens and
        ``sinks`` first ones (StreamingLLM; then row t of ``forward`` under the mask
        (j < s) | (0 <= t - j < w)), made at t = 0; ``renumber``: the window's query and
        keys at their positions within the cache, not the text (StreamingLLM, §3.2; a
        position stage in the attention, e.g. position="rope", since the sinusoids are
        added to the embeddings at t)."""
        softmax = self.config.attention == "softmax"
        if renumber and (not window or self.config.position == "sinusoidal"):
            raise ValueError("renumber=True numbers a sliding window's tokens within the cache; "
                             "give window=w and a model with a position stage in its "
                             "attention (position='rope', 'alibi', ...)")  # fmt: skip
        if softmax and self.config.align != "causal":
            raise ValueError(f"step() decodes the causal alignment with a KVCache; "
                             f"align={self.config.align!r} takes forward()")  # fmt: skip
        states: list[Any] = [None] * len(self.layers) if state is None else list(state)
        # per layer a LinearState (linear attention) or a KVCache (softmax)
        x = self.emb(ids[:, None]) * math.sqrt(self.config.dim)  # (B, 1, D)
        if self.config.position == "sinusoidal":
            x = x + sinusoid_at(t, self.config.dim, ids.device).to(x.dtype)  # PE(t) (D,)
        x = dropped(self.drop, x)
        for i, layer in enumerate(self.layers):
            lay = cast(LMLayer, layer)
            h = lay.res1.inner(x)  # (B, 1, D)
            if softmax:
                if states[i] is None:
                    policy = (dict(window=window, sinks=sinks, renumber=renumber) if window
                              else dict(grow=True))  # fmt: skip
                    states[i] = lay.attn.new_cache(ids.shape[0], h, None if window else 64,
                                                   **policy)  # fmt: skip
                context = lay.attn.step(h, states[i])[0].context  # (B, 1, D), cache written
            else:
                context, states[i] = step_heads(lay.attn, h, states[i], t)
            x = lay.res1.merge(x, context)  # (B, 1, D)
            x, _ = lay.res2(x, lay.ffn)
        logits = F.linear(self.norm(x), self.emb.weight, self.out_bias)  # (B, 1, V)
        return logits[:, 0], states

    def extra_ff(self) -> int:
        """``xl_extra_ff(dim, heads)`` with ``match_xl`` (equal parameters), else 0."""
        return xl_extra_ff(self.config.dim, self.config.heads) if self.config.match_xl else 0

    def embed(self, ids: Tensor, positions: Tensor | None = None) -> Tensor:
        """ids (B, L) -> √D E[ids] + PE(0 .. L-1) (B, L, D) (Vaswani 2017, §3.5), or
        PE(positions) for ``positions`` (B, L) (packed documents, each from 0); without PE
        when a position stage in the attention carries the positions."""
        x = super().embed(ids)  # (B, L, D)
        if self.config.position != "sinusoidal":
            return x
        pe = sinusoids(ids.shape[1], self.config.dim, ids.device).to(x.dtype)  # (L, D)
        return x + (pe if positions is None else pe[positions])  # (B, L, D)


MODELS.register(ModelEntry("transformer-xl", TransformerXL, TransformerXLConfig, XL_PRESETS))
MODELS.register(ModelEntry("transformer-lm", TransformerLM, TransformerLMConfig, PRESETS))

__all__ = [
    "CAUSAL_ALIGNMENTS",
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
    "check_documents",
    "document_positions",
    "pack_refusal",
    "update_memory",
    "xl_extra_ff",
]
