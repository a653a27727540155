"""Local attention over a gathered window of keys: Luong 2015's local-m and local-p (§3.2), and
any alignment that declares a ``key_window`` (see ``attnkit.stages.capabilities``).

    local-m:  p_t = t (the query's position)
    local-p:  p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))                       (eq. 9)
    a_t(s) = align(h_t, h̄_s) · exp(-(s - p_t)² / 2σ²),  σ = D / 2,         (eq. 10)
             for s in [p_t - D, p_t + D] (local-m has no Gaussian factor)

Instead of scoring all Tk keys and masking the rest (the reference ``attend(...,
align=LocalM/LocalP)``), the W keys start_t .. start_t + W - 1 that the alignment's
``KeyWindow`` names are gathered, and the alignment's own ``admit`` says which of them it
allows and with which prior, so time and memory are O(Tq·W·width) rather than O(Tq·Tk). Any
``gatherable`` score (dot, scaled dot, general, additive, cosine) and any normaliser with a
mask work.

Legend: G leading dims, Tq queries, Tk keys, W gathered window (2D + 1 local-m, 2D + 2
local-p: the keys floor(p_t) - D .. floor(p_t) + D + 1 cover every s with |s - p_t| <= D).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .._checks import check_mask, check_qkv
from ..stages.alignment import KeyWindow
from ..stages.capabilities import key_window
from ..stages.normalisers import compute_dtype, softmax
from ..stages.scores import scaled_dot_score


@dataclass
class WindowResult:
    """context (..., Tq, Dv); weights (..., Tq, W) in the band layout: ``weights[..., t, j]``
    is the weight of key ``start[..., t] + j`` (``band_to_dense(weights, start, Tk)``);
    position p_t (..., Tq)."""

    context: Tensor
    weights: Tensor
    start: Tensor
    position: Tensor


def local_window_attention(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    align: Any,
    *,
    score: Callable[[Tensor, Tensor], Tensor] = scaled_dot_score,
    normaliser: Callable[[Tensor, Tensor | None], Tensor] = softmax,
    mask: Tensor | None = None,
    positions: Tensor | None = None,
) -> WindowResult:
    """Local attention on the gathered window; equals ``attend(query, keys, values,
    score=score, align=align, normaliser=normaliser, mask=mask, positions=positions)`` on
    context and (expanded) weights. query (..., Tq, Dq), keys (..., Tk, Dk), values
    (..., Tk, Dv), mask bool broadcastable to (..., Tq, Tk), True = may attend; positions
    (..., Tq) or None (0 .. Tq-1). ``align`` must declare a ``key_window`` (LocalM, LocalP)."""
    check_qkv(query, keys, values, finite=False)
    if getattr(score, "gatherable", None) is False:
        raise ValueError(
            f"the {getattr(score, 'name', type(score).__name__)} score cannot score a gathered "
            "window of keys (it is not gatherable); use attnkit.attend for it"
        )
    tq, tk = query.shape[-2], keys.shape[-2]
    check_mask(mask, (*query.shape[:-2], tq, tk), query.device)
    work = compute_dtype(query.dtype)
    q_work, k_work = query.to(work), keys.to(work)  # half inputs: positions and scores in fp32
    window = key_window(align, q_work, k_work, mask, positions)
    if window is None:
        raise TypeError(
            f"align must declare a key window (LocalM, LocalP, or an alignment whose "
            f"key_window(...) returns a KeyWindow); {type(align).__name__} does not"
        )
    return attend_window(
        q_work, k_work, values, window, score=score, normaliser=normaliser, mask=mask
    )


def attend_window(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    window: KeyWindow,
    *,
    score: Callable[[Tensor, Tensor], Tensor],
    normaliser: Callable[[Tensor, Tensor | None], Tensor],
    mask: Tensor | None,
    bias: Callable[[Tensor], Tensor] | None = None,
) -> WindowResult:
    """The kernel: gather the window's keys, score, normalise over the keys ``admit`` allows,
    multiply by its prior, sum the values. Inputs as ``local_window_attention`` (query and keys
    already in the compute dtype); the context comes back in the values' dtype. ``bias(s)``:
    a position stage's bias at the key indices s (..., Tq, W), added to the scores."""
    tq, tk = query.shape[-2], keys.shape[-2]
    lead = query.shape[:-2]
    width = window.width
    s = window.start[..., None] + torch.arange(width, device=query.device)  # (..., Tq, W)
    inside, prior = window.admit(s)  # (..., Tq, W) each
    allowed = (s >= 0) & (s < tk) & inside  # (..., Tq, W)
    s = s.clamp(0, tk - 1).expand(*lead, tq, width)  # (..., Tq, W)
    if mask is not None:
        user = mask.expand(*lead, tq, tk).gather(-1, s)  # (..., Tq, W)
        allowed = allowed & user

    work = compute_dtype(query.dtype)
    kg = _gather_rows(keys.to(work), s)  # (..., Tq, W, Dk)
    vg = _gather_rows(values, s)  # (..., Tq, W, Dv)
    scores = score(query.to(work)[..., None, :], kg)[..., 0, :]  # (..., Tq, W)
    if bias is not None:
        scores = scores + bias(s)  # (..., Tq, W)
    weights = normaliser(scores, allowed)  # (..., Tq, W)
    if prior is not None:
        weights = weights * prior.to(weights.dtype)
    ctx = (weights[..., None, :] @ vg.to(weights.dtype))[..., 0, :]  # (..., Tq, Dv)
    return WindowResult(ctx.to(values.dtype), weights, window.start, window.position)


def _gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """x (..., Tk, D), index (..., Tq, W) -> x[..., index, :] (..., Tq, W, D)."""
    lead, (tq, w) = index.shape[:-2], index.shape[-2:]
    flat = x.reshape(-1, x.shape[-2], x.shape[-1])  # (G, Tk, D)
    idx = index.reshape(-1, tq * w)  # (G, Tq·W)
    g = torch.arange(flat.shape[0], device=x.device)[:, None]  # (G, 1)
    return flat[g, idx].reshape(*lead, tq, w, x.shape[-1])  # (..., Tq, W, D)


__all__ = ["WindowResult", "attend_window", "local_window_attention"]
