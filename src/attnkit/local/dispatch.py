"""Route ``attnkit.attend`` to the O(n·window) kernels when they give the same result.

Called by ``attend`` before the alignment builds its dense (Tq, Tk) mask; returns None when
the reference path must run (weights requested, or stages the kernels do not implement). It
asks the stages' capabilities (``attnkit.stages.capabilities``), never their classes:

* plain scaled-dot softmax attention, an alignment with a ``sliding_band`` and the default
  query positions -> the sliding-window kernel (``sliding_window_attention``);
* a ``gatherable`` score and an alignment with a ``key_window`` -> the gathered-window kernel
  (``attend_window``);
* plain scaled-dot softmax attention, an alignment that declares a ``factorised`` pattern
  (the Sparse Transformer's, merged or split across heads), the default positions, as many
  keys as queries and at most a key-padding mask -> the factorised kernel
  (``factorised_attention``);
* a position stage with a bias that declares ``bias_at`` (ALiBi, T5, Shaw), a ``gatherable``
  score, and an alignment with a ``key_window`` or (at the default positions) a
  ``sliding_band`` -> the gathered-window kernel with the bias at the gathered keys.

Legend: Tq queries, Tk keys, Dv value width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from ..masks import window_mask
from ..stages.alignment import KeyWindow, query_positions
from ..stages.capabilities import (
    bias_at,
    factorised,
    is_gatherable,
    is_plain_sdpa,
    is_qk_transform,
    is_weighted_sum,
    key_window,
    sliding_band,
)
from ..stages.normalisers import compute_dtype
from .factorised import factorised_attention
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
    position: Any = None,
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
    if not is_qk_transform(position):  # a bias: only the gathered window takes it
        if band_weights:
            return None
        return _biased_window(q_work, k_work, values, score, align, normaliser, mask,
                              positions, position)  # fmt: skip
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
        # under torch.compile the dense path: the factorised kernel's blocks have sizes that
        # depend on the data (fullgraph=True would break on them)
        compiling = torch.compiler.is_compiling()
        spec = None if band_weights or compiling else factorised(align, q_work)
        if spec is not None and _factorisable(spec, query, keys, values, mask):
            return FastResult(factorised_attention(query, keys, values, spec, mask))
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


# the gathered-window kernel with a bias runs on query blocks whose gathered keys and values
# hold at most this many elements (64 MiB in float32): its memory stays O(block·W), not O(n·W)
WINDOW_ELEMENTS = 1 << 24


def _biased_window(
    query: Tensor, keys: Tensor, values: Tensor, score: Any, align: Any, normaliser: Any,
    mask: Tensor | None, positions: Tensor | None, position: Any,
) -> FastResult | None:  # fmt: skip
    """A position stage's bias (``bias_at``) in the gathered-window kernel: at the default
    positions the alignment's band as a window of W = 2r + 1 keys (r + 1 causal) around each
    query, in query blocks; else the alignment's key window. None (the reference path) when
    a stage cannot give its bias at gathered keys."""
    at = bias_at(position)
    if at is None or not is_gatherable(score):
        return None
    band = sliding_band(align, query) if positions is None else None
    if band is not None:
        ctx = _band_blocks(query, keys, values, score, normaliser, mask, band, at)
        return FastResult(ctx, _position(band.position))
    window = key_window(align, query, keys, mask, positions)
    if window is None:
        return None
    q_pos = query_positions(query, positions)  # (..., Tq)
    win = attend_window(
        query, keys, values, window, score=score, normaliser=normaliser, mask=mask,
        bias=lambda s: at(query, q_pos, s),
    )  # fmt: skip
    return FastResult(win.context, _position(window.position))


def _band_blocks(
    query: Tensor, keys: Tensor, values: Tensor, score: Any, normaliser: Any,
    mask: Tensor | None, band: Any, at: Any,
) -> Tensor:  # fmt: skip
    """The band |t - j| <= r (causal: 0 <= t - j <= r) as key windows of query blocks, each
    block's gathered keys and values under ``WINDOW_ELEMENTS``: context (..., Tq, Dv)."""
    tq, r = query.shape[-2], band.radius
    width = r + 1 if band.causal else 2 * r + 1
    per_query = math.prod(query.shape[:-2]) * width * (keys.shape[-1] + values.shape[-1])
    block = max(1, WINDOW_ELEMENTS // max(1, per_query))
    rows_mask = mask is not None and mask.dim() >= 2 and mask.shape[-2] == tq
    out = []
    for first in range(0, tq, block):
        t = torch.arange(first, min(tq, first + block), device=query.device)  # (b,)
        q = query[..., first : first + block, :]  # (..., b, D)

        def admit(s: Tensor, t: Tensor = t) -> tuple[Tensor, None]:
            return window_mask(t, s, r, causal=band.causal), None  # (..., b, K)

        window = KeyWindow(t - r, width, t, admit)
        m = mask[..., first : first + block, :] if rows_mask and mask is not None else mask
        def bias(s: Tensor, q: Tensor = q, t: Tensor = t) -> Tensor:
            return at(q, t, s)  # (..., b, K)

        win = attend_window(
            q, keys, values, window, score=score, normaliser=normaliser, mask=m, bias=bias
        )
        out.append(win.context)  # (..., b, Dv)
    return torch.cat(out, dim=-2)  # (..., Tq, Dv)


def _factorisable(
    spec: Any, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None
) -> bool:
    """The factorised kernel computes this call: a merged pattern, or a heads-split one on
    queries (..., H, n, D) with H >= 2; n keys and values with the queries' leading dims; no
    mask or a key-padding mask (..., 1, n)."""
    return (
        (not spec.split_heads or (query.dim() >= 4 and query.shape[-3] >= 2))
        and keys.shape[-2] == query.shape[-2]
        and keys.shape[:-2] == query.shape[:-2] == values.shape[:-2]
        and (mask is None or (2 <= mask.dim() <= query.dim() and mask.shape[-2] == 1))
    )


def _position(position: Tensor | None) -> dict[str, Any]:
    return {} if position is None else {"position": position}


__all__ = ["FastResult", "fast_local"]
