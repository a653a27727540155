"""Normalisers: turn scores into attention weights over the keys.

Every normaliser has one signature, ``normalise(scores, mask) -> weights``:
    scores (..., Tq, Tk), mask bool broadcastable to it (True = may attend) or None
    -> weights (..., Tq, Tk), in float32 at least (float16/bfloat16 logits are upcast).
Masked keys get exactly zero weight; a fully masked row gets all-zero weights (never NaN),
in the forward and the backward pass.

Sparsemax and entmax-1.5 are written here from their papers rather than taken from the
``entmax`` package: that package has no notion of a mask, and a row of ``-inf`` logits makes
its sort-based threshold NaN; here masked logits are replaced by a value provably outside the
support (row max - 2: the threshold τ is at least max - 1 for both), so the same exact
algorithm runs on every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .._checks import check_mask


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float16/bfloat16 -> float32; float32/float64 unchanged."""
    return torch.promote_types(dtype, torch.float32)


def _upcast(scores: Tensor) -> Tensor:
    return scores.to(compute_dtype(scores.dtype))


def masked_softmax(scores: Tensor, mask: Tensor | None = None, temperature: float = 1.0) -> Tensor:
    """Softmax over keys (Bahdanau 2015, eq. 6): a_ij = exp(e_ij / T) / Σ_k exp(e_ik / T),
    the sum running over allowed keys only. scores (..., Tq, Tk) -> weights (..., Tq, Tk)."""
    check_mask(mask, tuple(scores.shape), scores.device)
    s = _upcast(scores) / temperature  # (..., Tq, Tk)
    if mask is None:
        return torch.softmax(s, dim=-1)
    s = s.masked_fill(~mask, torch.finfo(s.dtype).min)  # masked -> very negative, finite
    w = torch.softmax(s, dim=-1)  # (..., Tq, Tk); a fully masked row is uniform here...
    return w * mask  # ...and zero here


def _fill_outside_support(z: Tensor, mask: Tensor | None) -> Tensor:
    """Replace masked logits by (row max over allowed) - 2: outside the support of sparsemax
    and entmax-1.5, whose threshold τ is at least max - 1. z is already scaled."""
    if mask is None:
        return z
    mask = mask.expand_as(z)
    lowest = torch.finfo(z.dtype).min
    row_max = z.masked_fill(~mask, lowest).amax(dim=-1, keepdim=True)  # (..., Tq, 1)
    row_max = torch.where(mask.any(dim=-1, keepdim=True), row_max, torch.zeros_like(row_max))
    return torch.where(mask, z, (row_max - 2.0).detach())


class _Sparsemax(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, z: Tensor) -> Tensor:
        z = z - z.amax(dim=-1, keepdim=True)  # sparsemax(z - c) = sparsemax(z): exact cumsums
        z_sorted, _ = torch.sort(z, dim=-1, descending=True)  # (..., Tk)
        k = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)  # (Tk,)
        cumsum = z_sorted.cumsum(dim=-1)  # (..., Tk)
        support = 1 + k * z_sorted > cumsum  # (..., Tk), True on a prefix
        k_z = support.sum(dim=-1, keepdim=True)  # (..., 1), >= 1 always
        tau = (cumsum.gather(-1, k_z - 1) - 1) / k_z.to(z.dtype)  # (..., 1)
        p = (z - tau).clamp_min(0)  # (..., Tk)
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (p,) = ctx.saved_tensors
        s = (p > 0).to(grad.dtype)  # support
        v = (grad * s).sum(-1, keepdim=True) / s.sum(-1, keepdim=True)  # (..., 1)
        return s * (grad - v)


class _Entmax15(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, z: Tensor) -> Tensor:
        x = z / 2  # (α - 1) z with α = 1.5
        x = x - x.amax(dim=-1, keepdim=True)
        x_sorted, _ = torch.sort(x, dim=-1, descending=True)  # (..., Tk)
        rho = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)  # (Tk,)
        mean = x_sorted.cumsum(-1) / rho  # (..., Tk)
        mean_sq = (x_sorted**2).cumsum(-1) / rho  # (..., Tk)
        ss = rho * (mean_sq - mean**2)
        delta = ((1 - ss) / rho).clamp_min(0)
        tau = mean - delta.sqrt()  # candidate thresholds, (..., Tk)
        support = (tau <= x_sorted).sum(dim=-1, keepdim=True)  # (..., 1)
        tau_star = tau.gather(-1, support - 1)  # (..., 1)
        p = (x - tau_star).clamp_min(0) ** 2  # (..., Tk)
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (p,) = ctx.saved_tensors
        g = p.sqrt()  # ∝ the derivative of p on the support
        dz = grad * g
        q = dz.sum(-1, keepdim=True) / g.sum(-1, keepdim=True)
        # p = (x - τ)², x = z/2: dp/dz = g (I - g gᵀ/Σg), the 2 of the square cancels the 1/2.
        return dz - q * g


def sparsemax(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Sparsemax (Martins & Astudillo 2016, eq. 2): the Euclidean projection of the scores onto
    the probability simplex, p = [z - τ(z)]₊ with Σp = 1; exact zeros outside the support."""
    check_mask(mask, tuple(scores.shape), scores.device)
    z = _fill_outside_support(_upcast(scores), mask)
    p = _Sparsemax.apply(z)
    assert isinstance(p, Tensor)
    return p if mask is None else p * mask


def entmax15(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """1.5-entmax (Peters, Niculae & Martins 2019, eq. 10 with α = 1.5):
    p = [z/2 - τ]₊² with τ chosen so that Σp = 1 (their Algorithm 2, exact, sort-based)."""
    check_mask(mask, tuple(scores.shape), scores.device)
    z = _fill_outside_support(_upcast(scores), mask)
    p = _Entmax15.apply(z)
    assert isinstance(p, Tensor)
    return p if mask is None else p * mask


@dataclass(frozen=True)
class Softmax:
    """softmax(scores / temperature) over the allowed keys."""

    temperature: float = 1.0
    name: str = "softmax"

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")

    def __call__(self, scores: Tensor, mask: Tensor | None = None) -> Tensor:
        return masked_softmax(scores, mask, self.temperature)

    @property
    def plain_softmax(self) -> bool:
        """Capability (see capabilities.py): exactly softmax(e), which SDPA computes."""
        return self.temperature == 1.0


@dataclass(frozen=True)
class Sparsemax:
    """Sparsemax (Martins & Astudillo 2016): sparse weights, exact zeros."""

    name: str = "sparsemax"

    def __call__(self, scores: Tensor, mask: Tensor | None = None) -> Tensor:
        return sparsemax(scores, mask)


@dataclass(frozen=True)
class Entmax15:
    """1.5-entmax (Peters et al. 2019): between softmax and sparsemax."""

    name: str = "entmax15"

    def __call__(self, scores: Tensor, mask: Tensor | None = None) -> Tensor:
        return entmax15(scores, mask)


softmax = Softmax()
"""The temperature-1 softmax normaliser (Bahdanau 2015), ``Softmax()``: the default."""

__all__ = [
    "Entmax15",
    "Softmax",
    "Sparsemax",
    "compute_dtype",
    "entmax15",
    "masked_softmax",
    "softmax",
    "sparsemax",
]
