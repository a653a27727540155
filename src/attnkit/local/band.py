"""The compact band layout of local attention weights, and its expansion to a dense matrix.

A local attention whose query t may reach at most W keys, starting at key ``start_t``, keeps
its weights as ``band (..., Tq, W)``: ``band[..., t, j]`` is the weight of key ``start_t + j``
(zero where that key does not exist or is masked). For a sliding window ``start_t = t + offset``
with one integer offset (-r); for local-p ``start_t`` depends on the predicted position p_t.

Legend: Tq queries, Tk keys, W band width.
"""

from __future__ import annotations

import torch
from torch import Tensor


def band_key_index(start: Tensor | int, num_queries: int, width: int) -> Tensor:
    """Key index of every band slot: (..., Tq, W) from start (..., Tq) or an int offset
    (then ``start_t = t + offset``)."""
    j = torch.arange(width)  # (W,)
    if isinstance(start, int):
        t = torch.arange(num_queries)  # (Tq,)
        return t[:, None] + start + j  # (Tq, W)
    return start[..., None] + j.to(start.device)  # (..., Tq, W)


def band_to_dense(band: Tensor, start: Tensor | int, num_keys: int) -> Tensor:
    """Expand band weights (..., Tq, W) to dense (..., Tq, Tk); for small n only (the dense
    matrix is Tq x Tk). ``start`` is the int offset of a sliding window (``result.offset``) or
    the per-query first key (..., Tq) of local-m / local-p (``result.start``)."""
    tq, width = band.shape[-2], band.shape[-1]
    keys = band_key_index(start, tq, width).to(band.device)  # (..., Tq, W)
    inside = (keys >= 0) & (keys < num_keys)  # (..., Tq, W)
    keys = keys.clamp(0, num_keys - 1)
    lead = torch.broadcast_shapes(band.shape[:-2], keys.shape[:-2])
    values = torch.where(inside, band, torch.zeros((), dtype=band.dtype, device=band.device))
    values = values.expand(*lead, tq, width)  # (..., Tq, W)
    dense = band.new_zeros(*lead, tq, num_keys)  # (..., Tq, Tk)
    return dense.scatter_add(-1, keys.expand(*lead, tq, width), values)  # (..., Tq, Tk)


__all__ = ["band_key_index", "band_to_dense"]
