"""Where the sliding-window kernel's query blocks, key tiles and masks lie
(``attnkit.local.sliding`` computes on them, ``sliding_grad`` differentiates them).

Legend as in ``sliding``: G flattened leading dims, b block, nb blocks, L = b + W - 1 keys a
block reaches, W band width, r radius.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..masks import window_mask


class Geometry:
    """Where the blocks, their key tiles and their masks lie."""

    def __init__(
        self, tq: int, tk: int, r: int, causal: bool, b: int, device: torch.device | None = None
    ) -> None:
        width = r + 1 if causal else 2 * r + 1
        self.tq, self.tk, self.r, self.width, self.b = tq, tk, r, width, b
        self.nb = -(-tq // b)
        self.L = b + width - 1
        self.padded = (self.nb - 1) * b + self.L  # padded key length the tiles cover
        # in a tile, key c sits at c - r relative to the block start: query a is at a + r
        # built where the inputs are: a copy to the GPU per call would wait for the device
        pos = torch.arange(b, device=device) + r  # (b,)
        self.band = window_mask(pos, self.L, r, causal=causal)  # (b, L), shared
        # blocks [i0, i1) reach only existing keys and hold no padded query: no edge mask, and
        # their query and key tiles are views of the inputs, no copy
        self.i0 = min(self.nb, -(-r // b))
        self.i1 = max(self.i0, min(tq // b, (tk + r - self.L) // b + 1))

    def pad_keys(self, x: Tensor, value: float | bool = 0.0) -> Tensor:
        """(..., Tk, D) -> (..., padded, D): r slots in front, the tail padded or cut."""
        return window_rows(x, -self.r, self.padded - self.r, value)

    def query_tiles(self, q: Tensor, start: int, stop: int) -> Tensor:
        """Queries of blocks [start, stop): (G, Tq, D) -> (G, nr, b, D), padded at the end."""
        rows = window_rows(q, start * self.b, stop * self.b)  # (G, nr·b, D)
        return rows.view(q.shape[0], stop - start, self.b, q.shape[-1])

    def key_tiles(self, x: Tensor, start: int, stop: int) -> Tensor:
        """Keys blocks [start, stop) reach: (G, Tk, D) -> (G, nr, L, D), overlapping strided
        views (``unfold``) of the keys, padded only where a tile hangs over an end."""
        lo = start * self.b - self.r
        rows = window_rows(x, lo, lo + (stop - start - 1) * self.b + self.L)  # (G, ., D)
        return rows.unfold(1, self.L, self.b).transpose(-1, -2)  # (G, nr, L, D)

    def edge_mask(self, start: int, stop: int, device: torch.device) -> Tensor:
        """Band AND "the key exists" for blocks [start, stop): (1, nr, b, L), 4-D (a 3-D mask
        sends SDPA to its unfused math path)."""
        i = torch.arange(start, stop, device=device)[:, None, None]  # (nr, 1, 1)
        pos = i * self.b - self.r + torch.arange(self.L, device=device)  # (nr, 1, L)
        return (self.band.to(device) & (pos >= 0) & (pos < self.tk))[None]  # (1, nr, b, L)

    def mask_tiles(self, mask: Tensor, lead: torch.Size) -> Tensor:
        """A user mask broadcastable to (*lead, Tq, Tk) -> tiles (1|G, nb, b|1, L|1)."""
        m = full_rank(mask, lead)  # (..., Tq|1, Tk|1)
        mlead, (mq, mk) = m.shape[:-2], m.shape[-2:]
        qpad = self.nb * self.b - self.tq
        if mk == 1:  # a query mask (..., Tq|1, 1)
            if mq == 1:
                t = m.reshape(*mlead, 1, 1, 1)
            else:
                t = F.pad(m, (0, 0, 0, qpad), value=False).reshape(*mlead, self.nb, self.b, 1)
        elif mq == 1:  # a key padding mask (..., 1, Tk)
            row = self.pad_keys(m.transpose(-1, -2), value=False)[..., 0]  # (..., padded)
            t = row.unfold(-1, self.L, self.b)[..., None, :]  # (..., nb, 1, L)
        else:  # a full (..., Tq, Tk) mask: read its band through a strided view
            full = self.pad_keys(m.transpose(-1, -2), value=False).transpose(-1, -2)
            full = F.pad(full, (0, 0, 0, qpad), value=False).contiguous()  # (.., nb·b, padded)
            sq, sk = full.stride()[-2:]
            t = full.as_strided(
                (*mlead, self.nb, self.b, self.L),
                (*full.stride()[:-2], (sq + sk) * self.b, sq, sk),
            )  # (..., nb, b, L)
        if math.prod(mlead) == 1:
            return t.reshape(1, *t.shape[-3:])
        return t.expand(*lead, *t.shape[-3:]).reshape(-1, *t.shape[-3:])


def full_rank(mask: Tensor, lead: torch.Size) -> Tensor:
    """A mask broadcastable to (*lead, Tq, Tk) with its missing leading dims as 1s."""
    return mask.reshape((1,) * (len(lead) + 2 - mask.dim()) + tuple(mask.shape))


def window_rows(x: Tensor, lo: int, hi: int, value: float | bool = 0.0) -> Tensor:
    """Rows [lo, hi) of x (..., T, D), rows outside [0, T) filled with ``value``: a view when
    the range lies inside, else one small padded copy."""
    t = x.shape[-2]
    inside = x[..., max(lo, 0) : min(hi, t), :]
    if lo >= 0 and hi <= t:
        return inside
    before, after = max(-lo, 0), max(hi - max(t, lo), 0)
    return F.pad(inside, (0, 0, before, after), value=value)


__all__ = ["Geometry", "full_rank", "window_rows"]
