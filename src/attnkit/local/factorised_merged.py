"""The Sparse Transformer's merged patterns (Child et al. 2019, §4.2-4.3: every head attends
A⁽¹⁾ ∪ A⁽²⁾) in O(n·√n): the two parts made disjoint (A⁽²⁾ loses the keys A⁽¹⁾ holds) and
each computed on the blocks it reaches as partial softmax sums (m, Σ e^{s−m}, Σ e^{s−m} v),
then combined exactly:

    c_i = (e^{m¹−M} Σ_{A⁽¹⁾} e^{s−m¹} v + e^{m²−M} Σ_{A⁽²⁾∖A⁽¹⁾} e^{s−m²} v)
          / (e^{m¹−M} Σ_{A⁽¹⁾} e^{s−m¹} + e^{m²−M} Σ_{A⁽²⁾∖A⁽¹⁾} e^{s−m²}),  M = max(m¹, m²)

    strided A⁽¹⁾          query blocks of l against the keys of blocks b−1 .. b+1   O(n·l)
    strided A⁽²⁾ ∖ A⁽¹⁾   residue classes (rows of the transposed (n/l, l) view), keys
                          two or more steps of l away                             O(n·n/l)
    fixed   A⁽¹⁾          SDPA's blocks of l, as partial sums                      O(n·l)
    fixed   A⁽²⁾ ∖ A⁽¹⁾   the summary keys of the other blocks                     O(n·c·n/l)

    merged_attention(query (..., n, D), keys (..., n, D), values (..., n, Dv), spec,
                     mask (..., 1, n) or None) -> context (..., n, Dv)

A query with no allowed key gets a zero context. Legend as ``attnkit.local.factorised``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..stages.sparse import PatternSpec

Partial = tuple[Tensor, Tensor, Tensor]  # m (.., Tq, 1), Σ e^{s-m} (.., Tq, 1), Σ e^{s-m} v


def merged_attention(
    query: Tensor, keys: Tensor, values: Tensor, spec: PatternSpec, mask: Tensor | None = None
) -> Tensor:
    """Context (..., n, Dv) of the merged pattern ``spec`` (see the module docstring)."""
    n = query.shape[-2]
    if spec.split_heads or keys.shape[-2] != n:
        raise ValueError("merged_attention runs a merged pattern over as many keys as queries; "
                         "use factorised_attention for split heads")  # fmt: skip
    key_ok = None if mask is None else mask.expand(*query.shape[:-2], 1, n)  # (..., 1, n)
    if spec.pattern == "strided":
        first, second = _strided_band(query, keys, values, spec, key_ok), _strided_far(
            query, keys, values, spec, key_ok)  # fmt: skip
    else:
        first, second = _fixed_block(query, keys, values, spec, key_ok), _fixed_other(
            query, keys, values, spec, key_ok)  # fmt: skip
    return _combine(first, second)


def _partial(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor) -> Partial:
    """Softmax's partial sums over the allowed keys: m (the row's max score, detached: the
    result does not depend on it), Σ e^{s−m}, Σ e^{s−m} v; an empty row gives zeros."""
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (..., Tq, K)
    if k.shape[-2] == 0:  # no key at all (fixed, n < l − c + 1): an empty part
        zero = s.new_zeros(*s.shape[:-1], 1)  # (..., Tq, 1)
        return zero, zero, (s @ v) * 0  # (..., Tq, Dv) zeros
    s = s.masked_fill(~allowed, -math.inf)
    m = s.amax(-1, keepdim=True).detach()  # (..., Tq, 1)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)  # (..., Tq, K): 0 where masked
    return m, e.sum(-1, keepdim=True), e @ v  # (..., Tq, 1), (..., Tq, 1), (..., Tq, Dv)


def _combine(a: Partial, b: Partial) -> Tensor:
    """The exact softmax over two disjoint key sets from their partial sums."""
    (ma, da, na), (mb, db, nb) = a, b
    ma = torch.where(da > 0, ma, torch.full_like(ma, -math.inf))  # an empty part weighs 0
    mb = torch.where(db > 0, mb, torch.full_like(mb, -math.inf))
    top = torch.maximum(ma, mb)  # (..., n, 1)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    wa, wb = torch.exp(ma - top), torch.exp(mb - top)  # (..., n, 1)
    den = wa * da + wb * db  # (..., n, 1)
    safe = torch.where(den > 0, den, torch.ones_like(den))
    return (wa * na + wb * nb) / safe  # (..., n, Dv); zero where no key is allowed


def _keys_ok(key_ok: Tensor | None, n: int, device: torch.device) -> Tensor:
    return torch.ones(1, n, dtype=torch.bool, device=device) if key_ok is None else key_ok


def _strided_band(q: Tensor, k: Tensor, v: Tensor, spec: PatternSpec,
                  key_ok: Tensor | None) -> Partial:  # fmt: skip
    """A⁽¹⁾: query block b (R blocks of l) against the keys of blocks b − 1 .. b + 1."""
    n, step = q.shape[-2], spec.stride
    rows = -(-n // step)  # R
    pad = (step, rows * step - n + step)  # l before, to N + l after

    def windows(x: Tensor) -> Tensor:  # (..., n, E) -> (..., R, 3l, E)
        return F.pad(x, (0, 0, *pad)).unfold(-2, 3 * step, step).transpose(-2, -1)

    ok = F.pad(_keys_ok(key_ok, n, q.device), pad, value=False)  # (..., 1, N + 2l)
    ok = ok.unfold(-1, 3 * step, step)  # (..., 1, R, 3l)
    i = torch.arange(rows * step, device=q.device).view(rows, step, 1)  # (R, l, 1)
    j = (torch.arange(rows, device=q.device).view(rows, 1, 1) - 1) * step + torch.arange(
        3 * step, device=q.device)  # fmt: skip  (R, 1, 3l)
    d = i - j  # (R, l, 3l)
    band = (d >= 0) & (d <= step) if spec.causal else d.abs() <= step
    allowed = band & ok.transpose(-3, -2)  # (..., R, l, 3l)
    qb = F.pad(q, (0, 0, 0, rows * step - n)).unflatten(-2, (rows, step))  # (..., R, l, D)
    m, den, num = _partial(qb, windows(k), windows(v), allowed)
    return tuple(x.flatten(-3, -2)[..., :n, :] for x in (m, den, num))  # type: ignore[return-value]


def _strided_far(q: Tensor, k: Tensor, v: Tensor, spec: PatternSpec,
                 key_ok: Tensor | None) -> Partial:  # fmt: skip
    """A⁽²⁾ ∖ A⁽¹⁾: keys of i's residue class 2l or more away (causal: before i)."""
    n, step = q.shape[-2], spec.stride
    rows = -(-n // step)

    def by_class(x: Tensor) -> Tensor:  # (..., n, E) -> (..., l, R, E)
        return F.pad(x, (0, 0, 0, rows * step - n)).unflatten(-2, (rows, step)).transpose(-3, -2)

    ok = F.pad(_keys_ok(key_ok, n, q.device), (0, rows * step - n), value=False)  # (.., 1, N)
    ok = ok.unflatten(-1, (rows, step)).movedim(-1, -3)  # (..., l, 1, R)
    a = torch.arange(rows, device=q.device)
    d = a[:, None] - a  # (R, R): (i − j) / l
    far = d >= 2 if spec.causal else d.abs() >= 2
    m, den, num = _partial(by_class(q), by_class(k), by_class(v), ok & far)  # (..., l, R, ·)
    return tuple(x.transpose(-3, -2).flatten(-3, -2)[..., :n, :]
                 for x in (m, den, num))  # type: ignore[return-value]  # fmt: skip


def _fixed_block(q: Tensor, k: Tensor, v: Tensor, spec: PatternSpec,
                 key_ok: Tensor | None) -> Partial:  # fmt: skip
    """A⁽¹⁾: the keys of i's block of l (causal: j <= i)."""
    n, step = q.shape[-2], spec.stride
    rows = -(-n // step)

    def by_block(x: Tensor) -> Tensor:  # (..., n, E) -> (..., R, l, E)
        return F.pad(x, (0, 0, 0, rows * step - n)).unflatten(-2, (rows, step))

    ok = F.pad(_keys_ok(key_ok, n, q.device), (0, rows * step - n), value=False)  # (.., 1, N)
    allowed = ok.unflatten(-1, (rows, step)).transpose(-3, -2)  # (..., R, 1, l)
    if spec.causal:
        allowed = allowed & torch.ones(step, step, dtype=torch.bool, device=q.device).tril()
    m, den, num = _partial(by_block(q), by_block(k), by_block(v), allowed)  # (..., R, l, ·)
    return tuple(x.flatten(-3, -2)[..., :n, :] for x in (m, den, num))  # type: ignore[return-value]


def _fixed_other(q: Tensor, k: Tensor, v: Tensor, spec: PatternSpec,
                 key_ok: Tensor | None) -> Partial:  # fmt: skip
    """A⁽²⁾ ∖ A⁽¹⁾: the summary keys of the other blocks (causal: the earlier ones)."""
    n, step = q.shape[-2], spec.stride
    cols = torch.arange(n, device=q.device)
    cols = cols[cols % step >= step - spec.summary]  # (S,)
    block = torch.arange(n, device=q.device)[:, None] // step  # (n, 1)
    other = cols // step < block if spec.causal else cols // step != block  # (n, S)
    allowed = _keys_ok(key_ok, n, q.device)[..., cols] & other  # (..., n, S)
    return _partial(q, k[..., cols, :], v[..., cols, :], allowed)


__all__ = ["merged_attention"]
