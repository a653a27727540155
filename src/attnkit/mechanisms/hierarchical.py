"""Hierarchical attention pooling (Yang et al. 2016, "Hierarchical Attention Networks for
Document Classification", HAN, §2.2): words -> sentence vectors -> a document vector.

Word attention (eq. 5-7), for the annotations h_it of the words t of sentence i:

    u_it = tanh(W_w h_it + b_w),   α_it = exp(u_itᵀ u_w) / Σ_t exp(u_itᵀ u_w),   s_i = Σ_t α_it h_it

Sentence attention (eq. 8-10) is the same form over the sentence annotations h_i:
u_i = tanh(W_s h_i + b_s), α_i = softmax_i(u_iᵀ u_s), v = Σ_i α_i h_i. The pooling of each
level is a small callable ``pool(h (..., T, D), mask (..., T)) -> Pooled``; the averaging and
max-pooling baselines of Yang 2016, Table 2 (HN-AVE, HN-MAX) are two more such callables, and
multi-dimensional (feature-wise) pooling (Shen 2018) a third (attnkit.mechanisms.multidim).

Legend: B batch (documents), S sentences, T words (or sentences) pooled over, D annotation
width, A attention width.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..stages.normalisers import masked_softmax


@dataclass
class Pooled:
    """vector (..., D); weights (..., T) (scalar attention), (..., T, D) (feature-wise), or
    None (mean and max pooling have no weights to show)."""

    vector: Tensor
    weights: Tensor | None


PoolFn = Callable[[Tensor, Tensor], Pooled]


def attention_pool(h: Tensor, mask: Tensor, w: Tensor, b: Tensor, context: Tensor) -> Pooled:
    """Yang 2016, eq. 5-7 (and 8-10): u_t = tanh(W h_t + b), α = softmax_t(u_tᵀ u_w),
    s = Σ_t α_t h_t over the allowed positions (mask True = a real word); an all-masked row
    pools to zero.

    h (..., T, D), mask (..., T), w (A, D), b (A,), context u_w (A,) -> vector (..., D),
    weights (..., T).
    """
    u = torch.tanh(h @ w.transpose(0, 1) + b)  # (..., T, A)
    scores = u @ context  # (..., T)
    alpha = masked_softmax(scores[..., None, :], mask[..., None, :])[..., 0, :]  # (..., T)
    vector = (alpha[..., None] * _real(h, mask)).sum(dim=-2)  # (..., D)
    return Pooled(vector, alpha)


def mean_pool(h: Tensor, mask: Tensor) -> Pooled:
    """Average of the allowed annotations (Yang 2016, Table 2 "HN-AVE"): s = (1/n) Σ_t h_t.
    h (..., T, D), mask (..., T) -> vector (..., D); an all-masked row pools to zero."""
    m = mask.to(h.dtype)[..., None]  # (..., T, 1)
    return Pooled(_real(h, mask).sum(-2) / m.sum(-2).clamp(min=1.0), None)


def _real(h: Tensor, mask: Tensor) -> Tensor:
    """h (..., T, D) with zeros at the masked positions: a NaN there must not reach the
    pooled vector through a weight of 0 (0·NaN = NaN)."""
    return torch.where(mask[..., None], h, torch.zeros((), dtype=h.dtype, device=h.device))


def max_pool(h: Tensor, mask: Tensor) -> Pooled:
    """Feature-wise maximum over the allowed annotations (Yang 2016, Table 2 "HN-MAX"):
    s_d = max_t h_td. h (..., T, D), mask (..., T) -> vector (..., D); all-masked rows -> 0."""
    lowest = torch.finfo(h.dtype).min
    top = h.masked_fill(~mask[..., None], lowest).amax(dim=-2)  # (..., D)
    return Pooled(torch.where(mask.any(-1, keepdim=True), top, torch.zeros_like(top)), None)


class AttentionPool(nn.Module):
    """The parameters W (A, D), b (A,) and the context vector u (A,) of one level of HAN
    attention (Yang 2016, eq. 5-7); ``forward(h (..., T, D), mask (..., T)) -> Pooled``."""

    def __init__(self, dim: int, hidden: int | None = None) -> None:
        super().__init__()
        hidden = dim if hidden is None else hidden
        self.w = nn.Parameter(torch.empty(hidden, dim))
        self.b = nn.Parameter(torch.zeros(hidden))
        self.context = nn.Parameter(torch.empty(hidden))
        nn.init.xavier_uniform_(self.w)
        nn.init.normal_(self.context, std=hidden**-0.5)  # "randomly initialized" (§2.2)

    def forward(self, h: Tensor, mask: Tensor) -> Pooled:
        return attention_pool(h, mask, self.w, self.b, self.context)


class FunctionPool(nn.Module):
    """A parameter-free pooling callable (``mean_pool``, ``max_pool``) as a module."""

    def __init__(self, fn: PoolFn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, h: Tensor, mask: Tensor) -> Pooled:
        return self.fn(h, mask)


@dataclass
class Hierarchy:
    """What hierarchical pooling produced: the document vector (B, D'), the sentence vectors
    (B, S, D), and the weights of both levels (None for mean/max pooling)."""

    document: Tensor
    sentences: Tensor
    word_weights: Tensor | None  # (B, S, T) or (B, S, T, D)
    sentence_weights: Tensor | None  # (B, S) or (B, S, D')


def hierarchical_pool(
    words: Tensor,
    word_mask: Tensor,
    word_pool: PoolFn,
    sentence_encoder: Callable[[Tensor, Tensor], Tensor],
    sentence_pool: PoolFn,
) -> Hierarchy:
    """HAN's two levels over already-encoded words (Yang 2016, §2.2): pool the words of each
    sentence into s_i, encode the sentence sequence into h_i, pool the h_i into v.

    words (B, S, T, D) word annotations h_it, word_mask (B, S, T) (a sentence with no word is
    padding), sentence_encoder(s (B, S, D), sentence_mask (B, S)) -> (B, S, D') ->
    ``Hierarchy`` with document (B, D').
    """
    by_word = word_pool(words, word_mask)  # vector (B, S, D)
    sentence_mask = word_mask.any(dim=-1)  # (B, S)
    encoded = sentence_encoder(by_word.vector, sentence_mask)  # (B, S, D')
    by_sentence = sentence_pool(encoded, sentence_mask)  # vector (B, D')
    return Hierarchy(by_sentence.vector, by_word.vector, by_word.weights, by_sentence.weights)


__all__ = [
    "AttentionPool",
    "FunctionPool",
    "Hierarchy",
    "PoolFn",
    "Pooled",
    "attention_pool",
    "hierarchical_pool",
    "max_pool",
    "mean_pool",
]
