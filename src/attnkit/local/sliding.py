"""Sliding-window self-attention in O(n·r) time and memory, forward and backward.

    c_t = Σ_{j : |t - j| <= r} softmax_j(q_t·k_j / √d) v_j        (symmetric radius r)
    c_t = Σ_{j : 0 <= t - j <= r} softmax_j(q_t·k_j / √d) v_j      (causal look-back r)

Restricted self-attention (Vaswani 2017, Table 1), the window of Longformer (Beltagy 2020).
The reference semantics are ``attnkit.attend(..., align=SlidingWindow(r, causal))`` (a dense
band mask). Two kernels compute it, neither builds an n x n tensor. On CPU float32/float64
with no mask or a key mask, ``kernel="auto"`` runs the banded flash kernel in C++
(``attnkit.local.native``: per query block, only the contiguous key range it reaches). Elsewhere
(other dtypes and devices, query-dependent masks, weights asked for, or no C++ compiler) it
runs the SDPA tiles:

* the queries are cut in blocks of b; block i can only reach the L = b + W - 1 keys
  [i·b - r, i·b + b + W - 1 - r) (W = 2r + 1, or r + 1 causal);
* those key tiles are overlapping strided *views* (``unfold``) of the padded keys, no copy;
* one bool band mask (b, L) is shared by every interior block (SDPA broadcasts it); only the
  first and last blocks, whose tiles hang over the sequence ends, carry their own mask;
* ``F.scaled_dot_product_attention`` runs its fused kernel (CPU, or CUDA's) on the
  (G, nb, b, D) x (G, nb, L, D) tiles; with gradients needed on the CPU,
  ``sliding_grad.SlidingWindowFunction`` runs the same tiles keeping the log-sum-exp, and its
  backward pass runs ATen's fused CPU flash backward run by run, on query blocks of its own
  size (``backward_block``), and folds the overlapping key-tile gradients itself; on other
  devices autograd differentiates the tiles (SDPA's own backward, then ``unfold``'s).

Legend: G flattened leading dims (B·H), n = Tq queries, Tk keys, D widths, b block,
nb = ceil(Tq / b) blocks, L = b + W - 1 keys a block reaches, W band width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from .._checks import check_mask, check_qkv, check_width, check_window
from ..stages.normalisers import compute_dtype, masked_softmax
from . import native
from .sliding_grad import (
    Plan,
    SlidingWindowFunction,
    backward_block,
    place_rows,
    run_mask,
    runs,
)
from .tiles import Geometry, full_rank

# forward query block: SDPA's CPU kernel on (b, L) tiles is about as fast per computed FLOP at
# b = 32 as at 128 (its inner query split is 32 for either), and L = b + W - 1 wastes fewer
# keys (the sweep: docs/perf/log-performance.md, "Blocks of their own for each pass")
DEFAULT_BLOCK = 32
# interior blocks go to SDPA in runs of this many queries: the backward pass then holds the
# (nb, L, D) key-tile gradients of one run at a time, not of the whole sequence
CHUNK_QUERIES = 8192


@dataclass
class LocalResult:
    """context (..., Tq, Dv); weights in the band layout (..., Tq, W) or None, where
    ``weights[..., t, j]`` is the weight of key ``t + offset + j`` (see
    ``attnkit.local.band_to_dense``); offset = -radius (the radius actually used: a window
    wider than the sequence is clipped to it)."""

    context: Tensor
    weights: Tensor | None
    offset: int
    extras: dict[str, Any] = field(default_factory=dict)


def sliding_window_attention(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    radius: int,
    causal: bool = False,
    mask: Tensor | None = None,
    need_weights: bool = False,
    *,
    block: int | None = None,
    own_backward: bool = True,
    kernel: str = "auto",
) -> LocalResult:
    """Sliding-window scaled-dot attention, equal to
    ``attend(query, keys, values, align=SlidingWindow(radius, causal), mask=mask)``.

    query (..., Tq, D), keys (..., Tk, D), values (..., Tk, Dv); mask bool broadcastable to
    (..., Tq, Tk), True = may attend (a padding mask (B, 1, 1, Tk) or (B, 1, Tk) costs only
    O(n·W); a full (..., Tq, Tk) mask is read on its band only). Fully masked rows give a
    zero context. float32/bfloat16/float16: the fused path computes in the input dtype (as
    attend's fused path); with ``need_weights`` scores and weights are float32 and the weights
    come back in the band layout (..., Tq, W), W = 2r + 1 (r + 1 causal).

    When gradients are needed on the CPU the fused path runs as ``SlidingWindowFunction``
    (log-sum-exp kept, the fused flash backward per run on blocks of its own size,
    ``backward_block``, key-tile gradients folded run by run; it calls ATen's CPU flash
    kernels, so on other devices autograd differentiates the SDPA tiles); ``block`` sets both
    passes' block when given; ``own_backward=False`` lets autograd differentiate SDPA and
    ``unfold`` instead (the earlier path, kept for comparison: ``attnkit.bench.interleave``
    variant ``attnkit-autograd``).

    ``kernel``: "auto" runs the banded flash kernel in C++ (``attnkit.local.native``) where it
    applies (CPU, float32/float64, no weights asked, no mask or a mask that does not depend
    on the query, i.e. broadcastable to (..., 1, Tk)) and was built, else the SDPA tiles;
    "native" requires it (ValueError where it does not apply, RuntimeError if it is not
    built); "tiles" always runs the SDPA tiles. ``block`` also sets the native kernel's
    query block (default ``native.BLOCK``).
    """
    check_qkv(query, keys, values, finite=False)
    check_width("query", query.shape[-1], keys.shape[-1], "sliding-window attention is scaled-dot")
    radius = check_window("radius", radius)
    tq, tk = query.shape[-2], keys.shape[-2]
    lead = query.shape[:-2]
    check_mask(mask, (*lead, tq, tk), query.device)
    r = min(radius, (tq - 1) if causal else max(tq, tk) - 1)
    r = max(r, 0)
    if tq == 0:
        return LocalResult(values.new_zeros(*lead, 0, values.shape[-1]), None, -r)
    if block is not None and block < 1:
        raise ValueError(f"block={block} must be >= 1")
    use_native, keep = _native_keep(query, mask, lead, tk, need_weights, own_backward, kernel)
    if use_native:
        ctx = native.band_attention(  # rows contiguous, any stride along G: no copy of a view
            native.rows(query.reshape(-1, tq, query.shape[-1])),  # (G, Tq, D)
            native.rows(keys.reshape(-1, tk, keys.shape[-1])),  # (G, Tk, D)
            native.rows(values.reshape(-1, tk, values.shape[-1])),  # (G, Tk, Dv)
            r, causal, keep, block or native.BLOCK,
        )[0]  # fmt: skip
        return LocalResult(ctx.reshape(*lead, tq, -1), None, -r)
    b = min(block or DEFAULT_BLOCK, tq)
    geo = Geometry(tq, tk, r, causal, b, query.device)
    # the backward pass tiles on its own (larger) blocks unless ``block`` fixes both
    bb = min(backward_block(geo.width, DEFAULT_BLOCK), tq)
    back = geo if block or bb == b else Geometry(tq, tk, r, causal, bb, query.device)

    q = query.reshape(-1, tq, query.shape[-1])  # (G, Tq, D)
    k = keys.reshape(-1, tk, keys.shape[-1])  # (G, Tk, D)
    v = values.reshape(-1, tk, values.shape[-1])  # (G, Tk, Dv)
    user = None if mask is None else geo.mask_tiles(mask, lead)  # (1|G, nb, b|1, L|1)
    if need_weights:
        ctx, band = _explicit(q, k, v, geo, user)  # (G, Tq, Dv), (G, Tq, W)
        weights: Tensor | None = band.reshape(*lead, tq, geo.width)
    elif (
        own_backward and q.device.type == "cpu" and torch.is_grad_enabled()
        and any(x.requires_grad for x in (q, k, v))
    ):  # fmt: skip
        plan = Plan(geo, user, back, mask, lead, CHUNK_QUERIES)
        ctx, weights = SlidingWindowFunction.apply(q, k, v, plan), None  # (G, Tq, Dv)
    else:
        ctx, weights = _fused(q, k, v, geo, user), None  # (G, Tq, Dv)
    return LocalResult(ctx.reshape(*lead, tq, -1).to(values.dtype), weights, -r)


def _native_keep(
    query: Tensor, mask: Tensor | None, lead: torch.Size, tk: int, need_weights: bool,
    own_backward: bool, kernel: str,
) -> tuple[bool, Tensor | None]:  # fmt: skip
    """Whether the native kernel runs, and its keep mask: (1|G, Tk) bool, or None (no
    mask)."""
    if kernel not in ("auto", "native", "tiles"):
        raise ValueError(f"kernel={kernel!r}: pass 'auto', 'native' or 'tiles'")
    if kernel == "tiles":
        return False, None
    why = None
    if query.device.type != "cpu" or query.dtype not in (torch.float32, torch.float64):
        why = f"it runs on CPU float32/float64 tensors, not {query.device.type} {query.dtype}"
    elif need_weights:
        why = "it returns no weights (need_weights=True)"
    elif not own_backward:
        why = "own_backward=False asks for autograd through the SDPA tiles"
    elif mask is not None and mask.dim() >= 2 and mask.shape[-2] != 1:
        why = "its mask may depend on the key only, (..., 1, Tk); this one depends on the query"
    if why is not None:
        if kernel == "native":
            raise ValueError(f"kernel='native' does not apply here: {why}; use kernel='auto'")
        return False, None
    if native.kernel() is None:
        if kernel == "native":
            raise RuntimeError(
                "kernel='native': the banded flash kernel is not available (ATTNKIT_NATIVE=0, "
                "or its build failed: see the warning); use kernel='auto' or 'tiles'"
            )
        return False, None
    if mask is None:
        return True, None
    m = full_rank(mask, lead)  # (.., 1, Tk|1)
    if math.prod(m.shape[:-2]) == 1:
        return True, m.reshape(1, -1).expand(1, tk).contiguous()  # (1, Tk)
    return True, m.expand(*lead, 1, tk).reshape(-1, tk).contiguous()  # (G, Tk)


def _fused(q: Tensor, k: Tensor, v: Tensor, geo: Geometry, user: Tensor | None) -> Tensor:
    """SDPA on the interior blocks (in runs of CHUNK_QUERIES) with the shared band mask, and
    on each edge run with its own mask.
    q (G, Tq, D), k (G, Tk, D), v (G, Tk, Dv) -> context (G, Tq, Dv)."""
    context = v.new_empty(q.shape[0], geo.tq, v.shape[-1])  # (G, Tq, Dv)
    for start, stop, interior in runs(geo, CHUNK_QUERIES):
        m = run_mask(geo, start, stop, interior, user, q.device)  # (b, L) | (1|G, nr, b, L)
        qt = geo.query_tiles(q, start, stop)  # (G, nr, b, D)
        kt, vt = geo.key_tiles(k, start, stop), geo.key_tiles(v, start, stop)  # (G, nr, L, .)
        out = _sdpa_zero_empty_rows(qt, kt, vt, m, check=not interior or user is not None)
        place_rows(context, out, geo, start, stop)
    return context


def _sdpa_zero_empty_rows(q: Tensor, k: Tensor, v: Tensor, m: Tensor, check: bool) -> Tensor:
    """SDPA; a query row with no allowed key (padding) gets a zero context, never NaN."""
    if not check:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    ok = m.any(dim=-1, keepdim=True)  # (.., b, 1); same ops either way: no host sync
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m | ~ok)  # (G, nr, b, Dv)
    return torch.where(ok, out, torch.zeros((), dtype=out.dtype, device=out.device))


def _explicit(
    q: Tensor, k: Tensor, v: Tensor, geo: Geometry, user: Tensor | None
) -> tuple[Tensor, Tensor]:
    """One pass that also returns the weights: scores per tile in float32, masked softmax,
    weighted sum. -> context (G, Tq, Dv), band weights (G, Tq, W)."""
    work = compute_dtype(q.dtype)
    scale = 1.0 / math.sqrt(q.shape[-1])
    qt = geo.query_tiles(q, 0, geo.nb).to(work)  # (G, nb, b, D)
    kt, vt = geo.key_tiles(k, 0, geo.nb).to(work), geo.key_tiles(v, 0, geo.nb)  # (G, nb, L, .)
    scores = (qt @ kt.transpose(-1, -2)) * scale  # (G, nb, b, L)
    m = geo.edge_mask(0, geo.nb, q.device)  # (1, nb, b, L)
    if user is not None:
        m = m & user
    w = masked_softmax(scores, m).contiguous()  # (G, nb, b, L)
    ctx = w @ vt.to(work)  # (G, nb, b, Dv)
    g, nb, b, L = w.shape
    band = w.as_strided((g, nb, b, geo.width), (nb * b * L, b * L, L + 1, 1))  # (G,nb,b,W)
    ctx = ctx.reshape(g, nb * b, -1)[:, : geo.tq]  # (G, Tq, Dv)
    return ctx, band.reshape(g, nb * b, geo.width)[:, : geo.tq]


__all__ = ["DEFAULT_BLOCK", "LocalResult", "sliding_window_attention"]
