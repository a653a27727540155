"""Transformer encoder-decoder (Vaswani et al. 2017, "Attention Is All You Need"), assembled
from attnkit's SelfAttention / CrossAttention (multi-head scaled-dot attention, §3.2):

    x = E x · √d + PE                         PE(pos, 2i) = sin(pos / 10000^(2i/d))  (§3.5)
    encoder layer:  x = x + SelfAttn(x);  x = x + FFN(x)
    decoder layer:  y = y + SelfAttn_causal(y);  y = y + CrossAttn(y, memory);  y = y + FFN(y)
    FFN(x) = max(0, x W₁ + b₁) W₂ + b₂        (eq. 2)

with a LayerNorm after each residual sum (post-norm, the paper) or before each sub-layer
(pre-norm, ``norm_first=True``). The attention weights returned are the last decoder layer's
cross-attention averaged over heads. Stepwise decoding re-runs the decoder on the prefix.

Legend: B batch, S source length, T target length, D width, H heads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..masks import causal_mask
from ..modules import CrossAttention, SelfAttention
from .base import Memory, Seq2Seq, Seq2SeqOutput, State, source_mask


@dataclass
class TransformerConfig:
    src_vocab: int
    tgt_vocab: int
    dim: int = 128
    heads: int = 4
    ff: int = 256
    enc_layers: int = 2
    dec_layers: int = 2
    dropout: float = 0.1
    norm_first: bool = True  # pre-norm; False = post-norm as in the paper
    max_len: int = 512

    def __post_init__(self) -> None:
        for name in (
            "src_vocab",
            "tgt_vocab",
            "dim",
            "heads",
            "ff",
            "enc_layers",
            "dec_layers",
            "max_len",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"TransformerConfig.{name}={getattr(self, name)}; it must be >= 1")
        if self.dim % self.heads:
            raise ValueError(
                f"TransformerConfig: heads={self.heads} does not divide dim="
                f"{self.dim}; pick heads from "
                f"{[h for h in range(1, self.dim + 1) if self.dim % h == 0]}"
            )
        if self.dim % 2:
            raise ValueError(
                f"TransformerConfig.dim={self.dim}; sinusoidal positions need an even width"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"TransformerConfig.dropout={self.dropout}; it must be in [0, 1)")


PRESETS: dict[str, dict[str, float | int | bool]] = {
    "tiny": dict(dim=16, heads=2, ff=32, enc_layers=1, dec_layers=1, dropout=0.0),
    "small": dict(dim=128, heads=4, ff=256, enc_layers=2, dec_layers=2),
    # Vaswani 2017, Table 3 "base"
    "base": dict(dim=512, heads=8, ff=2048, enc_layers=6, dec_layers=6, norm_first=False),
}


def sinusoidal_positions(length: int, dim: int) -> Tensor:
    """PE (length, dim): sin on even, cos on odd features (Vaswani 2017, §3.5)."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]  # (T, 1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim)
    pe[:, 0::2] = torch.sin(pos * freq)  # (T, D/2)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


class Sublayer(nn.Module):
    """Residual around ``fn`` with LayerNorm before (pre-norm) or after (post-norm)."""

    def __init__(self, dim: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return x + self.drop(fn(self.norm(x)))
        return self.norm(x + self.drop(fn(x)))


def feed_forward(c: TransformerConfig) -> nn.Module:
    return nn.Sequential(
        nn.Linear(c.dim, c.ff), nn.ReLU(), nn.Dropout(c.dropout), nn.Linear(c.ff, c.dim)
    )


class EncoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.attn = SelfAttention(c.dim, c.heads, dropout=c.dropout)
        self.ff = feed_forward(c)
        self.s1, self.s2 = (Sublayer(c.dim, c.dropout, c.norm_first) for _ in range(2))

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.s1(x, lambda h: self.attn(h, mask=mask, need_weights=False).context)  # (B, S, D)
        return self.s2(x, self.ff)


class DecoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.self_attn = SelfAttention(c.dim, c.heads, dropout=c.dropout)
        self.cross = CrossAttention(c.dim, c.heads, dropout=c.dropout)
        self.ff = feed_forward(c)
        self.s1, self.s2, self.s3 = (Sublayer(c.dim, c.dropout, c.norm_first) for _ in range(3))

    def forward(
        self, y: Tensor, memory: Tensor, self_mask: Tensor, src_mask: Tensor, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        y = self.s1(y, lambda h: self.self_attn(h, mask=self_mask, need_weights=False).context)
        out: dict[str, Tensor | None] = {}

        def cross(h: Tensor) -> Tensor:
            r = self.cross(h, memory, mask=src_mask, need_weights=need_weights)
            out["w"] = r.weights  # (B, H, T, S)
            return r.context

        y = self.s2(y, cross)  # (B, T, D)
        return self.s3(y, self.ff), out["w"]


class Transformer(Seq2Seq):
    name = "transformer"

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_emb = nn.Embedding(c.src_vocab, c.dim, padding_idx=0)
        self.tgt_emb = nn.Embedding(c.tgt_vocab, c.dim, padding_idx=0)
        self.register_buffer("pe", sinusoidal_positions(c.max_len, c.dim), persistent=False)
        self.enc = nn.ModuleList(EncoderLayer(c) for _ in range(c.enc_layers))
        self.dec = nn.ModuleList(DecoderLayer(c) for _ in range(c.dec_layers))
        self.enc_norm = nn.LayerNorm(c.dim) if c.norm_first else nn.Identity()
        self.dec_norm = nn.LayerNorm(c.dim) if c.norm_first else nn.Identity()
        self.out = nn.Linear(c.dim, c.tgt_vocab)
        self.drop = nn.Dropout(c.dropout)

    def embed(self, emb: nn.Embedding, ids: Tensor) -> Tensor:
        if ids.shape[1] > self.config.max_len:
            raise ValueError(
                f"sequence of {ids.shape[1]} tokens exceeds max_len="
                f"{self.config.max_len}; raise TransformerConfig.max_len"
            )
        pe: Tensor = self.pe  # type: ignore[assignment]
        x = emb(ids) * math.sqrt(self.config.dim) + pe[: ids.shape[1]]  # (B, T, D)
        return self.drop(x)

    def encode(self, src: Tensor, src_len: Tensor) -> Memory:
        mask = source_mask(src_len, src.shape[1])  # (B, 1, S)
        x = self.embed(self.src_emb, src)
        for layer in self.enc:
            x = layer(x, mask)
        return {"keys": self.enc_norm(x), "mask": mask}

    def decode(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, Tensor | None]:
        t = tgt_in.shape[1]
        self_mask = causal_mask(t, device=tgt_in.device)  # (T, T)
        y = self.embed(self.tgt_emb, tgt_in)
        w = None
        for i, layer in enumerate(self.dec):
            last = i == len(self.dec) - 1
            y, w = layer(y, memory["keys"], self_mask, memory["mask"], need_weights=last)
        weights = None if w is None else w.mean(dim=1)  # (B, T, S)
        return self.out(self.dec_norm(y)), weights  # (B, T, V)

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Seq2SeqOutput:
        logits, weights = self.decode(tgt_in, self.encode(src, src_len))
        return Seq2SeqOutput(logits, weights)

    def init_state(self, memory: Memory) -> State:
        b = memory["keys"].shape[0]
        return (torch.ones(b, 0, dtype=torch.long, device=memory["keys"].device),)

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, Tensor, State]:
        prefix = torch.cat([state[0], prev[:, None]], 1)  # (B, t)
        logits, weights = self.decode(prefix, memory)
        assert weights is not None
        return logits[:, -1], weights[:, -1], (prefix,)


__all__ = ["PRESETS", "Transformer", "TransformerConfig", "sinusoidal_positions"]
