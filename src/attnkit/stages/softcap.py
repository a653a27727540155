"""Soft-capping of attention scores (Gemma Team 2024, "Gemma 2", §2: logit soft-capping):

    e'_ij = cap · tanh(e_ij / cap)            # (..., Tq, Tk), |e'| < cap

A score modifier: it wraps any score, so it composes with every alignment, mask and
normaliser; near zero it is the identity (tanh x ≈ x), far out it bounds the logits smoothly.
Gemma 2 caps its attention scores at 50 (and its output logits at 30).

Legend: Tq queries, Tk keys, Dq/Dk query/key widths.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from .capabilities import is_gatherable
from .scores import Score

ScoreFn = Callable[[Tensor, Tensor], Tensor]


def check_cap(cap: float) -> float:
    """A soft cap is a positive finite number; a ValueError saying so otherwise."""
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not (
        math.isfinite(cap) and cap > 0
    ):
        raise ValueError(
            f"cap={cap!r}; a soft cap bounds the scores to (-cap, cap): give a positive "
            "finite number (Gemma 2 uses 50), or drop the cap"
        )
    return float(cap)


def soft_cap(scores: Tensor, cap: float) -> Tensor:
    """cap · tanh(scores / cap), elementwise: (...) -> (...)."""
    return torch.tanh(scores / cap) * cap


class SoftCappedScore(Score):
    """``score`` soft-capped: cap · tanh(score(q, k) / cap) (Gemma 2, 2024). query
    (..., Tq, Dq), keys (..., Tk, Dk) -> (..., Tq, Tk). The inner score's parameters are
    this module's; it is gatherable (the gathered-window kernel) when the inner one is.
    Not plain scaled-dot, so a fused SDPA kernel never computes it."""

    name = "softcap"
    formula = "cap · tanh(score(q, k) / cap)"

    def __init__(self, score: ScoreFn, cap: float) -> None:
        super().__init__()
        self.cap = check_cap(cap)
        self.score = score

    @property
    def gatherable(self) -> bool:  # type: ignore[override]
        """Gatherable (the gathered-window kernel) when the inner score is."""
        return is_gatherable(self.score)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return soft_cap(self.score(query, keys), self.cap)  # (..., Tq, Tk)

    def extra_repr(self) -> str:
        return f"cap={self.cap:g}"


__all__ = ["SoftCappedScore", "check_cap", "soft_cap"]
