"""What a stage can do, as the fast paths ask it: never ``isinstance`` of a concrete score or
alignment class, so a new stage that declares a capability gets the fast path without an edit
to the dispatcher.

A normaliser declares ``plain_softmax`` (bool): it is exactly softmax over the allowed keys.
A score declares
    ``plain_scaled_dot`` (bool): it is exactly qᵀk / √d_k, so a fused SDPA kernel may compute it;
    ``gatherable`` (bool): ``score(q (..., Tq, 1, Dq), k (..., Tq, W, Dk))`` scores a gathered
        window of keys, i.e. it broadcasts over leading dims and reads the keys it is given.
An alignment declares (``attnkit.stages.alignment``)
    ``sliding_band(query) -> Band | None``: the sliding-window kernel (attnkit.local.sliding);
    ``key_window(query, keys, mask, positions) -> KeyWindow | None``: the gathered-window
        kernel (attnkit.local.window);
    ``factorised(query) -> PatternSpec | None``: the Sparse Transformer pattern it is at the
        default positions 0 .. Tq-1 (attnkit.stages.sparse), for the factorised kernel
        (attnkit.local.factorised).
    ``causal_prefix`` (bool): it is exactly j <= i at the default positions, nothing else
        (the causal prefix sums of linear attention, attnkit.linear).
A score declares ``feature_map`` (bool) and a normaliser ``kernel_ratio`` (bool): the score
is φ(q)ᵀφ(k) with ``score.features(x, query)`` giving φ, the normaliser divides by the row
sum; together they are linear attention (attnkit.stages.kernels, attnkit.linear).
A position stage declares ``qk_transform`` (bool): it only transforms q and k and never adds
a bias (RoPE, learned absolute), so every fast path runs on the transformed q and k; a stage
with a bias reaches the fused kernel as SDPA's float mask (``attnkit.stages.position``), and the
gathered-window kernel when it declares ``bias_at(query, q_pos, s)`` (its bias at gathered
key indices s (..., Tq, W)).
Plain functions carry the flags as attributes (see ``scores.scaled_dot_score``); a callable
that declares nothing takes the reference path.

This module imports no other attnkit module that imports it, so ``core`` and ``local`` both
use it without a cycle.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from .alignment import Alignment, Band, KeyWindow
from .reduction import weighted_sum


def is_plain_scaled_dot(score: Any) -> bool:
    """score(q, k) = qᵀk / √d_k exactly."""
    return bool(getattr(score, "plain_scaled_dot", False))


def is_gatherable(score: Any) -> bool:
    """The score can score a gathered window of keys (q (..., Tq, 1, Dq), k (..., Tq, W, Dk))."""
    return bool(getattr(score, "gatherable", False))


def is_plain_softmax(normaliser: Any) -> bool:
    """softmax(e) with temperature 1 over the allowed keys, zero on fully masked rows."""
    return bool(getattr(normaliser, "plain_softmax", False))


def is_weighted_sum(reduce: Any) -> bool:
    """c = Σ_j a_j v_j, nothing else (no dropout, no sample)."""
    return reduce is weighted_sum


def is_plain_sdpa(score: Any, normaliser: Any, reduce: Any) -> bool:
    """softmax(qkᵀ/√d) v: what ``F.scaled_dot_product_attention`` computes."""
    return is_plain_scaled_dot(score) and is_plain_softmax(normaliser) and is_weighted_sum(reduce)


def is_kernelised(score: Any, normaliser: Any) -> bool:
    """φ(q)ᵀφ(k) / Σ_j φ(q)ᵀφ(k_j): a feature-map score with the kernel-ratio normaliser."""
    return bool(getattr(score, "feature_map", False)) and bool(
        getattr(normaliser, "kernel_ratio", False)
    )


def is_causal_prefix(align: Any) -> bool:
    """The alignment is exactly j <= i at the default positions (no band, no prior)."""
    return bool(getattr(align, "causal_prefix", False))


def is_qk_transform(position: Any) -> bool:
    """The position stage only transforms q and k (no bias): None, or it declares so."""
    return position is None or bool(getattr(position, "qk_transform", False))


def bias_at(position: Any) -> Any:
    """A position stage's ``bias_at(query, q_pos, s)``: its bias at gathered key indices s
    (..., Tq, W), keys at their index (the gathered-window kernel), or None."""
    return getattr(position, "bias_at", None)


def is_global(align: Any) -> bool:
    """Every key the mask allows, no prior: None, or an alignment that keeps the base class's
    ``forward`` (``AlignSpec(mask)``) and declares no band or key window."""
    if align is None:
        return True
    kind = type(align)
    return all(
        getattr(kind, name, None) is getattr(Alignment, name)
        for name in ("forward", "sliding_band", "key_window")
    )


def sliding_band(align: Any, query: Tensor) -> Band | None:
    """The band an alignment is at the default positions, or None."""
    ask = getattr(align, "sliding_band", None)
    return None if ask is None else ask(query)


def factorised(align: Any, query: Tensor) -> Any:
    """The factorised pattern (a ``PatternSpec``) an alignment is at the default positions,
    or None."""
    ask = getattr(align, "factorised", None)
    return None if ask is None else ask(query)


def key_window(
    align: Any, query: Tensor, keys: Tensor, mask: Tensor | None, positions: Tensor | None
) -> KeyWindow | None:
    """The few keys each query may reach under this alignment, or None."""
    ask = getattr(align, "key_window", None)
    return None if ask is None else ask(query, keys, mask, positions)


__all__ = [
    "bias_at",
    "factorised",
    "is_causal_prefix",
    "is_gatherable",
    "is_global",
    "is_kernelised",
    "is_plain_scaled_dot",
    "is_qk_transform",
    "is_plain_sdpa",
    "is_plain_softmax",
    "is_weighted_sum",
    "key_window",
    "sliding_band",
]
