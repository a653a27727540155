"""The attention computation: score -> alignment -> normaliser -> reduction.

    attend(query, keys, values, score=..., align=..., normaliser=..., reduce=...)

Legend: B batch, H heads, Tq queries, Tk keys, Dq/Dk/Dv query/key/value widths.
Each stage is a callable with one fixed signature (see scores.py, alignment.py,
normalisers.py, and ``Reduction`` below), so a new variant is a new small callable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import check_mask, check_qkv
from .alignment import AlignSpec
from .normalisers import Softmax, compute_dtype, softmax
from .scores import ScaledDotScore, scaled_dot_score

ScoreFn = Callable[[Tensor, Tensor], Tensor]
AlignFn = Callable[[Tensor, Tensor, "Tensor | None"], AlignSpec]
NormaliseFn = Callable[[Tensor, "Tensor | None"], Tensor]


@dataclass
class AttentionResult:
    """What one attention computation produced.

    context (..., Tq, Dv); weights (..., Tq, Tk) — or (..., Tq, Tk, Dv) for feature-wise
    attention — or None when not requested on the fused path; scores before normalisation;
    extras: what a variant adds (``position`` for local attention, ``log_prob`` of a hard
    sample, a KL term, ...).
    """

    context: Tensor
    weights: Tensor | None
    scores: Tensor | None = None
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class Reduced:
    context: Tensor
    extras: dict[str, Any] = field(default_factory=dict)


def weighted_sum(weights: Tensor, values: Tensor) -> Reduced:
    """c_i = Σ_j a_ij v_j (Bahdanau 2015, eq. 5). weights (..., Tq, Tk), values (..., Tk, Dv)
    -> context (..., Tq, Dv), computed in the weights' dtype."""
    return Reduced(weights @ values.to(weights.dtype))  # (..., Tq, Dv)


ReduceFn = Callable[[Tensor, Tensor], Reduced]


def _is_plain_sdpa(score: ScoreFn, normaliser: NormaliseFn, reduce: ReduceFn) -> bool:
    scaled = score is scaled_dot_score or (
        isinstance(score, ScaledDotScore) and score.scale is None
    )
    plain_softmax = isinstance(normaliser, Softmax) and normaliser.temperature == 1.0
    return scaled and plain_softmax and reduce is weighted_sum


def sdpa_context(query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
    """Fused softmax(qkᵀ/√d) v through ``F.scaled_dot_product_attention``; a fully masked row
    gives a zero context (SDPA alone would give NaN). Shapes as ``attend``."""
    if mask is None:
        return F.scaled_dot_product_attention(query, keys, values)
    row_ok = mask.any(dim=-1, keepdim=True)  # (..., Tq, 1)
    if bool(row_ok.all()):
        return F.scaled_dot_product_attention(query, keys, values, attn_mask=mask)
    safe = mask | ~row_ok  # a fully masked row attends everywhere, then is zeroed
    out = F.scaled_dot_product_attention(query, keys, values, attn_mask=safe)  # (..., Tq, Dv)
    return torch.where(row_ok, out, torch.zeros((), dtype=out.dtype, device=out.device))


def attend(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    *,
    score: ScoreFn = scaled_dot_score,
    align: AlignFn | None = None,
    normaliser: NormaliseFn = softmax,
    reduce: ReduceFn = weighted_sum,
    mask: Tensor | None = None,
    need_weights: bool = True,
    check_finite: bool = True,
) -> AttentionResult:
    """Attention over keys for every query.

        e = score(query, keys)                       # (..., Tq, Tk)
        m, prior = align(query, keys, mask)          # which keys, with which prior
        a = normaliser(e, m) [* prior]               # (..., Tq, Tk)
        c = reduce(a, values)                        # (..., Tq, Dv)

    query (..., Tq, Dq), keys (..., Tk, Dk), values (..., Tk, Dv); mask bool broadcastable to
    (..., Tq, Tk), True = may attend. Half-precision inputs are scored and normalised in
    float32; the context comes back in the input dtype. With ``need_weights=False`` and plain
    scaled-dot softmax attention, the fused ``F.scaled_dot_product_attention`` is used.
    """
    check_qkv(query, keys, values, finite=check_finite)
    lead = torch.broadcast_shapes(query.shape[:-2], keys.shape[:-2])
    check_mask(mask, (*lead, query.shape[-2], keys.shape[-2]))
    if align is not None and not need_weights:  # O(n·window) kernels: attnkit.local
        from .local.dispatch import fast_local

        fast = fast_local(query, keys, values, score, align, normaliser, reduce, mask)
        if fast is not None:
            return fast
    out_dtype = values.dtype
    work = compute_dtype(query.dtype)
    q_work, k_work = query.to(work), keys.to(work)  # half inputs are aligned/scored in float32
    spec = align(q_work, k_work, mask) if align is not None else AlignSpec(mask)

    if not need_weights and spec.prior is None and _is_plain_sdpa(score, normaliser, reduce):
        ctx = sdpa_context(query, keys, values, spec.mask)
        return AttentionResult(ctx, None, extras=_position(spec))

    scores = score(q_work, k_work)  # (..., Tq, Tk)
    weights = normaliser(scores, spec.mask)  # (..., Tq, Tk)
    if spec.prior is not None:
        weights = weights * spec.prior.to(weights.dtype)
    reduced = reduce(weights, values)
    return AttentionResult(
        reduced.context.to(out_dtype), weights, scores, {**_position(spec), **reduced.extras}
    )


def _position(spec: AlignSpec) -> dict[str, Any]:
    return {} if spec.position is None else {"position": spec.position}


__all__ = [
    "AlignFn",
    "AttentionResult",
    "NormaliseFn",
    "ReduceFn",
    "Reduced",
    "ScoreFn",
    "attend",
    "sdpa_context",
    "weighted_sum",
]
