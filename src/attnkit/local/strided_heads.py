"""The Sparse Transformer's strided pattern split across heads (Child et al. 2019, §4.2-4.3)
wholly on the banded flash kernel (``attnkit.local.native``), every tensor read and written in
place: no copy into class order and back, no stack of the two halves, forward or backward.

    even heads  A⁽¹⁾  0 <= i - j <= l (causal) or |i - j| <= l: a band of radius l along the
                      sequence, on the (L, H/2, n, D) view of every other head
    odd heads   A⁽²⁾  (i - j) mod l = 0 (causal: j <= i): position r·l + c is row r of
                      class c; a band as wide as the class (the whole class) along the
                      (L·H/2, l, R, D) view, rows l·D apart; when l does not divide n
                      (n = R·l + m), two such views: the m classes of R + 1 rows and
                      the l - m of R rows

    strided_heads(query (L, H, n, D), keys (L, H, n, D), values (L, H, n, Dv), l, causal,
                  key_ok (L, H, 1, n) or None) -> context (L, H, n, Dv)

The context and the gradients are allocated once, (L, H, n, ·), on the kernel's block cache
(``cached_empty``: a step takes the blocks the last one freed, already faulted in, instead of
fresh pages every step; ``native.release_cache`` empties it), and each half's kernel writes its
own heads (the even ones, the odd ones in class order) into them; the odd heads' dK, dV are
copied in, not added: only the even heads' are zeroed first (by the kernel). When a gradient
is needed, the forward keeps each half's weights P (``forward_saving``: the band's n·(32 + l)
values per head, the classes' about n·R/2, so O(n·√n) for l ≈ √n) and the backward reads them
(``backward_saved``) instead of recomputing QKᵀ and the exponentials from the lse: memory
spent on time (the paper goes the other way: it recomputes whole attention and feed-forward
blocks in the backward pass to save memory, Child et al. 2019, §5.4). ``KEEP_WEIGHTS``
chooses otherwise. ``applies`` says when this runs
(``factorised.factorised_attention`` falls back to its composed parts otherwise): H even,
CPU float32/float64, the kernel built; any n.

Legend: L flattened leading dims, H heads, n positions, D width, Dv value width, l stride,
R = ⌊n / l⌋ rows of a class (R + 1 for the first n mod l classes).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from . import native

CLASS_BLOCK = 32  # the classes' query block, fastest measured (docs/perf/log-sparse.md, run 4)
BAND_BACKWARD_BLOCK = 32  # the band's backward query block from its saved P (when kept)
KEEP_WEIGHTS: tuple[bool, bool] | None = None
"""Whether the forward keeps P for the backward pass, (band, classes); None (the default):
both, on any number of threads. Measured at n = 16,384, l = 128 (docs/perf/log-sparse.md,
runs 6 and 7): on one thread forward+backward took 231 ms keeping both, 239 keeping the
classes', 249 keeping neither (``scripts/sparse_keep.py``); on two threads, once P lay on
cached blocks (run 7), keeping the band's too took the backward from 64–66 to 58–59 ms, the
forward from 34 to 36–37 ms. (Before the cache the band's P, on fresh pages, gained nothing
on two threads.) The cost is memory: peak forward+backward at n = 16,384 in the bench 105 MiB,
against 53 with the classes' P alone (the band's n·(32 + l) values a head)."""


def keeping() -> tuple[bool, bool]:
    """(band, classes): whether the forward keeps each half's P (``KEEP_WEIGHTS``, else
    both)."""
    if KEEP_WEIGHTS is not None:
        return KEEP_WEIGHTS
    return True, True


def banded(x: Tensor) -> bool:
    """Whether the banded flash kernel runs on x: CPU, float32 or float64, and built."""
    cpu = x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64)
    return cpu and native.kernel() is not None


def applies(q: Tensor, k: Tensor, v: Tensor, step: int) -> bool:
    """Whether ``strided_heads`` runs on these (..., H, n, ·) inputs with stride ``step``."""
    heads, n = q.shape[-3], q.shape[-2]
    same = q.shape == k.shape and q.shape[:-1] == v.shape[:-1]
    alike = all(x.device == q.device and x.dtype == q.dtype for x in (k, v))
    fits = heads % 2 == 0 and n > 0 and step > 0 and q.shape[-1] > 0
    return same and alike and fits and banded(q)


def strided_heads(q: Tensor, k: Tensor, v: Tensor, step: int, causal: bool,
                  key_ok: Tensor | None) -> Tensor:  # fmt: skip
    """Context (..., H, n, Dv) of the strided heads split (see the module docstring), any n;
    key_ok (..., H, 1, n) True = may attend, or None. A query with no allowed key gets
    zeros."""
    heads, n = q.shape[-3], q.shape[-2]
    q4, k4, v4 = (x.reshape(-1, heads, n, x.shape[-1]) for x in (q, k, v))  # (L, H, n, ·)
    keeps = None if key_ok is None else _keeps(key_ok, heads, n, step)
    out = _StridedHeads.apply(q4, k4, v4, step, causal, keeps)  # (L, H, n, Dv)
    return out.view(*q.shape[:-1], v.shape[-1])


def _halves(x: Tensor, step: int) -> list[Tensor]:
    """x (L, H, n, E) -> [the even heads (L, H/2, n, E), then the odd heads' residue classes]:
    position r·l + c of an odd head is row r of class c. With n = R·l the classes are one
    (L·H/2, l, R, E); else, n = R·l + m, the m classes of R + 1 rows (L·H/2, m, R + 1, E) and
    the l − m of R rows (L·H/2, l − m, R, E) when R > 0. Rows l·E apart, views of x when its
    (L, H) dims merge (x contiguous: the outputs and gradients allocated here); else the
    classes are views of a copy (inputs only)."""
    even, odd = x.unflatten(1, (x.shape[1] // 2, 2)).unbind(2)  # (L, H/2, n, E) each
    o = odd.flatten(0, 1)  # (L·H/2, n, E)
    groups, n, width = o.shape
    rows, extra = divmod(n, step)
    if extra == 0:
        return [even, o.unflatten(1, (rows, step)).transpose(1, 2)]  # (L·H/2, l, R, E)
    g, t, e = o.stride()
    first = o.storage_offset()
    parts = [even, o.as_strided((groups, extra, rows + 1, width), (g, t, step * t, e), first)]
    if rows:
        parts.append(o.as_strided((groups, step - extra, rows, width), (g, t, step * t, e),
                                  first + extra * t))  # fmt: skip
    return parts


def _keeps(key_ok: Tensor, heads: int, n: int, step: int) -> list[Tensor]:
    """key_ok (..., H, 1, n) -> the kernel's keep masks, one per part of ``_halves`` (the same
    views of the mask): the even heads' (L·H/2, n), then each group of classes'
    (L·H/2·classes, rows), contiguous bool."""
    parts = _halves(key_ok.reshape(-1, heads, n, 1), step)  # (L, H, n, 1) as one more operand
    return [p.reshape(-1, p.shape[-2]).contiguous() for p in parts]


class _StridedHeads(torch.autograd.Function):
    """q (L, H, n, D), k (L, H, n, D), v (L, H, n, Dv), l, causal, the keep masks, one per
    part of ``_halves`` (or None) -> context (L, H, n, Dv); backward: dq, dk, dv (L, H, n, ·),
    each part's kernel call writing its own heads."""

    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, step: int, causal: bool,
                keeps: list[Tensor] | None) -> Tensor:  # fmt: skip
        module = native._loaded()  # applies() checked that it is built
        out = module.cached_empty([*q.shape[:-1], v.shape[-1]], q)  # (L, H, n, Dv)
        # per part: P (G, S) where kept, else the lse (G, n) the backward recomputes P from
        keep = keeping() if any(ctx.needs_input_grad[:3]) else (False, False)
        kept = []
        for part, (qh, kh, vh, oh) in enumerate(zip(*(_halves(x, step) for x in (q, k, v, out)),
                                                    strict=True)):  # fmt: skip
            radius, block, later = _band(part, qh, step)
            mask = None if keeps is None else keeps[part]
            args = (qh, kh, vh, oh, radius, causal, mask, block)
            if keep[min(part, 1)]:
                kept.append(module.forward_saving(*args, later)[1])
            else:
                kept.append(module.forward_into(*args))
        ctx.save_for_backward(q, k, v, out, *kept)
        ctx.band = (step, causal, keeps, keep)
        return out

    @staticmethod
    @once_differentiable  # the kernel's backward is not differentiable: say so, not a zero
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v, out, *kept = ctx.saved_tensors
        step, causal, keeps, keep = ctx.band
        module = native._loaded()  # applies() checked that it is built
        grad = grad.contiguous()  # (L, H, n, Dv); no copy when it already is
        # every row written by the kernel (dk and dv zeroed by it where it accumulates)
        dq, dk, dv = (module.cached_empty(list(x.shape), x) for x in (q, k, v))  # (L, H, n, ·)
        parts = (_halves(x, step) for x in (grad, q, k, v, out, dq, dk, dv))
        for part, (gh, qh, kh, vh, oh, dqh, dkh, dvh) in enumerate(zip(*parts, strict=True)):
            radius, block, later = _band(part, qh, step)
            mask = None if keeps is None else keeps[part]
            if keep[min(part, 1)]:  # from the forward's P: no QKᵀ, no exponentials
                module.backward_saved(gh, qh, kh, vh, kept[part], dqh, dkh, dvh, radius, causal,
                                      mask, later)  # fmt: skip
            else:  # P recomputed from the lse (FlashAttention)
                module.backward_into(gh, qh, kh, vh, oh, kept[part], dqh, dkh, dvh, radius,
                                     causal, mask, block)  # fmt: skip
        return dq, dk, dv, None, None, None


def _band(part: int, q: Tensor, step: int) -> tuple[int, int, int]:
    """(radius, forward query block, backward query block) of a part of ``_halves``: the even
    heads' band of radius l (``native.BLOCK``, ``BAND_BACKWARD_BLOCK``), a group of classes'
    whole row (``CLASS_BLOCK`` both ways)."""
    if part == 0:
        return step, native.BLOCK, BAND_BACKWARD_BLOCK
    return q.shape[-2], CLASS_BLOCK, CLASS_BLOCK


__all__ = [
    "BAND_BACKWARD_BLOCK",
    "CLASS_BLOCK",
    "KEEP_WEIGHTS",
    "applies",
    "banded",
    "keeping",
    "strided_heads",
]
