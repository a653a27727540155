"""The sliding-window kernel as a ``torch.autograd.Function``: the log-sum-exp is kept from
the forward pass, the block scores are recomputed in the backward pass (FlashAttention, Dao et
al. 2022, Alg. 2 and 4), and the overlapping key tiles' gradients are summed run by run.

Forward: the fused SDPA CPU flash kernel on the block tiles (as ``sliding._fused``), which
also returns the per-row log-sum-exp ℓ_t = log Σ_j exp(s_tj), s_tj = q_t·k_j / √d.
Backward, per run of query blocks, the fused CPU flash backward kernel on the same tiles:

    p_tj = exp(s_tj - ℓ_t)  (0 where the band or the mask forbids j)     δ_t = dO_t·O_t
    dV_j = Σ_t p_tj dO_t,   dS_tj = p_tj (dO_t·v_j - δ_t)
    dQ_t = Σ_j dS_tj k_j / √d,   dK_j = Σ_t dS_tj q_t / √d

The backward pass tiles the queries on blocks of its own size (``backward_block``, 192 at
r = 256 where the forward pass uses 32): the row statistics it needs, O and ℓ, do not depend on
the tiling, and the CPU flash backward kernel splits a block's queries in 32s below 192 queries
and in 64s from 192 up, which pays for the wider tiles' extra keys (docs/perf/log-performance.md,
"Blocks of their own for each pass"). Its
(G, nr, L, D) key-tile gradients (tiles overlap by L - b rows) are added into one
(G, padded, D) buffer in ceil(L / b) strided in-place adds (the slices of one offset land on
disjoint rows), so only one run's tile gradients exist at a time, never the sequence-long
(G, nb, L, D) ones that autograd through ``unfold`` builds, zero-fills and folds.

Not a kernel of our own from batched matmuls (``bmm`` on strided tile views, one
exp/mask/δ pass each): its elementwise passes over the (nr, b, L) scores are memory-bound
where the fused kernel keeps each tile in cache (docs/perf/log-performance.md, "Sliding-window
backward pass": tried and dropped).

Legend as in ``sliding``: G = B·H, b block, nr blocks in a run, L = b + W - 1 keys a block
reaches, ℓ log-sum-exp, δ row sums of dO·O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .tiles import Geometry

# the backward pass holds one run's (G, nr, L, D) key and value tile gradients: runs of this
# many queries keep them near 2 · 8 · 10 · 704 · 64 · 4 B = 28 MiB at H = 8, r = 256, b = 192,
# whatever n; longer runs' freshly allocated tile gradients are zero-filled page by page
# (the sweep: docs/perf/log-performance.md, "Blocks of their own for each pass")
BACKWARD_QUERIES = 2048
# the backward pass's largest query block: the kernel's inner query split is 32 below 192
# queries, 64 from 192, and wider blocks waste more keys (the sweep: same section)
BACKWARD_BLOCK = 192

_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_flash_back = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def backward_block(width: int, smallest: int) -> int:
    """The backward pass's query block for a band of ``width`` keys: about the width (a block
    of b reaches b + W - 1 keys), between ``smallest`` (the forward pass's block,
    ``sliding.DEFAULT_BLOCK``) and ``BACKWARD_BLOCK``."""
    return max(smallest, min(BACKWARD_BLOCK, width - 1))


@dataclass
class Plan:
    """The tilings of both passes: the forward geometry and its user-mask tiles, the backward
    geometry (``back``, may be ``fwd`` itself), and the user mask with the inputs' leading
    shape to tile it for ``back`` when the backward pass runs."""

    fwd: Geometry
    user: Tensor | None  # (1|G, nb, b|1, L|1) tiles of the forward geometry
    back: Geometry
    mask: Tensor | None  # broadcastable to (*lead, Tq, Tk)
    lead: torch.Size
    chunk: int  # the forward pass's run of queries (``sliding.CHUNK_QUERIES``)

    def back_user(self) -> Tensor | None:
        """User-mask tiles of the backward geometry."""
        if self.mask is None or self.back is self.fwd:
            return self.user
        return self.back.mask_tiles(self.mask, self.lead)

    def back_lse(self, lse: Tensor) -> Tensor:
        """Forward log-sum-exp (G, nb, b) -> the backward blocks' (G, nb', b'); rows past Tq
        get 0 (their query, output and incoming gradient are zero: they add nothing)."""
        if self.back is self.fwd:
            return lse
        g, back = lse.shape[0], self.back
        rows = lse.reshape(g, -1)[:, : back.tq]  # (G, Tq)
        rows = torch.nn.functional.pad(rows, (0, back.nb * back.b - back.tq))
        return rows.view(g, back.nb, back.b)


def runs(geo: Geometry, queries: int) -> list[tuple[int, int, bool]]:
    """(start, stop, interior) block runs: the edge runs, and the interior in runs of about
    ``queries`` queries."""
    step = max(1, queries // geo.b)
    inner = [(i, min(i + step, geo.i1), True) for i in range(geo.i0, geo.i1, step)]
    return [r for r in [(0, geo.i0, False), *inner, (geo.i1, geo.nb, False)] if r[1] > r[0]]


def run_mask(
    geo: Geometry, start: int, stop: int, interior: bool, user: Tensor | None, device: Any
) -> Tensor:
    """Bool "may attend" of blocks [start, stop): (b, L) shared, or (1|G, nr, b, L)."""
    m = geo.band.to(device) if interior else geo.edge_mask(start, stop, device)
    if user is None:
        return m
    return m & (user if user.shape[1] == 1 else user[:, start:stop])  # 1: broadcast blocks


def place_rows(context: Tensor, out: Tensor, geo: Geometry, start: int, stop: int) -> None:
    """context (G, Tq, Dv)[rows of blocks [start, stop)] = out (G, nr, b, Dv): one strided
    copy (the kernel's output is laid out (G, b, nr, Dv)), the padded rows dropped."""
    rows = min(geo.tq, stop * geo.b) - start * geo.b
    dst = context[:, start * geo.b : start * geo.b + rows]  # (G, rows, Dv)
    if rows == (stop - start) * geo.b:
        dst.view(context.shape[0], stop - start, geo.b, -1).copy_(out)
    else:
        dst.copy_(out.reshape(context.shape[0], -1, out.shape[-1])[:, :rows])


def _bias(m: Tensor, check: bool, dtype: torch.dtype) -> tuple[Tensor, Tensor | None]:
    """Bool mask -> the float mask the fused kernel takes (0 or -inf, in the inputs' dtype),
    and ``ok`` (.., b, 1), whether a row has an allowed key, when ``check``: a row with none
    attends everywhere there and is zeroed after (never NaN)."""
    ok = m.any(dim=-1, keepdim=True) if check else None  # no host sync either way
    allowed = m if ok is None else m | ~ok
    bias = torch.zeros(allowed.shape, dtype=dtype, device=m.device)
    return bias.masked_fill_(~allowed, -math.inf), ok


class SlidingWindowFunction(torch.autograd.Function):
    """q (G, Tq, D), k (G, Tk, D), v (G, Tk, Dv), the plan of both passes' tilings
    -> context (G, Tq, Dv), zero on rows with no allowed key."""

    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, plan: Plan) -> Tensor:
        geo, user = plan.fwd, plan.user
        lses = []
        context = v.new_empty(q.shape[0], geo.tq, v.shape[-1])  # (G, Tq, Dv)
        scale, width = 1.0 / math.sqrt(q.shape[-1]), max(q.shape[-1], v.shape[-1])
        qw, kw, vw = (_widen(x, width) for x in (q, k, v))  # the fused kernel wants D == Dv
        for start, stop, interior in runs(geo, plan.chunk):
            m = run_mask(geo, start, stop, interior, user, q.device)
            bias, ok = _bias(m, not interior or user is not None, q.dtype)  # (b, L) | (.., L)
            qt = geo.query_tiles(qw, start, stop)  # (G, nr, b, D)
            kt, vt = geo.key_tiles(kw, start, stop), geo.key_tiles(vw, start, stop)
            out, lse = _flash(qt, kt, vt, 0.0, False, attn_mask=bias, scale=scale)
            out = out[..., : v.shape[-1]]  # (G, nr, b, Dv); lse (G, nr, b)
            if ok is not None:
                out = torch.where(ok, out, torch.zeros((), dtype=out.dtype, device=out.device))
            place_rows(context, out, geo, start, stop)
            lses.append(lse)
        ctx.plan = plan
        ctx.save_for_backward(q, k, v, context, torch.cat(lses, dim=1))  # lse (G, nb, b)
        return context

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v, context, lse = ctx.saved_tensors
        plan = ctx.plan
        lse = plan.back_lse(lse)  # (G, nb', b') on the backward blocks
        dq, dk, dv = _backward(
            q, k, v, context, lse, grad.contiguous(), plan.back, plan.back_user()
        )
        return dq, dk, dv, None


def _widen(x: Tensor, width: int) -> Tensor:
    """Zero columns up to ``width`` (they change no score and no context), or x itself."""
    return x if x.shape[-1] == width else torch.nn.functional.pad(x, (0, width - x.shape[-1]))


def _backward(
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, do: Tensor,
    geo: Geometry, user: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """(dQ, dK, dV) of the saved q, k, v (G, T, .), context o (G, Tq, Dv), lse (G, nb, b)
    for the incoming gradient do (G, Tq, Dv): the fused CPU flash backward, run by run."""
    g, b, scale = q.shape[0], geo.b, 1.0 / math.sqrt(q.shape[-1])
    width, dvw = max(q.shape[-1], v.shape[-1]), v.shape[-1]
    qw, kw, vw, ow, dow = (_widen(x, width) for x in (q, k, v, o, do))
    dq = torch.empty(g, q.shape[1], width, dtype=q.dtype, device=q.device)  # (G, Tq, D)
    dk = torch.zeros(g, geo.padded, width, dtype=q.dtype, device=q.device)  # padded keys
    dv = torch.zeros(g, geo.padded, width, dtype=q.dtype, device=q.device)
    for start, stop, interior in runs(geo, BACKWARD_QUERIES):
        m = run_mask(geo, start, stop, interior, user, q.device)
        bias, ok = _bias(m, not interior or user is not None, q.dtype)  # (b, L) | (.., L)
        qt, ot, dot = (geo.query_tiles(x, start, stop) for x in (qw, ow, dow))  # (G, nr, b, .)
        if ok is not None:
            dot = torch.where(ok, dot, torch.zeros((), dtype=dot.dtype, device=dot.device))
        kt, vt = geo.key_tiles(kw, start, stop), geo.key_tiles(vw, start, stop)  # (G,nr,L,.)
        gq, gk, gv = _flash_back(
            dot, qt, kt, vt, ot, lse[:, start:stop], 0.0, False, attn_mask=bias, scale=scale
        )
        rows = min(geo.tq, stop * b) - start * b
        dq[:, start * b : start * b + rows] = gq.reshape(g, -1, width)[:, :rows]
        _fold_add(dk, gk, geo, start)
        _fold_add(dv, gv, geo, start)
    dk, dv = _unpad(dk, geo)[..., : k.shape[-1]], _unpad(dv, geo)[..., :dvw]
    return dq[..., : q.shape[-1]], dk, dv


def _fold_add(acc: Tensor, tiles: Tensor, geo: Geometry, start: int) -> None:
    """acc (G, padded, D) += the overlapping tiles (G, nr, L, D) of blocks from ``start``:
    tile i covers padded rows [(start + i)·b, (start + i)·b + L). Slice j (rows j·b .. of
    every tile) lands on disjoint rows, so each is one strided in-place add."""
    g, nr, big_l, d = tiles.shape
    b, sg = geo.b, acc.stride(0)
    for j in range(0, big_l, b):
        w = min(b, big_l - j)
        view = acc.as_strided((g, nr, w, d), (sg, b * d, d, 1), (start * b + j) * d)
        view.add_(tiles[:, :, j : j + w])


def _unpad(x: Tensor, geo: Geometry) -> Tensor:
    """Padded key rows (G, padded, D) -> (G, Tk, D): row r is key 0; keys past the last
    tile's reach get zero."""
    rows = x[:, geo.r : geo.r + geo.tk]
    if rows.shape[1] == geo.tk:
        return rows  # a view: no copy of the sequence-long gradient
    return torch.nn.functional.pad(rows, (0, 0, 0, geo.tk - rows.shape[1]))


__all__ = [
    "BACKWARD_BLOCK",
    "BACKWARD_QUERIES",
    "Plan",
    "SlidingWindowFunction",
    "backward_block",
    "place_rows",
    "run_mask",
    "runs",
]
