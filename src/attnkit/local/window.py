"""Local-m and local-p attention (Luong 2015, §3.2) over a gathered window of keys.

    local-m:  p_t = t
    local-p:  p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))                       (eq. 9)
    a_t(s) = align(h_t, h̄_s) · exp(-(s - p_t)² / 2σ²),  σ = D / 2,         (eq. 10)
             for s in [p_t - D, p_t + D] (local-m has no Gaussian factor)

Instead of scoring all Tk keys and masking the rest (the reference ``attend(...,
align=LocalM/LocalP)``), the at most 2D + 2 keys around each p_t are gathered, so time and
memory are O(Tq·D·width) rather than O(Tq·Tk). Any score that broadcasts over leading dims
(dot, scaled dot, general, additive, cosine) and any normaliser with a mask work.

Legend: G leading dims, Tq queries, Tk keys, W gathered window (2D + 1 local-m, 2D + 2
local-p: the keys floor(p_t) - D .. floor(p_t) + D + 1 cover every s with |s - p_t| <= D).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from .._checks import check_mask, check_qkv
from ..alignment import LocalM, LocalP, predict_position
from ..normalisers import compute_dtype, softmax
from ..scores import LocationScore, scaled_dot_score


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
    align: LocalM | LocalP,
    *,
    score: Callable[[Tensor, Tensor], Tensor] = scaled_dot_score,
    normaliser: Callable[[Tensor, Tensor | None], Tensor] = softmax,
    mask: Tensor | None = None,
) -> WindowResult:
    """Luong 2015 local attention on the gathered window; equals
    ``attend(query, keys, values, score=score, align=align, normaliser=normaliser, mask=mask)``
    on context and (expanded) weights. query (..., Tq, Dq), keys (..., Tk, Dk), values
    (..., Tk, Dv), mask bool broadcastable to (..., Tq, Tk), True = may attend."""
    check_qkv(query, keys, values, finite=False)
    if isinstance(score, LocationScore):
        raise ValueError("the location score ignores the keys; use attnkit.attend for it")
    if not isinstance(align, LocalM | LocalP):
        raise TypeError(f"align must be LocalM or LocalP, got {type(align).__name__}")
    tq, tk = query.shape[-2], keys.shape[-2]
    lead = query.shape[:-2]
    check_mask(mask, (*lead, tq, tk))
    d = align.window
    position = _position(query, keys, align, mask)  # (..., Tq) or (Tq,)
    base = position.detach().floor().long() if isinstance(align, LocalP) else None
    if base is None:
        start = torch.arange(tq, device=query.device) - d  # (Tq,)
        width = 2 * d + 1
    else:
        start = base - d  # (..., Tq)
        width = 2 * d + 2
    s = start[..., None] + torch.arange(width, device=query.device)  # (..., Tq, W)
    dist = s.to(position.dtype) - position[..., None]  # (..., Tq, W)
    allowed = (s >= 0) & (s < tk) & (dist.abs() <= d)  # (..., Tq, W)
    s = s.clamp(0, tk - 1).expand(*lead, tq, width)  # (..., Tq, W)
    if mask is not None:
        user = mask.expand(*lead, tq, tk).gather(-1, s)  # (..., Tq, W)
        allowed = allowed & user

    work = compute_dtype(query.dtype)
    kg = _gather_rows(keys.to(work), s)  # (..., Tq, W, Dk)
    vg = _gather_rows(values, s)  # (..., Tq, W, Dv)
    scores = score(query.to(work)[..., None, :], kg)[..., 0, :]  # (..., Tq, W)
    weights = normaliser(scores, allowed)  # (..., Tq, W)
    if isinstance(align, LocalP):
        sigma = d / 2
        weights = weights * torch.exp(-(dist**2) / (2 * sigma**2)).to(weights.dtype)
    ctx = (weights[..., None, :] @ vg.to(weights.dtype))[..., 0, :]  # (..., Tq, Dv)
    return WindowResult(ctx.to(values.dtype), weights, start, position)


def _position(query: Tensor, keys: Tensor, align: LocalM | LocalP, mask: Tensor | None) -> Tensor:
    """p_t exactly as the LocalM / LocalP alignments compute it."""
    if isinstance(align, LocalM):
        return torch.arange(query.shape[-2], device=query.device, dtype=query.dtype)  # (Tq,)
    if mask is None:
        source_len = torch.tensor(float(keys.shape[-2]), device=query.device, dtype=query.dtype)
    else:
        source_len = mask.sum(dim=-1).to(query.dtype)  # (..., Tq or 1)
    return predict_position(query, align.w_p, align.v_p, source_len)  # (..., Tq)


def _gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """x (..., Tk, D), index (..., Tq, W) -> x[..., index, :] (..., Tq, W, D)."""
    lead, (tq, w) = index.shape[:-2], index.shape[-2:]
    flat = x.reshape(-1, x.shape[-2], x.shape[-1])  # (G, Tk, D)
    idx = index.reshape(-1, tq * w)  # (G, Tq·W)
    g = torch.arange(flat.shape[0], device=x.device)[:, None]  # (G, 1)
    return flat[g, idx].reshape(*lead, tq, w, x.shape[-1])  # (..., Tq, W, D)


__all__ = ["WindowResult", "local_window_attention"]
