"""Route ``attnkit.attend`` to linear attention when its stages declare it: a score with a
``feature_map`` and the ``kernel_ratio`` normaliser (``attnkit.stages.capabilities``).

What the reassociated sums can honour is all keys (a global alignment) or the keys j <= i
(an alignment that declares ``causal_prefix``, at the default positions, as many keys as
queries), with a key-padding mask (..., 1, Tk) (a masked key's φ(k) is zeroed). Anything
else (bands, patterns, Gaussian priors, a (Tq, Tk) mask, a position bias, dropout on the
weights) would need the (Tq, Tk) scores the kernels avoid: it is refused in one line.
With ``need_weights`` the implied weights are computed, O(Tq·Tk).

Legend: Tq queries, Tk keys, M features, Dv value width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..stages.capabilities import is_causal_prefix, is_global, is_weighted_sum
from ..stages.normalisers import compute_dtype
from .kernels import causal_linear_attention, implied_weights, linear_attention

_CAN = "linear attention honours all keys or the causal j <= i, with a key-padding mask"


@dataclass(frozen=True)
class LinearResult:
    """context (..., Tq, Dv); weights (..., Tq, Tk), the implied ones, when asked, else None."""

    context: Tensor
    weights: Tensor | None


def key_mask(mask: Tensor | None, tq: int) -> Tensor | None:
    """A key-padding mask as (..., Tk, 1) to multiply φ(K) by; a mask that differs across
    queries is refused (``_CAN``)."""
    if mask is None:
        return None
    if mask.dim() >= 2 and mask.shape[-2] != 1:
        raise ValueError(
            f"{_CAN} (..., 1, Tk); this mask is {tuple(mask.shape)} (one row per query): pass "
            "a key-padding mask and align='causal', or a softmax score for arbitrary masks"
        )
    rows = mask if mask.dim() == 1 else mask[..., 0, :]  # (..., Tk)
    return rows[..., None]  # (..., Tk, 1)


def check_linear(align: Any, reduce: Any, biased: bool, positions: Tensor | None,
                 tq: int, tk: int) -> bool:  # fmt: skip
    """Whether the alignment is causal (else global); a ValueError saying what to do for what
    the kernels cannot honour."""
    if biased:
        raise ValueError(
            f"{_CAN}; a position bias (ALiBi, T5, Shaw, XL) needs the (Tq, Tk) scores: use "
            "position='rope' or 'learned' (a transform of q and k) with linear attention"
        )
    if not is_weighted_sum(reduce):
        raise ValueError(
            f"{_CAN}, reduced by the weighted sum; {type(reduce).__name__} needs the weights "
            "themselves (attention dropout, a hard sample): build with dropout=0"
        )
    causal = is_causal_prefix(align)
    if not causal and not is_global(align):
        raise ValueError(
            f"{_CAN}; {type(align).__name__} restricts the keys otherwise (a band, a pattern, "
            "a prior): use align='global' or 'causal', or a softmax score with this alignment"
        )
    if causal and (positions is not None or tq != tk):
        raise ValueError(
            f"{_CAN}; causal linear attention runs over one whole sequence (Tq = Tk, default "
            f"positions; got Tq={tq}, Tk={tk}): decode position by position with linear_step"
        )
    return causal


def linear_attend(
    query: Tensor, keys: Tensor, values: Tensor, score: Any, align: Any, reduce: Any,
    mask: Tensor | None, positions: Tensor | None, need_weights: bool, biased: bool,
    chunk: int | None = None,
) -> LinearResult:  # fmt: skip
    """Linear attention of query (..., Tq, D) over keys (..., Tk, D), values (..., Tk, Dv) with
    the score's feature map ``score.features(x, query)``: the reassociated kernels, or with
    ``need_weights`` the implied weights and their weighted sum (the reference form, O(Tq·Tk)).
    Half inputs are computed in float32; the context comes back in the values' dtype."""
    tq, tk = query.shape[-2], keys.shape[-2]
    causal = check_linear(align, reduce, biased, positions, tq, tk)
    keep = key_mask(mask, tq)
    work = compute_dtype(query.dtype)
    phi_q = score.features(query.to(work), True)  # (..., Tq, M)
    phi_k = score.features(keys.to(work), False)  # (..., Tk, M)
    if keep is not None:
        phi_k = phi_k * keep  # a masked key adds nothing to the sums (..., Tk, M)
    v = values.to(work)  # (..., Tk, Dv)
    if need_weights:
        weights = implied_weights(phi_q, phi_k, causal)  # (..., Tq, Tk)
        return LinearResult((weights @ v).to(values.dtype), weights)
    if causal:
        lead = torch.broadcast_shapes(phi_q.shape[:-2], phi_k.shape[:-2], v.shape[:-2])
        phi_q, phi_k = phi_q.expand(*lead, *phi_q.shape[-2:]), phi_k.expand(*lead, tk, -1)
        v = v.expand(*lead, *v.shape[-2:])
        args = (phi_q, phi_k, v) if chunk is None else (phi_q, phi_k, v, chunk)
        return LinearResult(causal_linear_attention(*args).to(values.dtype), None)
    return LinearResult(linear_attention(phi_q, phi_k, v).to(values.dtype), None)


__all__ = ["LinearResult", "check_linear", "key_mask", "linear_attend"]
