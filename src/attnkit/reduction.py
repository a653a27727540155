"""Reduction, the last stage: from weights over keys to what the attention returns.

Every reduction has one signature, ``reduce(weights, values) -> Reduced``:
    weights (..., Tq, Tk), values (..., Tk, Dv) -> Reduced(context (..., Tq, Dv), extras)
The soft reduction is the weighted sum below; hard attention samples a key (attnkit.hard).

Legend: Tq queries, Tk keys, Dv value width.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor


@dataclass
class Reduced:
    context: Tensor
    extras: dict[str, Any] = field(default_factory=dict)


def weighted_sum(weights: Tensor, values: Tensor) -> Reduced:
    """c_i = Σ_j a_ij v_j (Bahdanau 2015, eq. 5). weights (..., Tq, Tk), values (..., Tk, Dv)
    -> context (..., Tq, Dv), computed in the weights' dtype."""
    return Reduced(weights @ values.to(weights.dtype))  # (..., Tq, Dv)


ReduceFn = Callable[[Tensor, Tensor], Reduced]

__all__ = ["ReduceFn", "Reduced", "weighted_sum"]
