"""Alignment: which keys each query may look at, and with which prior.

Every alignment has one signature, ``align(query, keys, mask, positions) -> AlignSpec``:
    query (..., Tq, Dq), keys (..., Tk, Dk), mask bool broadcastable to (..., Tq, Tk) or None,
    positions (..., Tq): where each query stands in its sequence (None: 0 .. Tq-1; an
    incremental decoder passes its step t)
    -> AlignSpec(mask: the user's mask AND the alignment's window, prior: weights multiplier)
The normaliser sees ``AlignSpec.mask``; ``AlignSpec.prior`` (if any) multiplies the normalised
weights, as in Luong 2015's local-p.

An alignment may also declare what the fast paths need (``attnkit.stages.capabilities``):
``sliding_band(query) -> Band | None`` (a band around the query index, no prior: the
sliding-window kernel) and ``key_window(query, keys, mask, positions) -> KeyWindow | None``
(each query reaches at most W keys from ``start_t``: the gathered-window kernel).

Legend: B batch, Tq queries, Tk keys, Dq query width, D window half-width, W window width.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._checks import check_width, check_window
from ..masks import and_masks, window_mask


@dataclass(frozen=True)
class AlignSpec:
    """mask: bool (..., Tq, Tk) True = may attend, or None; prior: (..., Tq, Tk) or None;
    position: the centre p_t (..., Tq) of a local alignment, else None."""

    mask: Tensor | None
    prior: Tensor | None = None
    position: Tensor | None = None


@dataclass(frozen=True)
class Band:
    """Capability: at the default positions 0 .. Tq-1, query t may attend keys |t - j| <= radius
    (``causal``: 0 <= t - j <= radius) and nothing else, with no prior. position: what the
    alignment reports as ``extras["position"]`` (or None)."""

    radius: int
    causal: bool = False
    position: Tensor | None = None


Admit = Callable[[Tensor], "tuple[Tensor, Tensor | None]"]


@dataclass(frozen=True)
class KeyWindow:
    """Capability: query t reaches at most the ``width`` keys start_t .. start_t + width - 1.
    ``admit(s)`` takes key indices s (..., Tq, K) (any K; long) and says which of them the
    alignment allows (bool (..., Tq, K)) and with which prior ((..., Tq, K) or None); keys
    outside the window must be refused. start (..., Tq) long; position p_t (..., Tq), reported
    as ``extras["position"]``."""

    start: Tensor
    width: int
    position: Tensor
    admit: Admit


def query_positions(query: Tensor, positions: Tensor | None) -> Tensor:
    """positions (..., Tq) as given, or the default 0 .. Tq-1 (Tq,) long."""
    if positions is not None:
        return positions.to(query.device)
    return torch.arange(query.shape[-2], device=query.device)  # (Tq,)


def dense_spec(window: KeyWindow, num_keys: int, mask: Tensor | None) -> AlignSpec:
    """The dense AlignSpec of a key window: ``admit`` asked about every key 0 .. Tk-1."""
    keys = torch.arange(num_keys, device=window.start.device)  # (Tk,)
    allowed, prior = window.admit(keys)  # (..., Tq, Tk) each
    return AlignSpec(and_masks(mask, allowed), prior, window.position)


class Alignment(nn.Module):
    """Base class: global alignment (every key, no prior), no fast-path capability."""

    name = "global"

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> AlignSpec:
        return AlignSpec(mask)

    def sliding_band(self, query: Tensor) -> Band | None:
        """The band this alignment is at the default positions, if it is one (else None)."""
        return None

    def key_window(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> KeyWindow | None:
        """The few keys each query may reach, if they are few (else None)."""
        return None


class GlobalAlignment(Alignment):
    """Global attention (Luong 2015, §3.1): every source position is considered."""


class CausalAlignment(Alignment):
    """Query at position i attends keys j <= i (Vaswani 2017, decoder self-attention); by
    default query i is at position i, an incremental decoder passes its step."""

    name = "causal"
    causal_prefix = True  # capability: exactly j <= i (linear attention's prefix sums)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> AlignSpec:
        at = query_positions(query, positions)  # (..., Tq)
        return AlignSpec(and_masks(mask, window_mask(at, keys.shape[-2], causal=True)))


class SlidingWindow(Alignment):
    """Restricted self-attention of radius r (Vaswani 2017, Table 1 "restricted"):
    |i - j| <= r, or with ``causal=True`` a look-back 0 <= i - j <= r, i the query's position.

    This is the reference semantics (a dense band mask); ``attnkit.local`` has the O(n·r)
    kernel, which ``attend`` takes at the default positions (``sliding_band``). No key window:
    gathering 2r + 1 keys per query would copy more than the dense scores for the radii
    sliding windows use.
    """

    name = "sliding"

    def __init__(self, radius: int, causal: bool = False) -> None:
        super().__init__()
        self.radius = check_window("radius", radius)
        self.causal = causal

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> AlignSpec:
        at = query_positions(query, positions)  # (..., Tq)
        window = window_mask(at, keys.shape[-2], self.radius, causal=self.causal)  # (.., Tq, Tk)
        return AlignSpec(and_masks(mask, window))

    def sliding_band(self, query: Tensor) -> Band:
        """The band |i - j| <= r (causal: 0 <= i - j <= r) for the O(n·r) kernel."""
        return Band(self.radius, self.causal)

    def extra_repr(self) -> str:
        return f"radius={self.radius}, causal={self.causal}"


class WindowedAlignment(Alignment):
    """An alignment defined by its key window: the dense reference asks ``admit`` about every
    key, the gathered-window kernel about the few in the window (one definition, two paths)."""

    def key_window(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> KeyWindow:
        raise NotImplementedError

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> AlignSpec:
        return dense_spec(self.key_window(query, keys, mask, positions), keys.shape[-2], mask)


class LocalM(WindowedAlignment):
    """Local-m (Luong 2015, §3.2, monotonic): p_t = t, window [p_t - D, p_t + D], no prior;
    t is the query's position (its decoding step)."""

    name = "local-m"

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = check_window("window", window)

    def sliding_band(self, query: Tensor) -> Band:
        """At the default positions p_t = t, local-m is the band |s - t| <= D."""
        position = torch.arange(query.shape[-2], device=query.device, dtype=query.dtype)
        return Band(self.window, position=position)  # p_t = t (Tq,)

    def key_window(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> KeyWindow:
        """p_t - D .. p_t + D: the 2D + 1 keys around each query's position (floored when
        the positions are fractional, with one more key to cover the window)."""
        d = self.window
        position = query_positions(query, positions).to(query.dtype)  # p_t = t (..., Tq)
        whole = positions is None or not positions.is_floating_point()
        start = position.detach().floor().long() - d  # (..., Tq)

        def admit(s: Tensor) -> tuple[Tensor, None]:
            return window_mask(position, s, d), None  # |s - p_t| <= D (..., Tq, K)

        return KeyWindow(start, 2 * d + 1 if whole else 2 * d + 2, position, admit)

    def extra_repr(self) -> str:
        return f"window={self.window}"


def predict_position(query: Tensor, w_p: Tensor, v_p: Tensor, source_len: Tensor) -> Tensor:
    """Luong 2015, eq. 9: p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)).

    query (..., Tq, Dq), w_p (A, Dq), v_p (A,), source_len S broadcastable to (..., Tq)
    -> p (..., Tq), real-valued in [0, S].
    """
    hidden = torch.tanh(query @ w_p.transpose(0, 1))  # (..., Tq, A)
    return source_len * torch.sigmoid(hidden @ v_p)  # (..., Tq)


def _gaussian(keys: Tensor, position: Tensor, window: int) -> tuple[Tensor, Tensor]:
    """Luong 2015, eq. 10 at key indices s (..., Tq, K) or (K,): |s - p_t| <= D and
    exp(-(s - p_t)² / 2σ²), σ = D / 2 -> mask (..., Tq, K), prior (..., Tq, K)."""
    dist = keys.to(position.dtype) - position[..., None]  # (..., Tq, K)
    sigma = window / 2
    prior = torch.exp(-(dist**2) / (2 * sigma**2))  # (..., Tq, K)
    return dist.abs() <= window, prior


def gaussian_window(position: Tensor, num_keys: int, window: int) -> tuple[Tensor, Tensor]:
    """Luong 2015, eq. 10: the window [p_t - D, p_t + D] and the prior exp(-(s - p_t)² / 2σ²),
    σ = D / 2. position (..., Tq) -> mask (..., Tq, Tk), prior (..., Tq, Tk)."""
    return _gaussian(torch.arange(num_keys, device=position.device), position, window)


class LocalP(WindowedAlignment):
    """Local-p (Luong 2015, §3.2, predictive): p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)); the
    normalised weights inside [p_t - D, p_t + D] are multiplied by exp(-(s - p_t)² / 2σ²),
    σ = D/2 (so they no longer sum to one, as in the paper). S is the number of keys each query
    may attend under the given mask (the source length, with padding), else Tk. p_t depends on
    h_t alone, so the query positions are not used."""

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

    def position(self, query: Tensor, keys: Tensor, mask: Tensor | None = None) -> Tensor:
        """p_t (eq. 9) in the query's dtype: query (..., Tq, Dq) -> (..., Tq)."""
        check_width("query", query.shape[-1], self.w_p.shape[1], "see LocalP(query_dim)")
        if mask is None:
            source_len = torch.tensor(
                float(keys.shape[-2]), device=query.device, dtype=query.dtype
            )
        else:
            source_len = mask.sum(dim=-1).to(query.dtype)  # (..., Tq or 1)
        w_p, v_p = self.w_p.to(query.dtype), self.v_p.to(query.dtype)  # half params: upcast
        return predict_position(query, w_p, v_p, source_len)  # (..., Tq)

    def key_window(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> KeyWindow:
        """floor(p_t) - D .. floor(p_t) + D + 1: the 2D + 2 keys that cover |s - p_t| <= D."""
        d = self.window
        position = self.position(query, keys, mask)  # (..., Tq)
        start = position.detach().floor().long() - d  # (..., Tq)

        def admit(s: Tensor) -> tuple[Tensor, Tensor]:
            return _gaussian(s, position, d)  # (..., Tq, K) each

        return KeyWindow(start, 2 * d + 2, position, admit)

    def extra_repr(self) -> str:
        return f"window={self.window}"


__all__ = [
    "AlignSpec",
    "Alignment",
    "Band",
    "CausalAlignment",
    "GlobalAlignment",
    "KeyWindow",
    "LocalM",
    "LocalP",
    "SlidingWindow",
    "dense_spec",
    "gaussian_window",
    "predict_position",
    "query_positions",
]
