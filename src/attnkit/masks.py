"""Boolean masks. One polarity everywhere: True = may attend (as SDPA and FlexAttention).

Legend: B batch, Tq queries, Tk keys. Every mask broadcasts against scores (..., Tq, Tk);
``None`` means "everything allowed". Masks as functions of positions (``document``,
``prefix``, ``global_tokens``, ``causal``, ``band``), which ``attend`` takes as they are and
``&`` / ``|`` compose, are in ``attnkit.mask_mods``; ``and_masks`` / ``or_masks`` compose them
with tensors too.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .mask_mods import AndMask, MaskMod, OrMask, as_mod
from .mask_mods import document as document  # re-exported: attnkit.masks.document
from .mask_mods import global_tokens as global_tokens
from .mask_mods import prefix as prefix


def padding_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """Keys at positions >= length are padding: returns (B, 1, Tk), True = real key.

    ``lengths`` is (B,) of ints. ``max_len`` defaults to ``lengths.max()``.
    """
    if not isinstance(lengths, Tensor) or lengths.dim() != 1:
        raise ValueError("lengths must be a 1-D integer tensor (B,)")
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must be integers, got {lengths.dtype}")
    if bool((lengths < 0).any()):
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    tk = int(lengths.max()) if max_len is None else max_len
    if bool((lengths > tk).any()):
        raise ValueError(f"a length exceeds max_len={tk}: {lengths.tolist()}")
    positions = torch.arange(tk, device=lengths.device)  # (Tk,)
    return (positions[None, :] < lengths[:, None])[:, None, :]  # (B, 1, Tk)


def from_key_padding_mask(key_padding_mask: Tensor) -> Tensor:
    """Convert ``nn.MultiheadAttention``'s key_padding_mask (B, Tk), True = IGNORE,
    into an attnkit mask (B, 1, Tk), True = may attend."""
    if key_padding_mask.dtype != torch.bool:
        raise TypeError(
            f"key_padding_mask has dtype {key_padding_mask.dtype}; expected bool (True = ignore)"
        )
    return ~key_padding_mask[..., None, :]


def window_mask(
    positions: Tensor, keys: int | Tensor, radius: int | None = None, *, causal: bool = False
) -> Tensor:
    """The one band formula: a query at position p may attend key j when |p - j| <= r, or
    with ``causal`` when 0 <= p - j <= r (Vaswani 2017, Table 1 "restricted"; ``radius=None``:
    no bound, so causal alone is j <= p).

    positions (..., Tq), integer or real; keys: Tk (keys 0 .. Tk-1) or key indices
    broadcastable to (..., Tq, W) -> bool (..., Tq, Tk | W), True = may attend.
    """
    if radius is not None and radius < 0:
        raise ValueError(f"radius={radius} is negative; a window radius must be >= 0")
    if isinstance(keys, int):
        keys = torch.arange(keys, device=positions.device)  # (Tk,)
    dist = positions[..., None] - keys.to(positions.dtype)  # (..., Tq, Tk|W)
    if causal:
        return (dist >= 0) if radius is None else (dist >= 0) & (dist <= radius)
    if radius is None:
        return torch.ones_like(dist, dtype=torch.bool)
    return dist.abs() <= radius  # (..., Tq, Tk|W)


def causal_mask(tq: int, tk: int | None = None, *, device: torch.device | None = None) -> Tensor:
    """Query i may attend keys j <= i (top-left aligned, as SDPA's ``is_causal``): (Tq, Tk)."""
    tk = tq if tk is None else tk
    return window_mask(torch.arange(tq, device=device), tk, causal=True)  # (Tq, Tk)


def band_mask(
    tq: int,
    tk: int,
    radius: int,
    *,
    causal: bool = False,
    device: torch.device | None = None,
) -> Tensor:
    """Restricted attention (Vaswani 2017, Table 1 "restricted"): |i - j| <= r, or
    0 <= i - j <= r for a causal look-back. Returns (Tq, Tk); ``window_mask`` for queries at
    other positions."""
    if radius < 0:
        raise ValueError(f"radius={radius} is negative; a window radius must be >= 0")
    return window_mask(torch.arange(tq, device=device), tk, radius, causal=causal)  # (Tq, Tk)


def and_masks(*masks: Tensor | None) -> Tensor | None:
    """Allowed where every mask allows. ``None`` (all allowed) is the identity. With a mask
    function among them (``attnkit.mask_mods``) the result is a mask function."""
    given = [m for m in masks if m is not None]
    if any(isinstance(m, MaskMod) for m in given):
        return AndMask(tuple(as_mod(m) for m in given))  # type: ignore[return-value]
    out: Tensor | None = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out


def or_masks(*masks: Tensor | None) -> Tensor | None:
    """Allowed where any mask allows. A ``None`` (all allowed) makes the result ``None``.
    With a mask function among them (``attnkit.mask_mods``) the result is a mask function."""
    if not masks or any(m is None for m in masks):
        return None
    if any(isinstance(m, MaskMod) for m in masks):
        return OrMask(tuple(as_mod(m) for m in masks if m is not None))  # type: ignore[return-value]
    out = masks[0]
    assert out is not None
    for m in masks[1:]:
        assert m is not None
        out = out | m
    return out


def describe(mask: Tensor | None, max_size: int = 16) -> str:
    """A small picture of a 2-D mask: '#' may attend, '.' may not."""
    if mask is None:
        return "<all keys allowed>"
    m = mask
    while m.dim() > 2:
        m = m[0]
    m = m[:max_size, :max_size]
    rows = ["".join("#" if bool(v) else "." for v in row) for row in m]
    return "\n".join(rows)
