"""Route ``attnkit.attend`` to the O(n·window) kernels when they give the same result.

Called by ``attend`` before the alignment builds its dense (Tq, Tk) mask; returns None when
the reference path must run (weights requested, or stages the kernels do not implement). It
asks the stages' capabilities (``attnkit.stages.capabilities``), never their classes:

* plain scaled-dot softmax attention, an alignment with a ``sliding_band`` and the default
  query positions -> the sliding-window kernel (``sliding_window_attention``);
* a ``gatherable`` score and an alignment with a ``key_window`` -> the gathered-window kernel
  (``attend_window``).

Legend: Tq queries, Tk keys, Dv value width.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from ..stages.capabilities import (
    is_gatherable,
    is_plain_sdpa,
    is_weighted_sum,
    key_window,
    sliding_band,
)
from ..stages.normalisers import compute_dtype
from .sliding import sliding_window_attention
from .window import attend_window


@dataclass
class FastResult:
    """context (..., Tq, Dv), the band-layout weights (..., Tq, W) when asked for (see
    ``LocalResult``), and what the alignment reports (``position``, ``band_offset``)."""

    context: Tensor
    extras: dict[str, Any] = field(default_factory=dict)
    weights: Tensor | None = None


def fast_local(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    score: Any,
    align: Any,
    normaliser: Any,
    reduce: Any,
    mask: Tensor | None,
    positions: Tensor | None = None,
    *,
    work: tuple[Tensor, Tensor] | None = None,
    band_weights: bool = False,
) -> FastResult | None:
    """For ``attend(..., need_weights=False)``: the local kernel's context, or None to take
    the reference path. ``work``: query and keys already in the compute dtype (float32 for
    half inputs), in which alignments see them, as on attend's reference path. With
    ``band_weights`` (``attend(..., weights_layout="band")``) only the sliding-window kernel
    answers, with its weights in the band layout (..., Tq, W)."""
    if not is_weighted_sum(reduce):
        return None
    if work is None:
        dtype = compute_dtype(query.dtype)
        work = query.to(dtype), keys.to(dtype)
    q_work, k_work = work
    if positions is None and is_plain_sdpa(score, normaliser, reduce):
        band = sliding_band(align, q_work)
        if band is not None:
            out = sliding_window_attention(
                query, keys, values, band.radius, band.causal, mask, need_weights=band_weights
            )
            extras = _position(band.position)
            if band_weights:
                extras["band_offset"] = out.offset
            return FastResult(out.context, extras, out.weights)
    if band_weights:
        return None
    if is_gatherable(score):
        window = key_window(align, q_work, k_work, mask, positions)
        if window is not None:
            win = attend_window(
                q_work, k_work, values, window, score=score, normaliser=normaliser, mask=mask
            )
            return FastResult(win.context, _position(win.position))
    return None


def _position(position: Tensor | None) -> dict[str, Any]:
    return {} if position is None else {"position": position}


__all__ = ["FastResult", "fast_local"]
