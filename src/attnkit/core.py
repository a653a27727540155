"""The attention computation: score -> alignment -> normaliser -> reduction.

    attend(query, keys, values, score=..., align=..., normaliser=..., reduce=...)

Legend: B batch, H heads, Tq queries, Tk keys, Dq/Dk/Dv query/key/value widths.
Each stage is a callable with one fixed signature (see scores.py, alignment.py,
normalisers.py, reduction.py), so a new variant is a new small callable. What a stage can do
fast it declares itself (capabilities.py); ``attnkit.local`` holds the O(n·window) kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import check_mask, check_positions, check_qkv
from .alignment import AlignSpec
from .capabilities import is_plain_sdpa
from .local.dispatch import fast_local
from .normalisers import compute_dtype, softmax
from .reduction import Reduced, ReduceFn, weighted_sum
from .scores import scaled_dot_score

ScoreFn = Callable[[Tensor, Tensor], Tensor]
# align(query, keys, mask) or align(query, keys, mask, positions): positions are passed only
# when the caller gives them, so a three-argument alignment keeps working
AlignFn = Callable[..., AlignSpec]
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
    positions: Tensor | None = None,
    need_weights: bool = True,
    check_finite: bool = True,
) -> AttentionResult:
    """Attention over keys for every query.

        e = score(query, keys)                       # (..., Tq, Tk)
        m, prior = align(query, keys, mask, positions)   # which keys, with which prior
        a = normaliser(e, m) [* prior]               # (..., Tq, Tk)
        c = reduce(a, values)                        # (..., Tq, Dv)

    query (..., Tq, Dq), keys (..., Tk, Dk), values (..., Tk, Dv); mask bool broadcastable to
    (..., Tq, Tk), True = may attend; positions (..., Tq), integer or real, where each query
    stands in its sequence (None: 0 .. Tq-1): an incremental decoder passes its step t, so
    causal, sliding and local-m alignments give it row t of the full pass. Half-precision
    inputs are scored and normalised in float32; the context comes back in the input dtype.
    With ``need_weights=False`` and plain
    scaled-dot softmax attention, the fused ``F.scaled_dot_product_attention`` is used, and
    local alignments go to the O(n·window) kernels of ``attnkit.local`` when their stages
    declare they can (``attnkit.capabilities``).
    """
    check_qkv(query, keys, values, finite=check_finite)
    lead = torch.broadcast_shapes(query.shape[:-2], keys.shape[:-2])
    check_mask(mask, (*lead, query.shape[-2], keys.shape[-2]))
    check_positions(positions, (*lead, query.shape[-2]))
    work = compute_dtype(query.dtype)
    q_work, k_work = query.to(work), keys.to(work)  # half inputs are aligned/scored in float32
    if align is not None and not need_weights:  # O(n·window) kernels: attnkit.local
        fast = fast_local(
            query, keys, values, score, align, normaliser, reduce, mask, positions,
            work=(q_work, k_work),
        )  # fmt: skip
        if fast is not None:
            return _finite(AttentionResult(fast.context, None, extras=fast.extras), check_finite)
    if align is None:
        spec = AlignSpec(mask)
    elif positions is None:
        spec = align(q_work, k_work, mask)
    else:
        spec = align(q_work, k_work, mask, positions)

    if not need_weights and spec.prior is None and is_plain_sdpa(score, normaliser, reduce):
        ctx = sdpa_context(query, keys, values, spec.mask)
        return _finite(AttentionResult(ctx, None, extras=_position(spec)), check_finite)
    result = reference_attention(q_work, k_work, values, spec, score, normaliser, reduce)
    return _finite(result, check_finite)


def _finite(result: AttentionResult, check: bool) -> AttentionResult:
    """Finite inputs whose scores overflow (|qᵀk| beyond the dtype's range) would give NaN:
    a clear error instead (the inputs were checked finite before)."""
    if check and not bool(torch.isfinite(result.context).all()):
        raise ValueError(
            "attention overflowed: the scores of these finite inputs exceed the range of "
            f"{result.context.dtype} (inf or NaN weights); scale the queries/keys down, use a "
            "scaled or cosine score, or compute in float64"
        )
    return result


def reference_attention(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    spec: AlignSpec,
    score: ScoreFn,
    normaliser: NormaliseFn,
    reduce: ReduceFn,
) -> AttentionResult:
    """The explicit path every fast path is tested against: scores (..., Tq, Tk), weights
    normalised over ``spec.mask`` times ``spec.prior``, reduced with the values. query and keys
    in the compute dtype; the context comes back in the values' dtype."""
    out_dtype = values.dtype
    scores = score(query, keys)  # (..., Tq, Tk)
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
    "reference_attention",
    "sdpa_context",
    "weighted_sum",
]
