"""Multi-dimensional (feature-wise) attention (Shen et al. 2018, DiSAN, §3.1).

Each feature of each key gets its own weight: the score is a vector per (query, key) pair,
normalised over the keys feature by feature, and the context is Σ_j P_ij ⊙ v_j.

Legend: B batch, Tq queries, Tk keys, Dq/Dk query/key widths, Dv value width (= score width),
A hidden width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_mask, check_qkv, check_width
from ..core import AttentionResult, NormaliseFn, zero_unseen
from ..stages.normalisers import compute_dtype, softmax
from .hierarchical import Pooled


def multidim_score(
    query: Tensor,
    keys: Tensor,
    w_query: Tensor,
    w_keys: Tensor,
    bias: Tensor,
    w_out: Tensor,
    b_out: Tensor,
) -> Tensor:
    """Shen 2018, eq. 7: f(x_j, q) = Wᵀ σ(W⁽¹⁾ x_j + W⁽²⁾ q + b⁽¹⁾) + b, σ = ELU.

    query (..., Tq, Dq), keys (..., Tk, Dk), w_query (A, Dq), w_keys (A, Dk), bias (A,),
    w_out (Dv, A), b_out (Dv,) -> scores (..., Tq, Tk, Dv).
    """
    wq = query @ w_query.transpose(0, 1)  # (..., Tq, A)
    wk = keys @ w_keys.transpose(0, 1) + bias  # (..., Tk, A)
    hidden = F.elu(wq[..., :, None, :] + wk[..., None, :, :])  # (..., Tq, Tk, A)
    return hidden @ w_out.transpose(0, 1) + b_out  # (..., Tq, Tk, Dv)


def featurewise_attend(
    scores: Tensor, values: Tensor, mask: Tensor | None, normaliser: NormaliseFn = softmax
) -> AttentionResult:
    """P_·jk = normalise_j(scores_·jk) for each feature k; c = Σ_j P_j ⊙ v_j.

    scores (..., Tq, Tk, Dv), values (..., Tk, Dv), mask broadcastable to (..., Tq, Tk)
    -> context (..., Tq, Dv), weights (..., Tq, Tk, Dv). Values no query may attend are
    zeroed first: a NaN there must not reach the context through a weight of 0.
    """
    if mask is not None:
        values = zero_unseen(values, mask)  # (..., Tk, Dv)
    by_feature = scores.movedim(-1, -2)  # (..., Tq, Dv, Tk)
    feat_mask = None if mask is None else mask[..., None, :]  # (..., Tq, 1, Tk)
    weights = normaliser(by_feature, feat_mask).movedim(-2, -1)  # (..., Tq, Tk, Dv)
    context = (weights * values.to(weights.dtype)[..., None, :, :]).sum(dim=-2)  # (..., Tq, Dv)
    return AttentionResult(context.to(values.dtype), weights, scores)


class MultiDimensionalAttention(nn.Module):
    """Feature-wise additive attention (Shen 2018): weights (B, Tq, Tk, Dv).

    forward(query (B, Tq, Dq), keys (B, Tk, Dk), values (B, Tk, Dv) = keys, mask)
    """

    def __init__(
        self,
        query_dim: int,
        key_dim: int | None = None,
        value_dim: int | None = None,
        hidden: int | None = None,
        normaliser: NormaliseFn = softmax,
    ) -> None:
        super().__init__()
        key_dim = query_dim if key_dim is None else key_dim
        value_dim = key_dim if value_dim is None else value_dim
        hidden = query_dim if hidden is None else hidden
        self.w_query = nn.Parameter(torch.empty(hidden, query_dim))
        self.w_keys = nn.Parameter(torch.empty(hidden, key_dim))
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.w_out = nn.Parameter(torch.empty(value_dim, hidden))
        self.b_out = nn.Parameter(torch.zeros(value_dim))
        self.normaliser = normaliser
        for w in (self.w_query, self.w_keys, self.w_out):
            nn.init.xavier_uniform_(w)

    def forward(
        self, query: Tensor, keys: Tensor, values: Tensor | None = None, mask: Tensor | None = None
    ) -> AttentionResult:
        values = keys if values is None else values
        check_qkv(query, keys, values)
        check_width("query", query.shape[-1], self.w_query.shape[1], "see query_dim")
        check_width("keys", keys.shape[-1], self.w_keys.shape[1], "see key_dim")
        check_width("values", values.shape[-1], self.w_out.shape[0], "see value_dim")
        check_mask(mask, (*query.shape[:-1], keys.shape[-2]), query.device)
        work = compute_dtype(query.dtype)
        scores = multidim_score(
            query.to(work),
            keys.to(work),
            *(p.to(work) for p in (self.w_query, self.w_keys, self.bias, self.w_out, self.b_out)),
        )  # (B, Tq, Tk, Dv)
        return featurewise_attend(scores, values, mask, self.normaliser)


def source2token_pool(
    x: Tensor, mask: Tensor, w1: Tensor, b1: Tensor, w: Tensor, b: Tensor
) -> Pooled:
    """Multi-dimensional source2token self-attention (Shen 2018, §3.3 and eq. 21 of DiSAN):
    f(x_i) = Wᵀ σ(W⁽¹⁾ x_i + b⁽¹⁾) + b (σ = ELU), a softmax over the tokens i for every
    feature k, s = Σ_i P_i ⊙ x_i: one weight per token *and feature*, summing to one over the
    allowed tokens (mask True = a real token) feature by feature.

    x (..., T, D), mask (..., T), w1 (A, D), b1 (A,), w (D, A), b (D,) -> vector (..., D),
    weights (..., T, D).
    """
    hidden = F.elu(x @ w1.transpose(0, 1) + b1)  # (..., T, A)
    scores = (hidden @ w.transpose(0, 1) + b)[..., None, :, :]  # (..., 1, T, D)
    out = featurewise_attend(scores, x, mask[..., None, :])  # context (..., 1, D)
    assert out.weights is not None
    return Pooled(out.context[..., 0, :], out.weights[..., 0, :, :])


class FeaturewisePool(nn.Module):
    """Multi-dimensional source2token pooling (Shen 2018): ``forward(x (..., T, D), mask
    (..., T)) -> Pooled`` with weights (..., T, D); the feature-wise counterpart of HAN's
    scalar attention pooling (attnkit.mechanisms.hierarchical.AttentionPool)."""

    def __init__(self, dim: int, hidden: int | None = None) -> None:
        super().__init__()
        hidden = dim if hidden is None else hidden
        self.w1 = nn.Parameter(torch.empty(hidden, dim))
        self.b1 = nn.Parameter(torch.zeros(hidden))
        self.w = nn.Parameter(torch.empty(dim, hidden))
        self.b = nn.Parameter(torch.zeros(dim))
        for p in (self.w1, self.w):
            nn.init.xavier_uniform_(p)

    def forward(self, x: Tensor, mask: Tensor) -> Pooled:
        return source2token_pool(x, mask, self.w1, self.b1, self.w, self.b)


__all__ = [
    "FeaturewisePool",
    "MultiDimensionalAttention",
    "featurewise_attend",
    "multidim_score",
    "source2token_pool",
]
