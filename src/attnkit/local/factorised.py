"""The Sparse Transformer's factorised patterns split across heads (Child et al. 2019, §4.2-4.3;
the merged ones: ``attnkit.local.factorised_merged``) in O(n·√n) time and memory for a stride
l ≈ √n: only the blocks each part reaches are computed, no (Tq, Tk) tensor is built. Equal
to ``attend(..., align=FactorisedAlignment(spec))`` on its dense path
(``attnkit.stages.sparse``), at the default positions 0 .. n-1 with Tq = Tk.

Head h attends A⁽¹⁾ when h is even and A⁽²⁾ when it is odd:

    strided A⁽¹⁾  0 <= i - j <= l (causal) or |i - j| <= l: the sliding-window kernel, radius l
    strided A⁽²⁾  (i - j) mod l = 0 (causal: j <= i): pad n to a multiple of l, view the
                  sequence as (n/l, l) and transpose, so each residue class is a row of n/l
                  positions, and run the sliding-window kernel with radius n/l (the whole
                  row; SDPA where the banded C++ kernel is not built) along the rows: O(n·n/l)
    fixed   A⁽¹⁾  ⌊j/l⌋ = ⌊i/l⌋ (causal: j <= i): SDPA inside each block of l: O(n·l)
    fixed   A⁽²⁾  j mod l >= l - c (causal: j <= i): the n/l·c summary keys gathered once,
                  every query attends them: O(n·c·n/l)

With H even (CPU, the banded kernel built) the strided split runs in place instead
(``attnkit.local.strided_heads``): no copy into class order, no stack, no padding (when l does
not divide n the classes run in two groups, of R + 1 and of R rows).

    factorised_attention(query (..., H, n, D), keys (..., H, n, D), values (..., H, n, Dv),
                         spec, mask (..., 1, n) or None) -> context (..., H, n, Dv)

A stride l over n + c gives the same sets over n positions as l = n + c (the local part
reaches every key, the strided part only j = i, no summary column lies below n), and is run
as that: a stride of 10^6 at n = 64 pads nothing. The mask is a key-padding mask, True =
may attend; a query with no allowed key gets a zero context (as ``attend``'s fused path:
``sdpa_context``), never NaN.

Legend: H heads, n positions (queries = keys), D width, Dv value width, l stride,
c summary columns, N n padded to a multiple of l (the composed parts), R = N / l rows of l.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor

from ..stages.sparse import PatternSpec
from .factorised_merged import merged_attention
from .sliding import sliding_window_attention
from .strided_heads import CLASS_BLOCK, applies, banded, strided_heads


def _rows(x: Tensor) -> Tensor:
    """x (..., n, D) as the banded kernel reads it in place: unit stride along D and rows at
    least D apart; a copy otherwise (a transposed view, every other feature)."""
    return x if x.stride(-1) == 1 and x.stride(-2) >= x.shape[-1] else x.contiguous()


def factorised_attention(
    query: Tensor, keys: Tensor, values: Tensor, spec: PatternSpec, mask: Tensor | None = None
) -> Tensor:
    """Context (..., H, n, Dv) of the heads-split pattern ``spec`` (``spec.split_heads``):
    even heads through A⁽¹⁾, odd heads through A⁽²⁾ (see the module docstring); a merged
    pattern goes to ``attnkit.local.factorised_merged`` (query (..., n, D), any heads)."""
    if spec.stride > query.shape[-2] + spec.summary:  # the same sets over n positions
        spec = replace(spec, stride=query.shape[-2] + spec.summary)  # and no padding to l
    if not spec.split_heads:
        return merged_attention(query, keys, values, spec, mask)
    n, heads = query.shape[-2], query.shape[-3]
    if query.dim() < 4 or heads < 2 or keys.shape[-2] != n:
        raise ValueError(
            f"query {tuple(query.shape)}, keys {tuple(keys.shape)}: the heads split needs "
            "(..., H, n, D) with H >= 2 and as many keys as queries"
        )
    key_ok = None
    if mask is not None:
        if mask.shape[-2] != 1:
            raise ValueError(f"mask {tuple(mask.shape)}: pass a key-padding mask (..., 1, n)")
        key_ok = mask.expand(*query.shape[:-2], 1, n)  # (..., H, 1, n)
    if spec.pattern == "strided" and applies(query, keys, values, spec.stride):
        query, keys, values = (_rows(x) for x in (query, keys, values))
        return strided_heads(query, keys, values, spec.stride, spec.causal, key_ok)
    first, second = _parts(spec)
    (q0, q1), (k0, k1), (v0, v1) = (_by_parity(x, heads) for x in (query, keys, values))
    m0, m1 = (None, None) if key_ok is None else _by_parity(key_ok, heads)
    out_even = first(q0, k0, v0, spec, m0)  # (..., ⌈H/2⌉, n, Dv)
    out_odd = second(q1, k1, v1, spec, m1)  # (..., ⌊H/2⌋, n, Dv)
    if heads % 2 == 0:  # interleaved back in one copy; its backward is views (unbind)
        return torch.stack((out_even, out_odd), dim=-3).flatten(-4, -3)  # (..., H, n, Dv)
    out = torch.empty(*query.shape[:-1], values.shape[-1], dtype=out_even.dtype,
                      device=query.device)  # fmt: skip
    out[..., 0::2, :, :] = out_even
    out[..., 1::2, :, :] = out_odd
    return out


def _by_parity(x: Tensor, heads: int) -> tuple[Tensor, Tensor]:
    """The even and odd heads of x (..., H, n, E), as views. With H even through
    (..., H/2, 2, n, E) and unbind, whose backward stacks the two gradients in one copy (a
    strided slice's backward fills a zero tensor of x's size, per slice, then adds them)."""
    if heads % 2 == 0:
        even, odd = x.unflatten(-3, (heads // 2, 2)).unbind(-3)  # (..., H/2, n, E) each
        return even, odd
    return x[..., 0::2, :, :], x[..., 1::2, :, :]


Part = Callable[[Tensor, Tensor, Tensor, PatternSpec, "Tensor | None"], Tensor]


def _parts(spec: PatternSpec) -> tuple[Part, Part]:
    if spec.pattern == "strided":
        return _strided_local, _strided_classes
    return _fixed_blocks, _fixed_summary


def _strided_local(q: Tensor, k: Tensor, v: Tensor, spec: PatternSpec,
                   key_ok: Tensor | None) -> Tensor:  # fmt: skip
    """A⁽¹⁾ of strided: the band of radius l, by the sliding-window kernel."""
    return sliding_window_attention(q, k, v, spec.stride, spec.causal, key_ok).context


def _strided_classes(q: Tensor, k: Tensor, v: Tensor, spec: PatternSpec,
                     key_ok: Tensor | None) -> Tensor:  # fmt: skip
    """A⁽²⁾ of strided: i and j in the same residue class mod l; class r is the row
    r, r + l, r + 2l, .. of the transposed (R, l) view, and j <= i is is_causal along it."""
    n, step = q.shape[-2], spec.stride
    rows = -(-n // step)  # R

    def by_class(x: Tensor) -> Tensor:  # (..., n, E) -> (..., l, R, E)
        x = F.pad(x, (0, 0, 0, rows * step - n)) if rows * step > n else x  # (..., N, E)
        return x.unflatten(-2, (rows, step)).transpose(-3, -2)  # (..., l, R, E)

    qc, kc, vc = by_class(q), by_class(k), by_class(v)  # (..., l, R, ·)
    if banded(q):  # the whole class is a band of radius R: the banded flash kernel
        return _classes_on_band(qc, kc, vc, spec, key_ok, n)
    if spec.causal and key_ok is None:
        # padded positions close each class: a real query never reaches them under j <= i,
        # so SDPA's own causal rule is the pattern (no mask: its fused kernel skips the blocks
        # above the diagonal)
        out = _fused(qc, kc, vc, None, causal=True)  # (..., l, R, Dv)
        return _first(out.transpose(-3, -2).flatten(-3, -2), n)  # (..., n, Dv)
    allowed = _keys_allowed(key_ok, n, rows * step, q.device)  # (..., 1, N) or None
    if allowed is not None:
        allowed = allowed.unflatten(-1, (rows, step)).movedim(-1, -3)  # (..., l, 1, R)
    if spec.causal:
        earlier = torch.ones(rows, rows, dtype=torch.bool, device=q.device).tril()  # (R, R)
        allowed = earlier if allowed is None else allowed & earlier  # (..., l, R, R)
    out = _sdpa(qc, kc, vc, allowed)  # (..., l, R, Dv)
    return _first(out.transpose(-3, -2).flatten(-3, -2), n)  # (..., n, Dv)


def _classes_on_band(qc: Tensor, kc: Tensor, vc: Tensor, spec: PatternSpec,
                     key_ok: Tensor | None, n: int) -> Tensor:  # fmt: skip
    """A⁽²⁾ of strided on the class rows (..., l, R, ·): within a row every key is in reach of
    a band of radius R (j <= i along it when causal), so the banded kernel computes it, padded
    keys and ``key_ok`` as its key mask (causal with no mask: padded keys close each row and a
    real query never reaches them)."""
    step, rows = qc.shape[-3], qc.shape[-2]
    allowed = None
    if not spec.causal or key_ok is not None:
        allowed = _keys_allowed(key_ok, n, rows * step, qc.device)  # (..., 1, N) or None
    if allowed is not None:
        allowed = allowed.unflatten(-1, (rows, step)).movedim(-1, -3)  # (..., l, 1, R)
    out = sliding_window_attention(qc, kc, vc, rows, spec.causal, allowed,
                                   block=CLASS_BLOCK).context  # (..., l, R, Dv)  # fmt: skip
    return _first(out.transpose(-3, -2).flatten(-3, -2), n)  # (..., n, Dv)


def _fixed_blocks(q: Tensor, k: Tensor, v: Tensor, spec: PatternSpec,
                  key_ok: Tensor | None) -> Tensor:  # fmt: skip
    """A⁽¹⁾ of fixed: SDPA inside each block of l (j <= i within it when causal)."""
    n, step = q.shape[-2], spec.stride
    rows = -(-n // step)  # R blocks

    def by_block(x: Tensor) -> Tensor:  # (..., n, E) -> (..., R, l, E)
        x = F.pad(x, (0, 0, 0, rows * step - n)) if rows * step > n else x  # (..., N, E)
        return x.unflatten(-2, (rows, step))

    if spec.causal and key_ok is None:  # padded keys close the last block: is_causal is j <= i
        out = _fused(by_block(q), by_block(k), by_block(v), None, causal=True)  # (..., R, l, Dv)
        return _first(out.flatten(-3, -2), n)  # (..., n, Dv)

    allowed = _keys_allowed(key_ok, n, rows * step, q.device)  # (..., 1, N) or None
    if allowed is not None:
        allowed = allowed.unflatten(-1, (rows, step)).transpose(-3, -2)  # (..., R, 1, l)
    if spec.causal:
        earlier = torch.ones(step, step, dtype=torch.bool, device=q.device).tril()  # (l, l)
        allowed = earlier if allowed is None else allowed & earlier  # (..., R, l, l)
    out = _sdpa(by_block(q), by_block(k), by_block(v), allowed)  # (..., R, l, Dv)
    return _first(out.flatten(-3, -2), n)  # (..., n, Dv)


def _fixed_summary(q: Tensor, k: Tensor, v: Tensor, spec: PatternSpec,
                   key_ok: Tensor | None) -> Tensor:  # fmt: skip
    """A⁽²⁾ of fixed: the summary keys S = {j < n : j mod l >= l - c}, gathered once."""
    n, step = q.shape[-2], spec.stride
    cols = torch.arange(n, device=q.device)  # (n,)
    cols = cols[cols % step >= step - spec.summary]  # (S,)
    allowed = None if key_ok is None else key_ok[..., cols]  # (..., 1, S)
    if spec.causal:
        before = cols <= torch.arange(n, device=q.device)[:, None]  # (n, S)
        allowed = before if allowed is None else allowed & before  # (..., n, S)
    return _sdpa(q, k[..., cols, :], v[..., cols, :], allowed)  # (..., n, Dv)


def _first(x: Tensor, n: int) -> Tensor:
    """x (..., N, E) without its padded rows: (..., n, E); x itself when N = n (a slice's
    backward would fill and copy a gradient of x's size)."""
    return x if x.shape[-2] == n else x[..., :n, :]


def _keys_allowed(
    key_ok: Tensor | None, n: int, padded: int, device: torch.device
) -> Tensor | None:
    """The key-padding mask (..., 1, n) extended with False to N keys, or None when no key
    is masked and none is padded."""
    if key_ok is None and padded == n:
        return None
    if key_ok is None:
        ok = torch.ones(n, dtype=torch.bool, device=device)
        return F.pad(ok, (0, padded - n), value=False)[None]  # (1, N)
    return F.pad(key_ok, (0, padded - n), value=False)  # (..., 1, N)


def _sdpa(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> Tensor:
    """softmax(qkᵀ/√d) v over the allowed keys; a query with none gets a zero context (the
    rule of ``attnkit.core.sdpa_context``)."""
    if allowed is None:
        return _fused(q, k, v, None)
    row_ok = allowed.any(dim=-1, keepdim=True)  # (..., Tq, 1)
    safe = allowed | ~row_ok  # a fully masked row attends everywhere, then is zeroed
    out = _fused(q, k, v, safe)  # (..., Tq, Dv)
    return torch.where(row_ok, out, torch.zeros((), dtype=out.dtype, device=out.device))


def _fused(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None,
           causal: bool = False) -> Tensor:  # fmt: skip
    """SDPA on its fused (flash) CPU kernel, which takes 4-D inputs and a 2-D or 4-D mask only
    (else it falls back to the math path, which builds every score): the leading dims are
    flattened to (L, 1, ·, ·) and a mask with leading dims expanded to match them.
    ``causal``: SDPA's is_causal (j <= i along the rows), with no mask."""
    lead, tq = q.shape[:-2], q.shape[-2]
    if len(lead) == 2 and (allowed is None or allowed.dim() in (2, 4)):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, is_causal=causal)
    q4, k4, v4 = (x.reshape(-1, 1, *x.shape[-2:]) for x in (q, k, v))  # (L, 1, ·, ·)
    if allowed is not None and allowed.dim() != 2:
        allowed = allowed.expand(*lead, tq, k.shape[-2]).reshape(-1, 1, tq, k.shape[-2])
    out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=allowed, is_causal=causal)
    return out.reshape(*lead, tq, v.shape[-1])  # (..., Tq, Dv)


__all__ = ["factorised_attention"]
