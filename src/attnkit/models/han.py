"""Hierarchical Attention Network (Yang et al. 2016) for document classification: a word
encoder and word attention make sentence vectors, a sentence encoder and sentence attention
make the document vector, a linear layer and softmax the class (§2, eq. 1-11).

Options (``HANConfig``): ``pool`` at both levels, "attention" (HAN, eq. 5-10), "mean" and
"max" (Yang 2016, Table 2's HN-AVE and HN-MAX), or "multidim" (feature-wise source2token
attention, Shen 2018); ``encoder`` at both levels, "gru" (a bidirectional GRU, eq. 2-4, 7-8)
or "disan" (forward and backward masked multi-dimensional self-attention, Shen 2018 §4).

Legend: B documents, S sentences, T words per sentence, E embedding width, H encoder width
per direction (annotations are 2H wide), C classes (the target vocabulary).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._checks import check_ranges
from ..mechanisms.disan import DiSAEncoder
from ..mechanisms.hierarchical import (
    AttentionPool,
    FunctionPool,
    Hierarchy,
    hierarchical_pool,
    max_pool,
    mean_pool,
)
from ..mechanisms.multidim import FeaturewisePool
from .encoders import run_packed
from .registry import MODELS, ModelEntry

POOLS = ("attention", "mean", "max", "multidim")
ENCODERS = ("gru", "disan")


@dataclass
class HANConfig:
    src_vocab: int = 1
    tgt_vocab: int = 1
    emb: int = 32
    hidden: int = 32  # encoder width per direction
    attn: int = 32  # attention width A of W_w, u_w (and of the multidim score)
    pool: str = "attention"  # attention | mean | max | multidim
    encoder: str = "gru"  # gru | disan
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.pool not in POOLS:
            raise ValueError(f"pool={self.pool!r}; choose one of {POOLS}")
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder={self.encoder!r}; choose one of {ENCODERS}")
        check_ranges(self, positive=("src_vocab", "tgt_vocab", "emb", "hidden", "attn"))


PRESETS: dict[str, dict[str, object]] = {
    "tiny": {"emb": 16, "hidden": 16, "attn": 16},
    "small": {},
    "paper": {"emb": 200, "hidden": 50, "attn": 100},  # Yang 2016, §3.3
}


@dataclass
class HANOutput:
    logits: Tensor  # (B, C)
    hierarchy: Hierarchy


class BiGRU(nn.Module):
    """A bidirectional GRU over padded sequences (packed, so padding never enters a state):
    ``forward(x (N, T, Din), mask (N, T)) -> (N, T, 2H)``, zero at padded positions."""

    def __init__(self, in_dim: int, hidden: int) -> None:
        super().__init__()
        self.gru = nn.GRU(in_dim, hidden, batch_first=True, bidirectional=True)
        self.out_dim = 2 * hidden

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        lengths = mask.sum(-1).clamp(min=1)  # (N,) an empty row runs one padded step
        out, _ = run_packed(self.gru, x, lengths, x.shape[1])  # (N, T, 2H)
        return out * mask[..., None].to(out.dtype)  # (N, T, 2H)


def _encoder(kind: str, in_dim: int, hidden: int) -> nn.Module:
    return BiGRU(in_dim, hidden) if kind == "gru" else DiSAEncoder(in_dim, hidden)


def _pool(kind: str, dim: int, attn: int) -> nn.Module:
    if kind == "attention":
        return AttentionPool(dim, attn)
    if kind == "multidim":
        return FeaturewisePool(dim, attn)
    return FunctionPool(mean_pool if kind == "mean" else max_pool)


class HAN(nn.Module):
    """``forward(words (B, S, T) ids, 0 = padding) -> HANOutput``: logits (B, C) and the
    hierarchy (document, sentence vectors, word and sentence weights)."""

    family = "docs"

    def __init__(self, config: HANConfig) -> None:
        super().__init__()
        self.config = c = config
        self.embed = nn.Embedding(c.src_vocab, c.emb, padding_idx=0)
        self.word_encoder = _encoder(c.encoder, c.emb, c.hidden)
        self.word_pool = _pool(c.pool, 2 * c.hidden, c.attn)
        self.sentence_encoder = _encoder(c.encoder, 2 * c.hidden, c.hidden)
        self.sentence_pool = _pool(c.pool, 2 * c.hidden, c.attn)
        self.drop = nn.Dropout(c.dropout)
        self.out = nn.Linear(2 * c.hidden, c.tgt_vocab)  # eq. 11: p = softmax(W_c v + b_c)

    def encode_words(self, words: Tensor) -> Tensor:
        """Word annotations h_it = [→h_it; ←h_it] (eq. 1-4). words (B, S, T) -> (B, S, T, 2H)."""
        b, s, t = words.shape
        x = self.drop(self.embed(words))  # (B, S, T, E)
        h = self.word_encoder(x.reshape(b * s, t, -1), (words != 0).reshape(b * s, t))
        return h.reshape(b, s, t, -1)  # (B, S, T, 2H)

    def forward(self, words: Tensor) -> HANOutput:
        h = self.encode_words(words)  # (B, S, T, 2H)
        tree = hierarchical_pool(h, words != 0, self.word_pool, self.sentence_encoder,
                                 self.sentence_pool)  # fmt: skip
        return HANOutput(self.out(self.drop(tree.document)), tree)  # (B, C)


def sentence_peaks(weights: Tensor) -> Tensor:
    """The sentence each document's attention peaks on: argmax over S of the weights (B, S),
    or of their mean over features for feature-wise weights (B, S, D). -> (B,)"""
    w = weights.mean(-1) if weights.dim() == 3 else weights  # (B, S)
    return torch.argmax(w, dim=-1)


MODELS.register(ModelEntry("han", HAN, HANConfig, PRESETS))

__all__ = ["ENCODERS", "HAN", "HANConfig", "HANOutput", "POOLS", "PRESETS", "sentence_peaks"]
