"""Route ``attnkit.attend`` to the O(n·window) kernels when they give the same result.

Called by ``attend`` before the alignment builds its dense (Tq, Tk) mask; returns None when
the reference path must run (weights requested, or a stage the kernels do not implement).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..alignment import LocalM, LocalP, SlidingWindow
from ..core import AttentionResult, _is_plain_sdpa, weighted_sum
from ..scores import (
    AdditiveScore,
    CosineScore,
    DotScore,
    GeneralScore,
    ScaledDotScore,
    dot_score,
    scaled_dot_score,
)
from .sliding import sliding_window_attention
from .window import local_window_attention

_GATHERABLE = (ScaledDotScore, DotScore, GeneralScore, AdditiveScore, CosineScore)


def fast_local(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    score: Callable[[Tensor, Tensor], Tensor],
    align: Any,
    normaliser: Any,
    reduce: Any,
    mask: Tensor | None,
) -> AttentionResult | None:
    """For ``attend(..., need_weights=False)``: the local kernel's AttentionResult (weights
    None), or None to take the reference path."""
    if reduce is not weighted_sum:
        return None
    plain = _is_plain_sdpa(score, normaliser, reduce)
    if isinstance(align, SlidingWindow) and plain:
        out = sliding_window_attention(query, keys, values, align.radius, align.causal, mask)
        return AttentionResult(out.context, None)
    if isinstance(align, LocalM) and plain:
        out = sliding_window_attention(query, keys, values, align.window, False, mask)
        tq = query.shape[-2]
        position = torch.arange(tq, device=query.device, dtype=query.dtype)  # (Tq,)
        return AttentionResult(out.context, None, extras={"position": position})
    gatherable = score in (scaled_dot_score, dot_score) or isinstance(score, _GATHERABLE)
    if isinstance(align, LocalM | LocalP) and gatherable:
        win = local_window_attention(
            query, keys, values, align, score=score, normaliser=normaliser, mask=mask
        )
        return AttentionResult(win.context, None, extras={"position": win.position})
    return None


__all__ = ["fast_local"]
