"""Co-attention: a question and an image attend to each other (Lu et al. 2016, "Hierarchical
Question-Image Co-Attention for Visual Question Answering", §3.3).

    r = parallel_coattention(q, v, w_b, w_q, w_v, w_hq, w_hv, q_mask, v_mask)
    r = alternating_coattention(q, v, (w_x, w_g, w_h) * 3, q_mask, v_mask)
    r.question, r.image            # q̂ (B, D), v̂ (B, D): the attended summaries
    r.question_weights, r.image_weights   # a^q (B, T), a^v (B, N)

The paper writes features as columns (Q ∈ R^{d×T}, V ∈ R^{d×N}); here they are rows, batch
first: q (B, T, D), v (B, N, D), so ``W x`` of the paper is ``x @ Wᵀ`` below. Masks are bool,
True = may attend (a real question word, a real image position): a padded position gets exactly
zero weight, its affinities are zero, so it changes nothing of what the other side attends to.

Legend: B batch, T question words, N image positions (patches), D feature width, K hidden width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._checks import check_mask
from ..core import NormaliseFn
from ..stages.normalisers import softmax


@dataclass
class CoAttentionResult:
    """What one co-attention produced: the attended question q̂ (B, D) and image v̂ (B, D), the
    weights a^q (B, T) over question words and a^v (B, N) over image positions, and for the
    parallel form the affinity matrix C (B, T, N) (None for the alternating form, which has the
    weights of its first step, the question summary, in ``summary_weights`` (B, T) instead)."""

    question: Tensor
    image: Tensor
    question_weights: Tensor
    image_weights: Tensor
    affinity: Tensor | None = None
    summary_weights: Tensor | None = None


def _check(q: Tensor, v: Tensor, q_mask: Tensor | None, v_mask: Tensor | None) -> None:
    if q.dim() != 3 or v.dim() != 3 or q.shape[0] != v.shape[0]:
        raise ValueError(
            f"question {tuple(q.shape)} and image {tuple(v.shape)} must be (B, T, D) and "
            "(B, N, D) with the same batch size B"
        )
    check_mask(q_mask, tuple(q.shape[:2]), q.device)
    check_mask(v_mask, tuple(v.shape[:2]), v.device)


def _weighted(weights: Tensor, x: Tensor) -> Tensor:
    """Σ_i a_i x_i: weights (B, L), x (B, L, D) -> (B, D)."""
    return (weights[..., None] * x).sum(dim=1)  # (B, D)


def affinity(
    q: Tensor, v: Tensor, w_b: Tensor, q_mask: Tensor | None = None, v_mask: Tensor | None = None
) -> Tensor:
    """Lu 2016, eq. 3: C = tanh(Qᵀ W_b V), zero where either position is padded.

    q (B, T, Dq), v (B, N, Dv), w_b (Dq, Dv), masks (B, T) / (B, N) -> C (B, T, N).
    """
    c = torch.tanh(q @ w_b @ v.transpose(1, 2))  # (B, T, N)
    if q_mask is not None:
        c = c * q_mask[:, :, None]  # (B, T, N)
    if v_mask is not None:
        c = c * v_mask[:, None, :]  # (B, T, N)
    return c


def parallel_coattention(
    q: Tensor,
    v: Tensor,
    w_b: Tensor,
    w_q: Tensor,
    w_v: Tensor,
    w_hq: Tensor,
    w_hv: Tensor,
    q_mask: Tensor | None = None,
    v_mask: Tensor | None = None,
    normaliser: NormaliseFn = softmax,
) -> CoAttentionResult:
    """Parallel co-attention, Lu 2016, eq. 3-4: both sides attend at once through C.

        C   = tanh(Qᵀ W_b V)                                   (T, N)
        H^v = tanh(W_v V + (W_q Q) C),   H^q = tanh(W_q Q + (W_v V) Cᵀ)     (K, N), (K, T)
        a^v = softmax(w_hvᵀ H^v),        a^q = softmax(w_hqᵀ H^q)           (N,), (T,)
        v̂ = Σ_n a^v_n v_n,               q̂ = Σ_t a^q_t q_t

    q (B, T, D), v (B, N, D), w_b (D, D), w_q (K, D), w_v (K, D), w_hq (K,), w_hv (K,),
    masks (B, T) / (B, N), True = real -> CoAttentionResult (weights softmax over the real
    positions; padded ones exactly 0).
    """
    _check(q, v, q_mask, v_mask)
    c = affinity(q, v, w_b, q_mask, v_mask)  # (B, T, N)
    wq = q @ w_q.T  # (B, T, K)
    wv = v @ w_v.T  # (B, N, K)
    h_v = torch.tanh(wv + c.transpose(1, 2) @ wq)  # (B, N, K)
    h_q = torch.tanh(wq + c @ wv)  # (B, T, K)
    a_v = normaliser((h_v @ w_hv)[:, None, :], None if v_mask is None else v_mask[:, None, :])
    a_q = normaliser((h_q @ w_hq)[:, None, :], None if q_mask is None else q_mask[:, None, :])
    a_v, a_q = a_v[:, 0].to(v.dtype), a_q[:, 0].to(q.dtype)  # (B, N), (B, T)
    return CoAttentionResult(_weighted(a_q, q), _weighted(a_v, v), a_q, a_v, affinity=c)


def guided_attention(
    x: Tensor,
    guide: Tensor | None,
    w_x: Tensor,
    w_g: Tensor,
    w_h: Tensor,
    mask: Tensor | None = None,
    normaliser: NormaliseFn = softmax,
) -> tuple[Tensor, Tensor]:
    """One step of alternating co-attention, Lu 2016, eq. 5-6: x̂ = A(X; g).

        H   = tanh(W_x X + (W_g g) 1ᵀ)          (K, L)
        a^x = softmax(w_hxᵀ H)                  (L,)
        x̂  = Σ_i a^x_i x_i

    x (B, L, D), guide g (B, D) or None (g = 0: the first step, the question summary),
    w_x (K, D), w_g (K, D), w_h (K,), mask (B, L) -> (x̂ (B, D), a^x (B, L)).
    """
    h = x @ w_x.T  # (B, L, K)
    if guide is not None:
        h = h + (guide @ w_g.T)[:, None, :]  # (B, L, K)
    scores = (torch.tanh(h) @ w_h)[:, None, :]  # (B, 1, L)
    a = normaliser(scores, None if mask is None else mask[:, None, :])[:, 0].to(x.dtype)  # (B, L)
    return _weighted(a, x), a


Step = tuple[Tensor, Tensor, Tensor]  # (w_x (K, D), w_g (K, D), w_h (K,)) of one step


def alternating_coattention(
    q: Tensor,
    v: Tensor,
    steps: tuple[Step, Step, Step],
    q_mask: Tensor | None = None,
    v_mask: Tensor | None = None,
    normaliser: NormaliseFn = softmax,
) -> CoAttentionResult:
    """Alternating co-attention, Lu 2016, §3.3: summarise the question, attend the image with
    the summary, attend the question with the attended image (eq. 5-6 three times, each with
    its own weights ``steps[i]``):

        ŝ = A(Q; 0),   v̂ = A(V; ŝ),   q̂ = A(Q; v̂)

    q (B, T, D), v (B, N, D), masks (B, T) / (B, N), True = real -> CoAttentionResult.
    """
    _check(q, v, q_mask, v_mask)
    s, a_s = guided_attention(q, None, *steps[0], mask=q_mask, normaliser=normaliser)
    v_hat, a_v = guided_attention(v, s, *steps[1], mask=v_mask, normaliser=normaliser)
    q_hat, a_q = guided_attention(q, v_hat, *steps[2], mask=q_mask, normaliser=normaliser)
    return CoAttentionResult(q_hat, v_hat, a_q, a_v, summary_weights=a_s)


def _param(*shape: int) -> nn.Parameter:
    w = torch.empty(*shape)
    if len(shape) == 1:
        nn.init.normal_(w, std=shape[0] ** -0.5)
    else:
        nn.init.xavier_uniform_(w)
    return nn.Parameter(w)


class ParallelCoAttention(nn.Module):
    """Parallel co-attention (Lu 2016, eq. 3-4) with its parameters W_b (D, D), W_q, W_v
    (K, D), w_hq, w_hv (K,). forward(q (B, T, D), v (B, N, D), q_mask, v_mask) ->
    CoAttentionResult."""

    def __init__(self, dim: int, hidden: int, normaliser: NormaliseFn = softmax) -> None:
        super().__init__()
        self.w_b = _param(dim, dim)
        self.w_q, self.w_v = _param(hidden, dim), _param(hidden, dim)
        self.w_hq, self.w_hv = _param(hidden), _param(hidden)
        self.normaliser = normaliser

    def forward(
        self, q: Tensor, v: Tensor, q_mask: Tensor | None = None, v_mask: Tensor | None = None
    ) -> CoAttentionResult:
        return parallel_coattention(q, v, self.w_b, self.w_q, self.w_v, self.w_hq, self.w_hv,
                                    q_mask, v_mask, self.normaliser)  # fmt: skip


class AlternatingCoAttention(nn.Module):
    """Alternating co-attention (Lu 2016, eq. 5-6) with three steps' parameters (question
    summary, image, question), each W_x, W_g (K, D) and w_h (K,). forward(q (B, T, D),
    v (B, N, D), q_mask, v_mask) -> CoAttentionResult."""

    def __init__(self, dim: int, hidden: int, normaliser: NormaliseFn = softmax) -> None:
        super().__init__()
        self.w_x = nn.ParameterList([_param(hidden, dim) for _ in range(3)])
        # step 0 has no guide (g = 0), so it has no W_g
        self.w_g = nn.ParameterList([_param(hidden, dim) for _ in range(2)])
        self.w_h = nn.ParameterList([_param(hidden) for _ in range(3)])
        self.normaliser = normaliser

    def steps(self) -> tuple[Step, Step, Step]:
        """The three steps' (W_x, W_g, w_h); the first step's W_g is an unused zero."""
        zero = torch.zeros_like(self.w_x[0])
        return (
            (self.w_x[0], zero, self.w_h[0]),
            (self.w_x[1], self.w_g[0], self.w_h[1]),
            (self.w_x[2], self.w_g[1], self.w_h[2]),
        )

    def forward(
        self, q: Tensor, v: Tensor, q_mask: Tensor | None = None, v_mask: Tensor | None = None
    ) -> CoAttentionResult:
        return alternating_coattention(q, v, self.steps(), q_mask, v_mask, self.normaliser)


__all__ = [
    "AlternatingCoAttention",
    "CoAttentionResult",
    "ParallelCoAttention",
    "affinity",
    "alternating_coattention",
    "guided_attention",
    "parallel_coattention",
]
