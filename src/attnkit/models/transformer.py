"""The Transformer encoder-decoder (Vaswani et al. 2017, "Attention Is All You Need"), built
from attnkit's SelfAttention / CrossAttention (multi-head scaled dot-product attention,
eq. 1 and §3.2.2) with CausalAlignment for the decoder's self-attention.

    x_0 = √d · E[y] + PE,  PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)  (§3.5)
    post-norm (paper):  x = LayerNorm(x + Dropout(Sublayer(x)))                           (§5.4)
    pre-norm:           x = x + Dropout(Sublayer(LayerNorm(x)))   (+ a final LayerNorm)
    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2                                                (eq. 2)
    logits = x_L W_out, with W_out = E_tgt (tied, §3.4) or its own matrix

Positions: ``position="sinusoidal"`` (default, the paper's §3.5: PE added to the embeddings)
or a position stage of ``attnkit.stages.position`` by registry name (learned, shaw, t5, alibi, rope,
xl) in every self-attention module, per head, with no PE added to the embeddings (the
cross-attention sees no positions); docs/position.md.

Attention scores: ``score="scaled_dot"`` (default, the paper's eq. 1: qᵀk / √d_k) or
``score="dot"`` (the unscaled qᵀk, for the √d_k ablation of §3.2.1), in every attention
module, with d_k = dim / heads.

Teacher forcing (``forward``) decodes the whole target in one parallel pass; ``step`` decodes
one position, with a cache of each layer's projected keys and values: the encoder memory
projected once per sentence, the prefix one new row per step (exact: equals ``forward``).

``kv_heads``: every attention module's keys and values in Hkv heads shared by groups of
H / Hkv query heads (grouped-query attention, Ainslie et al. 2023; 1: multi-query, Shazeer
2019): the cached keys and values below have Hkv heads where they say H.

Legend: B batch, S source length, T target length, D model width, H heads, L layers,
V target vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_ranges
from ..grouped import check_kv_heads
from ..kv_cache import KVCache
from ..modules import CrossAttention, SelfAttention, check_heads
from ..registry import build_position, canonical, names
from ..stages.alignment import CausalAlignment
from ..stages.position import Position
from ..stages.scores import DotScore, ScaledDotScore, Score
from .base import Memory, Seq2Seq, Seq2SeqOutput, State, dropped, source_mask
from .registry import MODELS, ModelEntry

SHARE = ("none", "output", "all")
SCORES = ("scaled_dot", "dot")


@dataclass
class TransformerConfig:
    src_vocab: int
    tgt_vocab: int
    dim: int = 128  # d_model
    heads: int = 4
    enc_layers: int = 2
    dec_layers: int = 2
    ff: int = 512  # d_ff
    dropout: float = 0.1  # residual, embedding and attention-weight dropout (P_drop)
    norm: str = "post"  # post (paper) | pre
    share: str = "output"  # none | output (tie E_tgt and W_out) | all (also E_src; same vocab)
    score: str = "scaled_dot"  # scaled_dot (eq. 1, qᵀk/√d_k) | dot (unscaled qᵀk, an ablation)
    position: str = "sinusoidal"  # sinusoidal (§3.5) | learned | shaw | t5 | alibi | rope | xl
    max_len: int = 512  # position="learned": the most positions a sequence may have
    kv_heads: int | None = None  # key/value heads (grouped-query attention); None: heads

    def __post_init__(self) -> None:
        check_ranges(
            self,
            positive=("src_vocab", "tgt_vocab", "dim", "enc_layers", "dec_layers", "ff", "max_len"),
        )
        check_heads(self.dim, self.heads)
        check_kv_heads(self.heads, self.kv_heads)
        if self.dim % 2:
            raise ValueError(f"TransformerConfig.dim={self.dim}; sinusoids need an even width")
        if self.norm not in ("post", "pre"):
            raise ValueError(f"TransformerConfig.norm={self.norm!r}; choose 'post' or 'pre'")
        if self.share not in SHARE:
            raise ValueError(f"TransformerConfig.share={self.share!r}; choose one of {SHARE}")
        if self.score not in SCORES:
            raise ValueError(
                f"TransformerConfig.score={self.score!r}; choose one of {SCORES} (qᵀk/√d_k or qᵀk)"
            )
        if self.position != "sinusoidal":
            try:
                self.position = canonical("position", self.position)
            except ValueError:
                raise ValueError(
                    f"TransformerConfig.position={self.position!r}; choose 'sinusoidal' (the "
                    f"paper's) or a position stage: {', '.join(names('position'))}"
                ) from None
            if self.position == "rope" and (self.dim // self.heads) % 2:
                raise ValueError(
                    f"position='rope' rotates pairs: head width dim/heads = "
                    f"{self.dim // self.heads} is odd; pick dim and heads with an even ratio"
                )
        if self.share == "all" and self.src_vocab != self.tgt_vocab:
            raise ValueError(
                f"share='all' needs one joint vocabulary, but src_vocab={self.src_vocab} != "
                f"tgt_vocab={self.tgt_vocab}; use share='output' or 'none'"
            )


# Named presets (vocabulary sizes are filled in from the data).
PRESETS: dict[str, dict[str, float | int | str]] = {
    "tiny": dict(dim=32, heads=2, enc_layers=1, dec_layers=1, ff=64, dropout=0.0),
    "small": dict(dim=64, heads=4, enc_layers=2, dec_layers=2, ff=256, dropout=0.1),
    "base": dict(dim=256, heads=4, enc_layers=3, dec_layers=3, ff=1024, dropout=0.1),
    # Vaswani 2017, Table 3 "base": d_model 512, 8 heads, N = 6, d_ff 2048, P_drop 0.1
    "paper": dict(dim=512, heads=8, enc_layers=6, dec_layers=6, ff=2048, dropout=0.1),
}


def sinusoids(length: int, dim: int, device: torch.device | None = None) -> Tensor:
    """Vaswani 2017, §3.5: PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(...).
    -> (length, dim)."""
    pos = torch.arange(length, device=device, dtype=torch.float32)[:, None]  # (T, 1)
    inv = torch.exp(
        torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim)
    )  # (D/2,)
    pe = torch.zeros(length, dim, device=device)
    pe[:, 0::2] = torch.sin(pos * inv)  # (T, D/2)
    pe[:, 1::2] = torch.cos(pos * inv)  # (T, D/2)
    return pe  # (T, D)


def make_score(c: TransformerConfig) -> Score:
    """A fresh score module of ``c.score`` for one attention module (per head, width
    dim / heads): ScaledDotScore() (qᵀk / √d_k) or DotScore() (qᵀk)."""
    return ScaledDotScore() if c.score == "scaled_dot" else DotScore()


def make_position(c: TransformerConfig, causal: bool) -> Position | None:
    """A fresh position stage for one self-attention module (per head, width dim / heads), or
    None with ``position="sinusoidal"`` (the embeddings carry PE)."""
    if c.position == "sinusoidal":
        return None
    return build_position(c.position, c.heads, c.dim // c.heads, max_len=c.max_len, causal=causal)


class Residual(nn.Module):
    """One sublayer with its residual connection, post-norm or pre-norm (see module doc)."""

    def __init__(self, dim: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.drop = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, sublayer) -> tuple[Tensor, Tensor | None]:
        out, weights = sublayer(self.inner(x))  # (B, T, D)
        return self.merge(x, out), weights

    def inner(self, x: Tensor) -> Tensor:
        """What the sublayer sees: LayerNorm(x) (pre-norm) or x (post-norm)."""
        return self.norm(x) if self.pre_norm else x

    def merge(self, x: Tensor, out: Tensor) -> Tensor:
        x = x + dropped(self.drop, out)
        return x if self.pre_norm else self.norm(x)


class FeedForward(nn.Module):
    """Vaswani 2017, eq. 2: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

    def __init__(self, dim: int, ff: int, dropout: float) -> None:
        super().__init__()
        self.w1, self.w2, self.drop = nn.Linear(dim, ff), nn.Linear(ff, dim), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> tuple[Tensor, None]:
        return self.w2(dropped(self.drop, F.relu(self.w1(x)))), None  # (B, T, D)


class EncoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        pre = c.norm == "pre"
        self.attn = SelfAttention(c.dim, c.heads, score=make_score(c), dropout=c.dropout,
                                  position=make_position(c, causal=False),
                                  kv_heads=c.kv_heads)  # fmt: skip
        self.ffn = FeedForward(c.dim, c.ff, c.dropout)
        self.res1, self.res2 = Residual(c.dim, c.dropout, pre), Residual(c.dim, c.dropout, pre)

    def forward(
        self, x: Tensor, mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, S, D), mask (B, 1, S) -> x (B, S, D), self-attention weights (B, H, S, S)
        when ``need_weights`` (a viewer asks; training and decoding never do), else None."""

        def attend(h: Tensor) -> tuple[Tensor, Tensor | None]:
            r = self.attn(h, mask=mask, need_weights=need_weights)
            return r.context, r.weights  # (B, S, D), (B, H, S, S) | None

        x, weights = self.res1(x, attend)
        x, _ = self.res2(x, self.ffn)
        return x, weights  # (B, S, D), (B, H, S, S) | None


class DecoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        pre = c.norm == "pre"
        self.self_attn = SelfAttention(
            c.dim, c.heads, score=make_score(c), align=CausalAlignment(), dropout=c.dropout,
            position=make_position(c, causal=True), kv_heads=c.kv_heads,
        )  # fmt: skip
        self.cross_attn = CrossAttention(c.dim, c.heads, score=make_score(c), dropout=c.dropout,
                                         kv_heads=c.kv_heads)  # fmt: skip
        self.ffn = FeedForward(c.dim, c.ff, c.dropout)
        self.res = nn.ModuleList(Residual(c.dim, c.dropout, pre) for _ in range(3))

    def forward(
        self,
        y: Tensor,
        memory_kv: tuple[Tensor, Tensor],
        mask: Tensor,
        need_self_weights: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """y (B, T, D), memory_kv: the encoder memory projected by this layer's
        cross-attention (``cross_attn.project_keys``, (B, H, S, Dh) each), mask (B, 1, S)
        -> y (B, T, D), cross-attention weights (B, H, T, S), causal self-attention weights
        (B, H, T, T) when ``need_self_weights`` (a viewer asks; training and decoding never
        do), else None."""

        def attend_self(h: Tensor) -> tuple[Tensor, Tensor | None]:
            r = self.self_attn(h, need_weights=need_self_weights)
            return r.context, r.weights  # (B, T, D), (B, H, T, T) | None

        y, self_weights = self.res[0](y, attend_self)
        y, weights = self.attend_memory(y, memory_kv, mask)
        assert weights is not None
        return y, weights, self_weights

    def step(
        self, y: Tensor, cache: KVCache, memory_kv: tuple[Tensor, Tensor],
        mask: Tensor, need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None, KVCache]:  # fmt: skip
        """Incremental decoding of position t for N = B·K rows, K hypotheses per sentence
        (rows b·K .. b·K+K-1 decode sentence b; K = 1 outside beam search): y (N, 1, D);
        cache: the self-attention's projected keys and values of positions < t, an
        ``attnkit.KVCache`` of N rows (written in place); memory_kv: the encoder memory of
        the B sentences projected by the cross-attention once per sentence, (B, Hkv, S, Dh)
        each, mask (B, 1, S) -> y (N, 1, D),
        cross-attention weights (B, H, K, S) (None unless ``need_weights``), the cache
        holding t + 1 positions. A sentence's K hypotheses are K queries of its one memory (no
        copy per hypothesis). Equals row t of ``forward`` on the whole prefix."""
        res = cast(Residual, self.res[0])
        result, _ = self.self_attn.step(res.inner(y), cache)  # (N, 1, D); cache written
        y = res.merge(y, result.context)  # (N, 1, D)
        per_sentence = y.view(mask.shape[0], -1, y.shape[-1])  # (B, K, D)
        out, weights = self.attend_memory(per_sentence, memory_kv, mask, need_weights)
        return out.view(y.shape), weights, cache  # (N, 1, D), (B, H, K, S) | None, ...

    def attend_memory(
        self, y: Tensor, memory_kv: tuple[Tensor, Tensor], mask: Tensor,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """The cross-attention (over the projected memory) and feed-forward sublayers:
        y (B, T, D) -> (B, T, D), weights (B, H, T, S) (None unless ``need_weights``)."""

        def cross(h: Tensor) -> tuple[Tensor, Tensor | None]:
            r = self.cross_attn.attend_projected(h, *memory_kv, mask=mask,
                                                 need_weights=need_weights)  # fmt: skip
            return r.context, r.weights  # (B, T, D), (B, H, T, S) | None

        y, weights = self.res[1](y, cross)
        y, _ = self.res[2](y, self.ffn)
        return y, weights


class Transformer(Seq2Seq):
    name = "transformer"

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.tgt_emb = nn.Embedding(c.tgt_vocab, c.dim, padding_idx=0)
        # share="all": one table for both sides, registered once (checkpoints stay flat)
        self.src_emb = None if c.share == "all" else nn.Embedding(c.src_vocab, c.dim, padding_idx=0)
        for emb in (self.src_emb, self.tgt_emb):
            if emb is not None:
                nn.init.normal_(emb.weight, std=c.dim**-0.5)
        self.enc = nn.ModuleList(EncoderLayer(c) for _ in range(c.enc_layers))
        self.dec = nn.ModuleList(DecoderLayer(c) for _ in range(c.dec_layers))
        pre = c.norm == "pre"
        self.enc_norm = nn.LayerNorm(c.dim) if pre else nn.Identity()
        self.dec_norm = nn.LayerNorm(c.dim) if pre else nn.Identity()
        # tied output: logits = x E_tgtᵀ + b (no second copy of E, so checkpoints stay flat)
        self.out = None if c.share != "none" else nn.Linear(c.dim, c.tgt_vocab, bias=False)
        self.out_bias = nn.Parameter(torch.zeros(c.tgt_vocab))
        self.drop = nn.Dropout(c.dropout)

    def embed(self, emb: nn.Embedding, ids: Tensor) -> Tensor:
        """ids (B, T) -> (B, T, D): sqrt(D) E[ids] + PE (§3.4, §3.5); a decoding step adds
        its one row with ``position``. No PE when a position stage is in the attention."""
        x = emb(ids) * math.sqrt(self.config.dim)  # (B, T, D)
        if self.config.position != "sinusoidal":
            return dropped(self.drop, x)
        pe = sinusoids(ids.shape[1], self.config.dim, ids.device)  # (T, D)
        return dropped(self.drop, x + pe.to(x.dtype))

    def encode(self, src: Tensor, src_len: Tensor) -> Memory:
        return self.run_encoder(src, src_len)[0]

    def run_encoder(
        self, src: Tensor, src_len: Tensor, need_weights: bool = False
    ) -> tuple[Memory, list[Tensor | None]]:
        """The encoder, and each layer's self-attention weights (B, H, S, S) when
        ``need_weights`` (else L Nones). The memory holds the encoder output "memory"
        (B, S, D), its "mask" (B, 1, S), and for each decoder layer i the output projected by
        that layer's cross-attention, "cross_k{i}" and "cross_v{i}" (B, H, S, Dh): projected
        once per sentence, read by the teacher-forced pass and by every decoding step."""
        mask = source_mask(src_len, src.shape[1])  # (B, 1, S)
        x = self.embed(self.tgt_emb if self.src_emb is None else self.src_emb, src)  # (B, S, D)
        weights = []
        for layer in self.enc:
            x, w = layer(x, mask, need_weights)  # (B, S, D), (B, H, S, S) | None
            weights.append(w)
        memory = {"memory": self.enc_norm(x), "mask": mask}  # (B, S, D), (B, 1, S)
        for i, layer in enumerate(self.dec):  # each decoder layer's keys/values, projected once
            k, v = cast(DecoderLayer, layer).cross_attn.project_keys(memory["memory"])
            # contiguous once here, not copied by every step's matrix products
            memory[f"cross_k{i}"], memory[f"cross_v{i}"] = k.contiguous(), v.contiguous()
        return memory, weights

    def decode(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, Tensor]:
        """tgt_in (B, T) -> logits (B, T, V), cross-attention weights (L, B, H, T, S)."""
        logits, cross, _ = self.run_decoder(tgt_in, memory)
        return logits, cross  # (B, T, V), (L, B, H, T, S)

    def run_decoder(
        self, tgt_in: Tensor, memory: Memory, need_self_weights: bool = False
    ) -> tuple[Tensor, Tensor, list[Tensor | None]]:
        """tgt_in (B, T) -> logits (B, T, V), cross-attention weights (L, B, H, T, S), and
        each layer's causal self-attention weights (B, H, T, T) when ``need_self_weights``
        (else L Nones)."""
        y = self.embed(self.tgt_emb, tgt_in)  # (B, T, D)
        cross, selfs = [], []
        for i, layer in enumerate(self.dec):
            kv = memory[f"cross_k{i}"], memory[f"cross_v{i}"]  # (B, H, S, Dh) each
            y, w, s = layer(y, kv, memory["mask"], need_self_weights)
            cross.append(w)  # (B, H, T, S)
            selfs.append(s)  # (B, H, T, T) | None
        y = self.dec_norm(y)
        w_out = self.tgt_emb.weight if self.out is None else self.out.weight  # (V, D)
        return F.linear(y, w_out, self.out_bias), torch.stack(cross), selfs  # (B, T, V), ...

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Seq2SeqOutput:
        """Teacher forcing in one parallel pass; weights: last layer's cross-attention averaged
        over heads (B, T, S)."""
        logits, weights = self.decode(tgt_in, self.encode(src, src_len))
        return Seq2SeqOutput(logits, weights[-1].mean(dim=1))  # (B, T, V), (B, T, S)

    def cross_attention(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Tensor:
        """Every layer's per-head cross-attention for a teacher-forced target (for a viewer):
        src (B, S), src_len (B,), tgt_in (B, T) -> (B, L, H, T, S); ``[0]`` is (L, H, T, S)."""
        _, weights = self.decode(tgt_in, self.encode(src, src_len))  # (L, B, H, T, S)
        return weights.transpose(0, 1)  # (B, L, H, T, S)

    def attention_maps(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """EVERY attention of a teacher-forced pass, per layer and head (for a viewer; the only
        path that computes the self-attention weights, which training and decoding skip):
        src (B, S), src_len (B,), tgt_in (B, T) ->

            "enc-self"  encoder self-attention            (B, L_enc, H, S, S)
            "dec-self"  decoder causal self-attention     (B, L_dec, H, T, T)  zero above the
                        diagonal; row/column t is the position fed tgt_in[:, t]
            "cross"     decoder-encoder attention         (B, L_dec, H, T, S)  = cross_attention

        Every row sums to one over the keys it may see (padded source keys get zero)."""
        memory, enc = self.run_encoder(src, src_len, need_weights=True)
        _, cross, dec = self.run_decoder(tgt_in, memory, need_self_weights=True)
        return {
            "enc-self": torch.stack(cast(list[Tensor], enc), dim=1),  # (B, L_enc, H, S, S)
            "dec-self": torch.stack(cast(list[Tensor], dec), dim=1),  # (B, L_dec, H, T, T)
            "cross": cross.transpose(0, 1),  # (B, L_dec, H, T, S)
        }

    def init_state(self, memory: Memory) -> State:
        """The decoding cache: per decoder layer an ``attnkit.KVCache`` of the
        self-attention's projected keys and values, preallocated for 2S + 10 tokens (the
        default decoding length) and doubling past them. (The memory's projections are in
        ``memory``, made once by ``encode``.)"""
        m = memory["memory"]  # (B, S, D)
        capacity = 2 * m.shape[1] + 10
        caches = tuple(
            cast(DecoderLayer, layer).self_attn.new_cache(m.shape[0], m, capacity, grow=True)
            for layer in self.dec
        )  # L caches; beam search selects their rows (KVCache.index_select)
        return cast(State, caches)

    def beam_memory(self, memory: Memory, beam: int) -> Memory:
        """Beam search reads the memory of B sentences unrepeated: ``step`` takes a sentence's
        K hypotheses as K queries of it."""
        return memory

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, Tensor, State]:
        """Incremental decoding with a cache of projected keys and values: step t projects
        one new row per layer, never the prefix or the memory again (``encode`` projected
        it). prev (N,) with N = B·K, K hypotheses per sentence of the memory's B (K = 1
        outside beam search) -> logits (N, V), weights (N, S) (last layer's
        cross-attention averaged over heads; the other layers compute none); state: L
        ``KVCache`` of N rows holding t positions -> t + 1 (written in place)."""
        caches = cast(tuple[KVCache, ...], state)
        t = caches[0].length
        mask = memory["mask"]  # (B, 1, S)
        if prev.dim() != 1 or prev.shape[0] % mask.shape[0]:
            raise ValueError(
                f"prev {tuple(prev.shape)}: step takes (N,) tokens, N a multiple of the "
                f"memory's {mask.shape[0]} sentences (K hypotheses each, see beam_memory)"
            )
        y = self.tgt_emb(prev)[:, None] * math.sqrt(self.config.dim)  # (N, 1, D)
        if self.config.position == "sinusoidal":  # else the self-attention's stage sees t
            y = y + self.position(t, y)  # (N, 1, D)
        y = dropped(self.drop, y)
        weights = None
        last = len(self.dec) - 1
        for i, layer in enumerate(self.dec):
            kv = memory[f"cross_k{i}"], memory[f"cross_v{i}"]  # (B, Hkv, S, Dh) each
            y, w, _ = cast(DecoderLayer, layer).step(y, caches[i], kv, mask, i == last)
            weights = w if i == last else weights  # (B, H, K, S)
        y = self.dec_norm(y)  # (N, 1, D)
        w_out = self.tgt_emb.weight if self.out is None else self.out.weight  # (V, D)
        logits = F.linear(y[:, 0], w_out, self.out_bias)  # (N, V)
        assert weights is not None
        averaged = weights.mean(dim=1).reshape(prev.shape[0], -1)  # (N, S)
        return logits, averaged, state

    def position(self, t: int, like: Tensor) -> Tensor:
        """PE row t, (D,) in ``like``'s dtype, from a table kept between decoding steps
        (the rows of ``sinusoids``, made again only when t outgrows it)."""
        table = self.__dict__.get("_positions")
        if table is None or table.shape[0] <= t or table.device != like.device:
            table = sinusoids(max(64, 2 * t + 2), self.config.dim, like.device)  # (T, D)
            self.__dict__["_positions"] = table
        return table[t].to(like.dtype)  # (D,)


MODELS.register(ModelEntry("transformer", Transformer, TransformerConfig, PRESETS))

__all__ = ["PRESETS", "Transformer", "TransformerConfig", "sinusoids"]
