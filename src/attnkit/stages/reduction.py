"""Reduction, the last stage: from weights over keys to what the attention returns.

Every reduction has one signature, ``reduce(weights, values) -> Reduced``:
    weights (..., Tq, Tk), values (..., Tk, Dv) -> Reduced(context (..., Tq, Dv), extras)
The soft reduction is the weighted sum below; hard attention samples a key
(attnkit.mechanisms.hard).

Legend: Tq queries, Tk keys, Dv value width.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor


@dataclass
class Reduced:
    """What a reduction returns: context (..., Tq, Dv), and extras a variant adds (a hard
    sample's ``log_prob`` and ``entropy``)."""

    context: Tensor
    extras: dict[str, Any] = field(default_factory=dict)


def weighted_sum(weights: Tensor, values: Tensor) -> Reduced:
    """c_i = Σ_j a_ij v_j (Bahdanau 2015, eq. 5). weights (..., Tq, Tk), values (..., Tk, Dv)
    -> context (..., Tq, Dv), computed in the weights' dtype."""
    return Reduced(weights @ values.to(weights.dtype))  # (..., Tq, Dv)


ReduceFn = Callable[[Tensor, Tensor], Reduced]
"""A reduction: ``reduce(weights (..., Tq, Tk), values (..., Tk, Dv)) -> Reduced``."""

__all__ = ["ReduceFn", "Reduced", "weighted_sum"]
