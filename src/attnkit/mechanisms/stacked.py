"""Stacked attention: a question vector attends over image regions, several times (Yang, He,
Gao, Deng & Smola 2016, "Stacked Attention Networks for Image Question Answering", CVPR, §3.3).

    r = stacked_attention(u, v, scores, mask)      # one score callable per hop
    r.query                 # u^K (B, D): the refined query after K hops
    r.weights               # p^1 … p^K (B, K, N): each hop's weights over the regions

The paper writes the regions as columns (v_I ∈ R^{d×m}); here they are rows, batch first:
v (B, N, D). A hop's attention is the additive score followed by a normaliser, so a hop is
``normaliser(score(u, v), mask)`` with attnkit's own stages (``AdditiveScore``, ``softmax``).
Masks are bool, True = may attend (a real region): a masked region gets exactly zero weight.

Legend: B batch, N image regions, D feature width, K hops, A hidden width of the score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._checks import check_mask
from ..core import NormaliseFn, ScoreFn
from ..stages.normalisers import softmax
from ..stages.scores import AdditiveScore


@dataclass
class StackedResult:
    """What K hops produced: the refined query u^K (B, D) and each hop's weights over the
    regions p^k (B, K, N), hop 1 first."""

    query: Tensor
    weights: Tensor


def stacked_attention(
    u: Tensor,
    v: Tensor,
    scores: Sequence[ScoreFn],
    mask: Tensor | None = None,
    normaliser: NormaliseFn = softmax,
) -> StackedResult:
    """K hops of stacked attention (Yang 2016, §3.3), hop k with its own score:

        h_A^k = tanh(W_{I,A}^k v_I ⊕ (W_{Q,A}^k u^{k-1} + b_A^k))     (A, N)
        p^k   = softmax(W_P^k h_A^k + b_P^k)                           (N,)
        ṽ^k   = Σ_i p^k_i v_i,       u^k = ṽ^k + u^{k-1}               (D,)

    with ``scores[k](u, v)`` the additive score W_P tanh(W_Q u + W_I v + b_A) (the scalar b_P
    is left out: a constant added to every region's score leaves the softmax unchanged).

    u (B, D) the question vector u⁰, v (B, N, D) the regions, one score callable
    ``(query (B, 1, D), keys (B, N, D)) -> (B, 1, N)`` per hop, mask (B, N) True = real
    -> StackedResult(u^K (B, D), weights (B, K, N)).
    """
    if u.dim() != 2 or v.dim() != 3 or u.shape[0] != v.shape[0] or u.shape[1] != v.shape[2]:
        raise ValueError(
            f"query {tuple(u.shape)} and regions {tuple(v.shape)} must be (B, D) and (B, N, D) "
            "with the same B and D (u^k = ṽ^k + u^(k-1) adds them)"
        )
    if not scores:
        raise ValueError("stacked_attention needs one score per hop; pass at least one")
    check_mask(mask, tuple(v.shape[:2]), v.device)
    row_mask = None if mask is None else mask[:, None, :]  # (B, 1, N)
    hops = []
    for score in scores:
        e = score(u[:, None, :], v)  # (B, 1, N)
        p = normaliser(e, row_mask).to(v.dtype)  # (B, 1, N)
        u = (p @ v)[:, 0] + u  # ṽ^k + u^{k-1}: (B, 1, N) @ (B, N, D) -> (B, D)
        hops.append(p[:, 0])  # (B, N)
    return StackedResult(u, torch.stack(hops, dim=1))  # (B, D), (B, K, N)


class StackedAttention(nn.Module):
    """Stacked attention (Yang 2016) with ``hops`` additive scores, each with its own
    W_{Q,A}, W_{I,A} (A, D), b_A (A,) and W_P (A,). forward(u (B, D), v (B, N, D), mask)
    -> StackedResult."""

    def __init__(
        self, dim: int, hidden: int, hops: int = 2, normaliser: NormaliseFn = softmax
    ) -> None:
        super().__init__()
        if hops < 1:
            raise ValueError(f"StackedAttention hops={hops}; pass hops >= 1 (the paper uses 2)")
        self.scores = nn.ModuleList(
            [AdditiveScore(dim, dim, hidden, bias=True) for _ in range(hops)]
        )
        self.normaliser = normaliser

    def forward(self, u: Tensor, v: Tensor, mask: Tensor | None = None) -> StackedResult:
        return stacked_attention(u, v, list(self.scores), mask, self.normaliser)


__all__ = ["StackedAttention", "StackedResult", "stacked_attention"]
