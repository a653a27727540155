"""Attention over packed documents, one document at a time: what ``attend`` runs for a mask
function that is a document mask and-ed with a band, causal or tensor mask, instead of the
dense (T, T) mask.

    mask = document(ids) & band(r, causal=True)
    c_i = Σ_{j : ids_j = ids_i, 0 <= i - j <= r} softmax_j(e_ij) v_j

Under ``document(ids)`` query i may attend only the keys of its own document, so when each
document is one contiguous run of positions the attention is block-diagonal: the same result
comes from running the attention on every run [s, s + L) alone, with the rest of the mask (the
band, causal, a tensor mask's diagonal block) inside it. That is xformers'
``BlockDiagonalMask`` and FlashAttention's varlen interface (Dao 2023, ``cu_seqlens``): the
runs of one length, across the rows of a batch, are stacked as one batch of (N, ..., L, D)
and go through ``attend`` once, so the banded and fused kernels see only their documents. The
cost is that of the documents, Σ L² (Σ L·W under a window of width W), never T².

Legend: B batch (1 for ids (T,) shared by every sequence), T positions, N runs of length L,
D widths; "rest" the dims between the batch and the positions (heads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import finite_wanted
from .mask_mods import AndMask, Band, Document, MaskMod, TensorMask
from .stages.alignment import CausalAlignment, SlidingWindow
from .stages.capabilities import (
    is_causal_prefix,
    is_gatherable,
    is_global,
    is_plain_sdpa,
    is_qk_transform,
    is_weighted_sum,
    sliding_band,
)


@dataclass(frozen=True)
class DocumentPlan:
    """How ``attend`` splits a call by document.

    ids (B, T) long, one id per position; ``shared``: the ids were (T,), one segmentation for
    every leading index of the inputs (then B = 1 here and the inputs gain a batch dim of 1);
    radius, causal: the band inside a document, the mask's bands and the alignment's
    together (radius None: unbounded; not causal and unbounded: every key of the document);
    tensors: the bool tensor masks (B|1, T|1, T) and-ed in."""

    ids: Tensor
    shared: bool
    radius: int | None
    causal: bool
    tensors: tuple[Tensor, ...]


def document_plan(
    mask: MaskMod, query: Tensor, keys: Tensor, values: Tensor, *, score: Any, align: Any,
    normaliser: Any, reduce: Any, positions: Tensor | None, key_positions: Tensor | None,
    need_weights: bool, weights_layout: str,
) -> DocumentPlan | None:  # fmt: skip
    """The plan when ``attend`` can run this call document by document and give what the
    dense mask gives, else None (the dense path). It can when: the mask is a document mask
    and-ed with bands (causal, band) and bool tensors, no weights are asked for, the queries
    stand at the default positions, the score reads the keys it is given (``gatherable``),
    the reduction is the weighted sum, the alignment is global, causal or a band (all
    invariant under a shift of positions), T queries, keys and values with T ids, and every
    document is one contiguous run of positions (one host synchronisation to find them)."""
    parts = _split(mask)
    if parts is None or need_weights or weights_layout != "dense":
        return None
    doc, bands, tensors = parts
    if positions is not None or key_positions is not None or torch.compiler.is_compiling():
        return None
    inside = _as_band(align, query)  # the alignment as a band, shift-invariant
    if inside is None or not (is_weighted_sum(reduce) and is_gatherable(score)):
        return None
    bands = [*bands, inside]
    t = query.shape[-2]
    ids = doc.ids
    if query.dim() < 2 or t == 0 or keys.shape[-2] != t or values.shape[-2] != t:
        return None
    if ids.shape[-1] != t or any(m.shape[-1] != t or m.shape[-2] not in (1, t) for m in tensors):
        return None  # the dense path says what is wrong, or broadcasts as it does
    batched = ids.dim() == 2 or any(m.dim() == 3 for m in tensors)
    if batched:
        b = query.shape[0]
        sizes = [ids.shape[0]] if ids.dim() == 2 else []
        sizes += [m.shape[0] for m in tensors if m.dim() == 3]
        # a batched mask lines its batch up with dim 0 only for (B, T, D) and (B, H, T, D)
        if (query.dim() not in (3, 4) or keys.shape[0] != b or values.shape[0] != b
                or any(s not in (1, b) for s in sizes)):  # fmt: skip
            return None
        ids = ids.expand(b, t) if ids.dim() == 2 else ids[None].expand(b, t)
    else:
        ids = ids[None]  # (1, T)
    if not _contiguous(ids):
        return None
    radius = min((bd.radius for bd in bands if bd.radius is not None), default=None)
    causal = any(bd.causal for bd in bands)
    return DocumentPlan(ids.long(), not batched, radius, causal, tuple(tensors))


def by_document(
    attend: Callable[..., Any], plan: DocumentPlan, query: Tensor, keys: Tensor,
    values: Tensor, **kw: Any,
) -> Tensor:  # fmt: skip
    """``attend(query, keys, values, mask=<plan's mask>, need_weights=False, **kw)`` run on
    the runs of equal length, each length one call on (N, rest..., L, D); the contexts are put
    back in place (one gather). query (..., T, Dq), keys (..., T, Dk), values (..., T, Dv)
    -> the context (..., T, Dv) (``attend`` wraps it, without weights)."""

    shared = plan.shared
    q, k, v = (x[None] if shared else x for x in (query, keys, values))  # (B, rest.., T, D)
    rest = q.dim() - 3  # dims between the batch and the positions
    position = kw.pop("position")
    seg_align = _band_alignment(plan)  # the alignment and the mask's bands, as one band
    pieces, where = [], []
    groups = list(_runs_by_length(plan.ids, query.device))
    for runs in groups:
        bi, ti = runs.rows, runs.positions  # (N, L) each
        n, length = ti.shape
        mask = _segment_mask(plan, bi, ti, rest)  # (N, 1.., L|1, L) | None
        q_pos = ti.view(n, *(1,) * rest, length)  # (N, 1.., L): the global positions
        seg_position = None if position is None else AtPositions(position, q_pos)
        qs, ks, vs = (_take(x, runs) for x in (q, k, v))  # (N, rest.., L, D)
        if _plain_causal(seg_align, mask, seg_position, kw):
            gqa = ks.shape[-3] != qs.shape[-3]  # grouped heads (N is dim -3 without heads)
            ctx = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, enable_gqa=gqa)
        else:
            ctx = attend(qs, ks, vs, align=seg_align, mask=mask, position=seg_position,
                         need_weights=False, **kw).context  # fmt: skip
        if len(groups) == 1 and runs.span == (0, 0) and plan.ids.shape[0] == 1:
            out = ctx.movedim(0, -3).flatten(-3, -2)[None]  # one length: (1, rest.., T, Dv)
            return (out[0] if shared else out).contiguous()
        pieces.append(ctx.movedim(-2, 1).flatten(0, 1))  # (N·L, rest.., Dv)
        where.append((bi * plan.ids.shape[1] + ti).flatten())  # (N·L,) flat index b·T + t
    order = torch.cat(where).argsort().to(query.device)  # (B·T,)
    out = torch.cat(pieces).index_select(0, order)  # (B·T, rest.., Dv), in place order
    out = out.unflatten(0, plan.ids.shape).movedim(1, -2)  # (B, rest.., T, Dv)
    return (out[0] if shared else out).contiguous()


@dataclass(frozen=True)
class AtPositions:
    """A position stage seen at fixed positions: a document's tokens keep their places in
    the packed row (q_pos (N, 1.., L), the same for the keys), not 0 .. L-1. It declares
    ``qk_transform`` as its stage does; it has no ``bias_at``, so a bias stage runs dense
    inside each document."""

    stage: Any
    q_pos: Tensor

    @property
    def qk_transform(self) -> bool:
        return is_qk_transform(self.stage)

    def __call__(self, query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor) -> Any:
        return self.stage(query, keys, self.q_pos, self.q_pos)


def _split(mask: MaskMod) -> tuple[Document, list[Band], list[Tensor]] | None:
    """A document mask and-ed with bands and bool tensors, as its parts; else None."""
    docs, bands, tensors = [], [], []
    for p in _and_parts(mask):
        if isinstance(p, Document):
            docs.append(p)
        elif isinstance(p, Band):
            bands.append(p)
        elif isinstance(p, TensorMask) and p.mask.dim() >= 2:
            tensors.append(p.mask)
        else:
            return None
    return (docs[0], bands, tensors) if len(docs) == 1 else None


def _and_parts(mask: MaskMod) -> Iterator[MaskMod]:
    if isinstance(mask, AndMask):
        for p in mask.parts:
            yield from _and_parts(p)
    else:
        yield mask


def _as_band(align: Any, query: Tensor) -> Band | None:
    """The alignment as a band mask when it is one at the default positions (global, causal,
    or a sliding band reporting no position: each allows the same keys for a query at i + s
    as at i, shifted by s), else None."""
    if is_global(align):
        return Band(None, causal=False)
    if is_causal_prefix(align):
        return Band(None, causal=True)
    band = sliding_band(align, query)
    if band is None or band.position is not None:
        return None
    return Band(band.radius, band.causal)


def _contiguous(ids: Tensor) -> bool:
    """Every id of a row occupies one run of positions: runs per row == distinct ids per
    row. ids (B, T)."""
    runs = (ids[:, 1:] != ids[:, :-1]).sum(1)  # (B,) run boundaries
    ordered = ids.sort(dim=1).values
    distinct = (ordered[:, 1:] != ordered[:, :-1]).sum(1)  # (B,)
    return bool(torch.equal(runs, distinct))


@dataclass(frozen=True)
class Runs:
    """The N runs of one length L: their rows and positions (N, L) each, long; ``span`` (row,
    first position) when they lie side by side in one row (their tokens are then a slice)."""

    rows: Tensor
    positions: Tensor
    span: tuple[int, int] | None


def _runs_by_length(ids: Tensor, device: torch.device) -> Iterator[Runs]:
    """The runs of ids (B, T), grouped by length, on ``device``."""
    cpu = ids.cpu()
    b, t = cpu.shape
    edge = torch.ones(b, t, dtype=torch.bool)
    edge[:, 1:] = cpu[:, 1:] != cpu[:, :-1]  # a run starts where the id changes
    row, start = edge.nonzero(as_tuple=True)  # (S,) each, in row-major order
    first = row * t + start  # (S,) flat index of each run's start; every row starts one
    length = torch.cat([first[1:], first.new_tensor([b * t])]) - first  # (S,)
    for size in length.unique().tolist():
        pick = length == size
        ti = start[pick][:, None] + torch.arange(size)  # (N, L)
        bi = row[pick][:, None].expand_as(ti)  # (N, L)
        flat = ti.flatten()
        side = bool((bi == bi[0, 0]).all()) and torch.equal(flat, flat[0] + torch.arange(
            flat.numel()))  # fmt: skip
        span = (int(bi[0, 0]), int(flat[0])) if side else None
        yield Runs(bi.to(device), ti.to(device), span)


def _take(x: Tensor, runs: Runs) -> Tensor:
    """x (B, rest.., T, D) at the runs' rows and positions -> (N, rest.., L, D): a view when
    the runs lie side by side, else one gather."""
    n, length = runs.positions.shape
    if runs.span is not None:
        b, first = runs.span
        side = x[b][..., first : first + n * length, :]  # (rest.., N·L, D)
        return side.unflatten(-2, (n, length)).movedim(-3, 0)  # (N, rest.., L, D)
    if x.shape[0] == 1:  # one row: a gather along the positions only
        picked = x[0].index_select(-2, runs.positions.flatten())  # (rest.., N·L, D)
        return picked.unflatten(-2, (n, length)).movedim(-3, 0)  # (N, rest.., L, D)
    return x.movedim(-2, 1)[runs.rows, runs.positions].movedim(1, -2)  # (N, rest.., L, D)


def _segment_mask(plan: DocumentPlan, bi: Tensor, ti: Tensor, rest: int) -> Tensor | None:
    """The tensor masks' diagonal blocks for these runs: (N, 1.., L, L) with ``rest`` 1s for
    the heads, or None."""
    n, length = ti.shape
    out = None
    for m in plan.tensors:
        m3 = m if m.dim() == 3 else m[None]  # (B|1, T|1, T)
        mb = bi if m3.shape[0] > 1 else torch.zeros_like(bi)
        rows = ti if m3.shape[1] > 1 else torch.zeros_like(ti)
        m3 = m3.to(ti.device)
        block = m3[mb[:, :, None], rows[:, :, None], ti[:, None, :]]  # (N, L, L)
        out = block if out is None else out & block
    if out is None:
        return None
    return out.view(n, *(1,) * rest, length, length)


def _band_alignment(plan: DocumentPlan) -> Any:
    """The band inside a document as an alignment, so that ``attend`` runs its kernel on it."""
    if plan.radius is not None:
        return SlidingWindow(plan.radius, plan.causal)
    return CausalAlignment() if plan.causal else None


def _plain_causal(align: Any, mask: Tensor | None, position: Any, kw: dict[str, Any]) -> bool:
    """j <= i inside a document and nothing else, plain softmax attention: SDPA's own causal
    kernel (no mask tensor; every row has its diagonal key, none is empty)."""
    return (
        isinstance(align, CausalAlignment) and mask is None and position is None
        and not finite_wanted(kw["check_finite"]) and is_plain_sdpa(kw["score"], kw["normaliser"],
                                                         kw["reduce"])
    )  # fmt: skip


__all__ = ["AtPositions", "DocumentPlan", "Runs", "by_document", "document_plan"]
