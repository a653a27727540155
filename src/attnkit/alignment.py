"""Alignment: which keys each query may look at, and with which prior.

Every alignment has one signature, ``align(query, keys, mask) -> AlignSpec``:
    query (..., Tq, Dq), keys (..., Tk, Dk), mask bool broadcastable to (..., Tq, Tk) or None
    -> AlignSpec(mask: the user's mask AND the alignment's window, prior: weights multiplier)
The normaliser sees ``AlignSpec.mask``; ``AlignSpec.prior`` (if any) multiplies the normalised
weights, as in Luong 2015's local-p.

Legend: B batch, Tq queries, Tk keys, Dq query width, D window half-width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ._checks import check_width, check_window
from .masks import and_masks, band_mask, causal_mask


@dataclass(frozen=True)
class AlignSpec:
    """mask: bool (..., Tq, Tk) True = may attend, or None; prior: (..., Tq, Tk) or None;
    position: the predicted centre p_t (..., Tq) for local-p, else None."""

    mask: Tensor | None
    prior: Tensor | None = None
    position: Tensor | None = None


class Alignment(nn.Module):
    """Base class: global alignment (every key, no prior)."""

    name = "global"

    def forward(self, query: Tensor, keys: Tensor, mask: Tensor | None = None) -> AlignSpec:
        return AlignSpec(mask)


class GlobalAlignment(Alignment):
    """Global attention (Luong 2015, §3.1): every source position is considered."""


class CausalAlignment(Alignment):
    """Query i attends keys j <= i (Vaswani 2017, decoder self-attention)."""

    name = "causal"

    def forward(self, query: Tensor, keys: Tensor, mask: Tensor | None = None) -> AlignSpec:
        window = causal_mask(query.shape[-2], keys.shape[-2], device=query.device)  # (Tq, Tk)
        return AlignSpec(and_masks(mask, window))


class SlidingWindow(Alignment):
    """Restricted self-attention of radius r (Vaswani 2017, Table 1 "restricted"):
    |i - j| <= r, or with ``causal=True`` a look-back 0 <= i - j <= r.

    This is the reference semantics (a dense band mask); ``attnkit.local`` has the O(n·r) kernel.
    """

    name = "sliding"

    def __init__(self, radius: int, causal: bool = False) -> None:
        super().__init__()
        self.radius = check_window("radius", radius)
        self.causal = causal

    def forward(self, query: Tensor, keys: Tensor, mask: Tensor | None = None) -> AlignSpec:
        window = band_mask(
            query.shape[-2], keys.shape[-2], self.radius, causal=self.causal, device=query.device
        )  # (Tq, Tk)
        return AlignSpec(and_masks(mask, window))

    def extra_repr(self) -> str:
        return f"radius={self.radius}, causal={self.causal}"


class LocalM(Alignment):
    """Local-m (Luong 2015, §3.2, monotonic): p_t = t, window [p_t - D, p_t + D], no prior."""

    name = "local-m"

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = check_window("window", window)

    def forward(self, query: Tensor, keys: Tensor, mask: Tensor | None = None) -> AlignSpec:
        window = band_mask(query.shape[-2], keys.shape[-2], self.window, device=query.device)
        position = torch.arange(query.shape[-2], device=query.device, dtype=query.dtype)  # (Tq,)
        return AlignSpec(and_masks(mask, window), position=position)

    def extra_repr(self) -> str:
        return f"window={self.window}"


def predict_position(query: Tensor, w_p: Tensor, v_p: Tensor, source_len: Tensor) -> Tensor:
    """Luong 2015, eq. 9: p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)).

    query (..., Tq, Dq), w_p (A, Dq), v_p (A,), source_len S broadcastable to (..., Tq)
    -> p (..., Tq), real-valued in [0, S].
    """
    hidden = torch.tanh(query @ w_p.transpose(0, 1))  # (..., Tq, A)
    return source_len * torch.sigmoid(hidden @ v_p)  # (..., Tq)


def gaussian_window(position: Tensor, num_keys: int, window: int) -> tuple[Tensor, Tensor]:
    """Luong 2015, eq. 10: the window [p_t - D, p_t + D] and the prior exp(-(s - p_t)² / 2σ²),
    σ = D / 2. position (..., Tq) -> mask (..., Tq, Tk), prior (..., Tq, Tk)."""
    s = torch.arange(num_keys, device=position.device, dtype=position.dtype)  # (Tk,)
    dist = s - position[..., None]  # (..., Tq, Tk)
    sigma = window / 2
    prior = torch.exp(-(dist**2) / (2 * sigma**2))  # (..., Tq, Tk)
    return dist.abs() <= window, prior


class LocalP(Alignment):
    """Local-p (Luong 2015, §3.2, predictive): p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)); the
    normalised weights inside [p_t - D, p_t + D] are multiplied by exp(-(s - p_t)² / 2σ²),
    σ = D/2 (so they no longer sum to one, as in the paper). S is the number of keys each query
    may attend under the given mask (the source length, with padding), else Tk."""

    name = "local-p"

    def __init__(self, query_dim: int, window: int, hidden: int | None = None) -> None:
        super().__init__()
        if check_window("window", window) < 1:
            raise ValueError("local-p needs window >= 1 (σ = D/2 must be positive)")
        self.window = window
        hidden = query_dim if hidden is None else hidden
        self.w_p = nn.Parameter(torch.empty(hidden, query_dim))
        self.v_p = nn.Parameter(torch.empty(hidden))
        nn.init.xavier_uniform_(self.w_p)
        nn.init.normal_(self.v_p, std=hidden**-0.5)

    def forward(self, query: Tensor, keys: Tensor, mask: Tensor | None = None) -> AlignSpec:
        check_width("query", query.shape[-1], self.w_p.shape[1], "see LocalP(query_dim)")
        tk = keys.shape[-2]
        if mask is None:
            source_len = torch.tensor(float(tk), device=query.device, dtype=query.dtype)
        else:
            source_len = mask.sum(dim=-1).to(query.dtype)  # (..., Tq or 1)
        w_p, v_p = self.w_p.to(query.dtype), self.v_p.to(query.dtype)  # half params: upcast
        position = predict_position(query, w_p, v_p, source_len)  # (..., Tq)
        window, prior = gaussian_window(position, tk, self.window)  # (..., Tq, Tk)
        return AlignSpec(and_masks(mask, window), prior, position)

    def extra_repr(self) -> str:
        return f"window={self.window}"


__all__ = [
    "AlignSpec",
    "Alignment",
    "CausalAlignment",
    "GlobalAlignment",
    "LocalM",
    "LocalP",
    "SlidingWindow",
    "gaussian_window",
    "predict_position",
]
