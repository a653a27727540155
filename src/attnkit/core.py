"""The attention computation: score -> alignment -> normaliser -> reduction.

    attend(query, keys, values, score=..., align=..., normaliser=..., reduce=...)

Legend: B batch, H heads, Tq queries, Tk keys, Dq/Dk/Dv query/key/value widths.
Each stage is a callable with one fixed signature (see scores.py, alignment.py,
normalisers.py, reduction.py), so a new variant is a new small callable. What a stage can do
fast it declares itself (capabilities.py); ``attnkit.local`` holds the O(n·window) kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _env
from ._checks import check_mask, check_positions, check_qkv, finite_wanted
from .document_blocks import by_document, document_plan
from .grouped import group_heads_dim, group_queries, kv_groups, repeat_kv, share_kv, ungroup
from .linear.dispatch import linear_attend
from .local.dispatch import fast_local
from .mask_mods import MaskMod, resolve
from .stages.alignment import AlignSpec, query_positions
from .stages.capabilities import (
    is_gatherable,
    is_global,
    is_kernelised,
    is_plain_scaled_dot,
    is_plain_sdpa,
    is_qk_transform,
    is_weighted_sum,
)
from .stages.normalisers import compute_dtype, softmax
from .stages.position import Positioned
from .stages.reduction import Reduced, ReduceFn, weighted_sum
from .stages.scores import scaled_dot_score
from .stages.sinks import sink_context

ScoreFn = Callable[[Tensor, Tensor], Tensor]
"""A score: ``score(query (..., Tq, Dq), keys (..., Tk, Dk)) -> (..., Tq, Tk)`` (scores.py)."""
# align(query, keys, mask) or align(query, keys, mask, positions): positions are passed only
# when the caller gives them, so a three-argument alignment keeps working
AlignFn = Callable[..., AlignSpec]
"""An alignment: ``align(query, keys, mask[, positions]) -> AlignSpec(mask, prior)``
(alignment.py): which keys each query may attend, with which prior."""
PositionFn = Callable[[Tensor, Tensor, Tensor, Tensor], Positioned]
"""A position stage: ``position(query, keys, q_pos (..., Tq), k_pos (..., Tk)) ->
Positioned(query, keys, bias)`` (position.py): q and k transformed (RoPE) and/or a bias
(..., Tq, Tk) added to the scores (ALiBi, T5, Shaw, Transformer-XL)."""
NormaliseFn = Callable[[Tensor, "Tensor | None"], Tensor]
"""A normaliser: ``normalise(scores (..., Tq, Tk), mask) -> weights (..., Tq, Tk)``, zero on
masked keys (normalisers.py)."""


@dataclass
class AttentionResult:
    """What one attention computation produced.

    context (..., Tq, Dv); weights (..., Tq, Tk) — or (..., Tq, Tk, Dv) for feature-wise
    attention — or None when not requested on the fused path; scores before normalisation;
    extras: what a variant adds (``position`` for local attention, ``log_prob`` of a hard
    sample, a KL term, ...).
    """

    context: Tensor
    weights: Tensor | None
    scores: Tensor | None = None
    extras: dict[str, Any] = field(default_factory=dict)


def sdpa_context(
    query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, bias: Tensor | None = None
) -> Tensor:
    """Fused softmax(qkᵀ/√d [+ bias]) v through ``F.scaled_dot_product_attention``; a fully
    masked row gives a zero context (SDPA alone would give NaN). Shapes as ``attend``; bias
    broadcastable to (..., Tq, Tk) (a position stage's) goes in as SDPA's float mask, -inf on
    masked keys. The same ops whether or not a row is fully masked: no host synchronisation.
    Keys and values may have fewer heads (..., Hkv, Tk, D) dividing the query's H: SDPA's
    ``enable_gqa`` then shares them across each group without repeating them."""
    attn = None if bias is None else bias.to(query.dtype)  # (..., Tq, Tk)
    gqa = kv_groups(query, keys) > 1
    if mask is None:
        return F.scaled_dot_product_attention(query, keys, values, attn_mask=attn, enable_gqa=gqa)
    row_ok = mask.any(dim=-1, keepdim=True)  # (..., Tq, 1)
    safe = mask | ~row_ok  # a fully masked row attends everywhere, then is zeroed
    if attn is not None:
        low = torch.tensor(-math.inf, dtype=attn.dtype, device=attn.device)
        safe = torch.where(safe, attn, low)  # (..., Tq, Tk)
    out = F.scaled_dot_product_attention(
        query, keys, values, attn_mask=safe, enable_gqa=gqa
    )  # (..., Tq, Dv)
    return torch.where(row_ok, out, torch.zeros((), dtype=out.dtype, device=out.device))


def drop_masked_keys(keys: Tensor, values: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """Keys and values with zeros at the positions ``mask`` hides from every query (padding):
    a weight of 0 does not stop a NaN or Inf there from reaching the output (0·NaN = NaN in
    the weighted sum, and SDPA adds -inf to a NaN score), so a masked position is removed
    from the data, not only from the weights. keys (..., Tk, Dk), values (..., Tk, Dv), mask
    broadcastable to (..., Tq, Tk) -> keys, values of the same shapes (``zero_unseen``)."""
    if mask is None:
        return keys, values
    return zero_unseen(keys, mask), zero_unseen(values, mask)


def zero_unseen(x: Tensor, mask: Tensor) -> Tensor:
    """x (..., Tk, D) with zero rows where ``mask`` (broadcastable to (..., Tq, Tk), or with H
    heads where x has Hkv dividing H: grouped heads) lets no query attend; no host
    synchronisation. A position some query may attend is data: a NaN there reaches that
    query's output, as it should."""
    if mask.dim() >= 2:
        seen = mask.any(dim=-2, keepdim=True).transpose(-2, -1)  # (..., Tk, 1)
    else:
        seen = mask.unsqueeze(-1)  # (Tk, 1)
    if seen.dim() >= 3 and x.dim() >= 3 and seen.shape[-3] not in (1, x.shape[-3]):
        hkv = x.shape[-3]  # grouped heads: a key/value head serves H / Hkv query heads
        seen = seen.unflatten(-3, (hkv, seen.shape[-3] // hkv)).any(dim=-3)  # (.., Hkv, Tk, 1)
    if seen.dim() > x.dim():  # leading dims of size 1 that the mask alone has
        seen = seen.reshape(seen.shape[seen.dim() - x.dim() :])
    return torch.where(seen, x, torch.zeros((), dtype=x.dtype, device=x.device))  # (.., Tk, D)


COLUMN_SCORES = 256
"""Up to this many scores per (batch, head) (Tq·Tk), or with one query, ``attend`` computes
plain softmax attention in the column form (``column_attention``) when it runs on a CPU
without autograd (decoding, evaluation), above it with the fused kernel: at these sizes a
fused kernel spends more on setting up each row than on its arithmetic (the measurements,
and a re-measurement that did not confirm them under load: docs/perf/log-performance.md, "Figures
behind the code's choices"). Training keeps the fused kernel."""


def column_attention(
    query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, need_weights: bool
) -> AttentionResult:
    """Plain softmax(q·kᵀ/√d) v, what ``reference_attention`` and ``sdpa_context`` compute,
    with the scores held transposed, keys down a column, so the softmax runs over a dim
    that is not the last: for few queries and keys (a decoding step, a short sentence) a
    fused kernel and a softmax along a short last dim spend more on setting up each row
    than on its arithmetic.

        e_ij = q_i·k_j / √d,   a_i = softmax_j(e_ij) over the allowed keys,   c_i = Σ_j a_ij v_j

    query (..., Tq, Dk), keys (..., Tk, Dk), values (..., Tk, Dv), mask broadcastable to
    (..., Tq, Tk) -> context (..., Tq, Dv), weights and scores (..., Tq, Tk) when
    ``need_weights`` (else None); a fully masked row gives zero weights and context."""
    scale = 1.0 / math.sqrt(keys.shape[-1])
    scores = (keys @ query.transpose(-2, -1)) * scale  # (..., Tk, Tq)
    if mask is None:
        weights = _softmax_keys(scores)  # (..., Tk, Tq)
    else:
        allowed = mask.transpose(-2, -1) if mask.dim() > 1 else mask.reshape(-1, 1)  # (.., Tk, Tq)
        low = torch.finfo(scores.dtype).min
        weights = _softmax_keys(scores.masked_fill(~allowed, low)) * allowed  # (..., Tk, Tq)
    if query.shape[-2] == 1:
        context = (weights * values).sum(-2, keepdim=True)  # (..., 1, Dv)
    else:
        context = weights.transpose(-2, -1) @ values  # (..., Tq, Dv)
    if not need_weights:
        return AttentionResult(context, None)
    return AttentionResult(context, weights.transpose(-2, -1), scores.transpose(-2, -1))


def _softmax_keys(scores: Tensor) -> Tensor:
    """Softmax over the keys of column scores (..., Tk, Tq), run with the keys as the first
    dim: every other element is then a contiguous lane of the kernel, where over dim -2 with
    Tq = 1 torch runs a softmax along a short last dim (docs/perf/log-performance.md, "Figures
    behind the code's choices")."""
    return scores.movedim(-2, 0).softmax(0).movedim(0, -2)  # (..., Tk, Tq)


def _column_wins(query: Tensor, keys: Tensor) -> bool:
    """``column_attention`` beats the fused kernel here (see ``COLUMN_SCORES``); queries and
    keys of different widths go on to the score's own error."""
    tq = query.shape[-2]
    return (
        not torch.is_grad_enabled()
        and query.device.type == "cpu"
        and query.dtype in (torch.float32, torch.float64)
        and query.shape[-1] == keys.shape[-1]
        and (tq == 1 or tq * keys.shape[-2] <= COLUMN_SCORES)
    )


def attend(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    *,
    score: ScoreFn = scaled_dot_score,
    align: AlignFn | None = None,
    normaliser: NormaliseFn = softmax,
    reduce: ReduceFn = weighted_sum,
    mask: Tensor | MaskMod | None = None,
    positions: Tensor | None = None,
    position: PositionFn | None = None,
    key_positions: Tensor | None = None,
    need_weights: bool = True,
    weights_layout: str = "dense",
    check_finite: bool | None = None,
) -> AttentionResult:
    """Attention over keys for every query.

        q, k, b = position(query, keys, q_pos, k_pos)   # optional: transformed q, k; a bias
        e = score(q, k) [+ b]                        # (..., Tq, Tk)
        m, prior = align(query, keys, mask, positions)   # which keys, with which prior
        a = normaliser(e, m) [* prior]               # (..., Tq, Tk)
        c = reduce(a, values)                        # (..., Tq, Dv)

    query (..., Tq, Dq), keys (..., Tk, Dk), values (..., Tk, Dv); mask bool broadcastable to
    (..., Tq, Tk), True = may attend; positions (..., Tq), integer or real, where each query
    stands in its sequence (None: 0 .. Tq-1): an incremental decoder passes its step t, so
    causal, sliding and local-m alignments give it row t of the full pass. ``position``: a
    position stage (``attnkit.stages.position``: RoPE, ALiBi, T5, Shaw, Transformer-XL, learned)
    seeing the query positions and ``key_positions`` (..., Tk) (None: 0 .. Tk-1); the
    alignment sees its q and k, a bias goes to SDPA as a float mask. Half-precision
    inputs are scored and normalised in float32; the context comes back in the input dtype.
    With ``need_weights=False`` and plain
    scaled-dot softmax attention, the fused ``F.scaled_dot_product_attention`` is used, and
    local alignments go to the O(n·window) kernels of ``attnkit.local`` when their stages
    declare they can (``attnkit.stages.capabilities``). ``weights_layout="band"`` (a sliding-window
    alignment, plain scaled-dot softmax) returns the weights in the band layout (..., Tq, W),
    ``weights[..., t, j]`` the weight of key ``t + extras["band_offset"] + j``: O(n·W) memory.
    A path that must hold dense (..., Tq, Tk) tensors over ``dense_budget_gib()`` (default
    4 GiB, environment variable ATTNKIT_DENSE_BUDGET_GIB) raises a ValueError saying how to
    avoid them, instead of trying to allocate them.
    ``check_finite``: also refuse NaN/Inf in the inputs (and scores that overflow) with a
    ValueError; None (default) follows ``attnkit.set_checks`` ("shapes" unless set to "full"
    or ATTNKIT_CHECKS=full): the data checks cost one host synchronisation each on a GPU.
    Grouped key/value heads (Ainslie 2023; ``attnkit.grouped``): keys and values
    (..., Hkv, Tk, D) with Hkv dividing the query's H heads (..., H, Tq, D) serve G = H / Hkv
    query heads each, query head h reading key/value head ⌊h/G⌋; see ``attend_grouped``.
    ``mask`` may be a mask function (``attnkit.mask_mods``: document, prefix, global tokens,
    and their compositions), made a tensor here at the query ``positions``; a document mask
    and-ed with causal, band or tensor masks, without weights asked, runs document by
    document instead (``attnkit.document_blocks``: no (Tq, Tk) mask, the cost of the
    documents).
    """
    if isinstance(mask, MaskMod) and isinstance(query, Tensor) and isinstance(keys, Tensor):
        plan = document_plan(
            mask, query, keys, values, score=score, align=align, normaliser=normaliser,
            reduce=reduce, positions=positions, key_positions=key_positions,
            need_weights=need_weights, weights_layout=weights_layout,
        )  # fmt: skip
        if plan is not None:  # packed documents: each run alone, no (T, T) mask
            context = by_document(attend, plan, query, keys, values, score=score,
                                  normaliser=normaliser, reduce=reduce, position=position,
                                  check_finite=check_finite)  # fmt: skip
            return AttentionResult(context, None)
        mask = resolve(mask, query.shape[-2], keys.shape[-2], positions, query.dim() >= 4,
                       query.device)  # fmt: skip
    groups = kv_groups(query, keys)
    if groups > 1:
        return attend_grouped(
            groups, query, keys, values, score=score, align=align, normaliser=normaliser,
            reduce=reduce, mask=mask, positions=positions, position=position,
            key_positions=key_positions, need_weights=need_weights,
            weights_layout=weights_layout, check_finite=check_finite,
        )  # fmt: skip
    check_finite = finite_wanted(check_finite)
    check_qkv(query, keys, values, finite=check_finite)
    lead = tuple(query.shape[:-2])  # check_qkv made it equal to the keys' and values' dims
    check_mask(mask, (*lead, query.shape[-2], keys.shape[-2]), query.device)
    keys, values = drop_masked_keys(keys, values, mask)
    check_positions(positions, (*lead, query.shape[-2]))
    # a bias stage's dense (..., Tq, Tk) bias is made only where a dense path needs it
    biased = not is_qk_transform(position)
    if position is not None and not biased:  # RoPE, learned: q and k transformed here
        query, keys, _ = _place(position, query, keys, positions, key_positions, lead)
    elif position is None and key_positions is not None:
        raise ValueError("key_positions apply to a position stage; pass position=... too")
    if is_kernelised(score, normaliser) and weights_layout == "dense":  # attnkit.linear
        if need_weights:  # the implied weights are dense
            work = compute_dtype(query.dtype)
            check_dense_budget((*lead, query.shape[-2], keys.shape[-2]), work, True, None)
        lin = linear_attend(query, keys, values, score, align, reduce, mask, positions,
                            need_weights, biased)  # fmt: skip
        return _finite(AttentionResult(lin.context, lin.weights), check_finite)
    if (
        not check_finite
        and weights_layout == "dense"
        and not biased
        and positions is None
        and is_global(align)
        and is_plain_sdpa(score, normaliser, reduce)
    ):  # the lean paths (a decoder's cached step runs them per layer): what the end does
        if _column_wins(query, keys):
            return column_attention(query, keys, values, mask, need_weights)
        if not need_weights:
            return AttentionResult(sdpa_context(query, keys, values, mask), None)
    work = compute_dtype(query.dtype)
    q_work, k_work = query.to(work), keys.to(work)  # half inputs are aligned/scored in float32
    if weights_layout not in ("dense", "band"):
        raise ValueError(f"weights_layout={weights_layout!r}; choose 'dense' or 'band'")
    if weights_layout == "band":
        if biased:
            raise ValueError(
                'weights_layout="band" takes no position bias; use RoPE or learned positions '
                "(a transform of q and k), or dense weights"
            )
        return _band(query, keys, values, score, align, normaliser, reduce, mask, positions,
                     (q_work, k_work), check_finite)  # fmt: skip
    if align is not None and not need_weights and (not biased or key_positions is None):
        fast = fast_local(
            query, keys, values, score, align, normaliser, reduce, mask, positions,
            work=(q_work, k_work), position=position if biased else None,
        )  # fmt: skip
        if fast is not None:
            return _finite(AttentionResult(fast.context, None, extras=fast.extras), check_finite)
    if need_weights or biased or not is_plain_sdpa(score, normaliser, reduce):  # dense ahead
        check_dense_budget((*lead, query.shape[-2], keys.shape[-2]), work, need_weights, align)
    bias = None
    if biased and position is not None:  # ALiBi, T5, Shaw, XL: the dense bias (.., Tq, Tk)
        bias = _place(position, query, keys, positions, key_positions, lead)[2]
    if align is None:
        spec = AlignSpec(mask)
    elif positions is None:
        spec = align(q_work, k_work, mask)
    else:
        spec = align(q_work, k_work, mask, positions)

    if not need_weights and spec.prior is None and is_plain_sdpa(score, normaliser, reduce):
        ctx = sdpa_context(query, keys, values, spec.mask, bias)
        return _finite(AttentionResult(ctx, None, extras=_position(spec)), check_finite)
    sink = getattr(normaliser, "sink_logits", None)  # the sink softmax (stages/sinks.py)
    if (not need_weights and spec.prior is None and bias is None and sink is not None
            and is_plain_scaled_dot(score) and is_weighted_sum(reduce)):  # fmt: skip
        ctx = sink_context(query, keys, values, spec.mask, sink)
        return _finite(AttentionResult(ctx, None, extras=_position(spec)), check_finite)
    scored = score if bias is None else BiasedScore(score, bias)
    result = reference_attention(q_work, k_work, values, spec, scored, normaliser, reduce)
    return _finite(result, check_finite)


def attend_grouped(
    groups: int, query: Tensor, keys: Tensor, values: Tensor, **kw: Any
) -> AttentionResult:
    """``attend`` with G = H / Hkv query heads per key/value head: query (..., H, Tq, D),
    keys (..., Hkv, Tk, D), values (..., Hkv, Tk, Dv) -> context (..., H, Tq, Dv), weights
    (..., H, Tq, Tk); equal to ``attend`` on the keys and values repeated (``repeat_kv``),
    reached without repeating them where the stages allow:

    * every key for every query (a global alignment, the default positions, no position
      stage, a mask that depends on neither query nor head, e.g. padding): the G query heads
      of a group become G·Tq queries of its one key/value head (a view), any stages;
    * plain scaled-dot softmax without weights over every key under any other mask: SDPA's
      ``enable_gqa``;
    * other alignments (causal, sliding, local, the Sparse Transformer's merged patterns):
      queries (..., Hkv, G, Tq, D) over keys and values expanded to (..., Hkv, G, Tk, D) by
      a stride-0 view; the banded and factorised kernels copy that view where they need
      contiguous memory, so there the memory is that of multi-head attention;
    * a position stage (its parameters are per query head), a pattern split across heads, a
      normaliser with per-head parameters (``per_head``, e.g. a sink logit per head) or a
      score that does not declare ``gatherable`` (it may hold per-head tensors, such as a
      bias): the keys and values repeated (a copy).
    """
    mask, positions = kw.pop("mask"), kw.pop("positions")
    position, align = kw["position"], kw["align"]
    head_free = mask is None or mask.dim() < 3 or mask.shape[-3] == 1
    query_free = mask is None or mask.dim() < 2 or mask.shape[-2] == 1
    plain = position is None and positions is None and kw["key_positions"] is None
    split = getattr(getattr(align, "spec", None), "split_heads", False)
    if (position is not None or split or getattr(kw["normaliser"], "per_head", False)
            or not is_gatherable(kw["score"])):  # fmt: skip
        k, v = repeat_kv(keys, groups), repeat_kv(values, groups)  # (..., H, Tk, D)
        return attend(query, k, v, mask=mask, positions=positions, **kw)
    at = query.dim() - 3  # the heads dim, counted from the left
    if plain and is_global(align) and head_free and query_free and kw["weights_layout"] == "dense":
        tq = query.shape[-2]
        folded = group_queries(query, groups).flatten(-3, -2)  # (..., Hkv, G·Tq, D)
        res = attend(folded, keys, values, mask=mask, **kw)
        return _regroup(res, at, tq)
    if (
        plain and is_global(align) and not kw["need_weights"] and kw["weights_layout"] == "dense"
        and not finite_wanted(kw["check_finite"])
        and is_plain_sdpa(kw["score"], kw["normaliser"], kw["reduce"])
    ):  # fmt: skip
        check_mask(mask, (*query.shape[:-1], keys.shape[-2]), query.device)
        keys, values = drop_masked_keys(keys, values, mask)
        return AttentionResult(sdpa_context(query, keys, values, mask), None)
    res = attend(
        group_queries(query, groups), share_kv(keys, groups), share_kv(values, groups),
        mask=group_heads_dim(mask, groups, -3), positions=group_heads_dim(positions, groups, -2),
        **kw,
    )  # fmt: skip
    hkv = keys.shape[-3]
    return AttentionResult(
        res.context.flatten(at, at + 1),
        None if res.weights is None else ungroup(res.weights, at, hkv, groups),
        None if res.scores is None else ungroup(res.scores, at, hkv, groups),
        {n: ungroup(x, at, hkv, groups) if isinstance(x, Tensor) else x
         for n, x in res.extras.items()},
    )  # fmt: skip


def _regroup(res: AttentionResult, at: int, tq: int) -> AttentionResult:
    """A folded result (..., Hkv, G·Tq, ·) back to (..., H, Tq, ·), views."""

    def back(x: Tensor | None) -> Tensor | None:
        if x is None or x.dim() <= at + 1:
            return x
        return x.unflatten(at + 1, (-1, tq)).flatten(at, at + 1)  # (..., H, Tq, ·)

    extras = {n: back(x) if isinstance(x, Tensor) else x for n, x in res.extras.items()}
    return AttentionResult(back(res.context), back(res.weights), back(res.scores), extras)  # type: ignore[arg-type]


@dataclass(frozen=True)
class BiasedScore:
    """score(q, k) + bias: a score with a position stage's bias (..., Tq, Tk) added."""

    score: ScoreFn
    bias: Tensor

    def __call__(self, query: Tensor, keys: Tensor) -> Tensor:
        return self.score(query, keys) + self.bias.to(query.dtype)  # (..., Tq, Tk)


def _place(
    position: PositionFn, query: Tensor, keys: Tensor, positions: Tensor | None,
    key_positions: Tensor | None, lead: tuple[int, ...],
) -> tuple[Tensor, Tensor, Tensor | None]:  # fmt: skip
    """The position stage at the query positions (default 0 .. Tq-1) and key positions
    (default 0 .. Tk-1), run in the compute dtype: q and k (in their dtypes) and a bias."""
    check_positions(key_positions, (*lead, keys.shape[-2]))
    work = compute_dtype(query.dtype)
    q_pos = query_positions(query, positions)  # (..., Tq)
    k_pos = query_positions(keys, key_positions)  # (..., Tk)
    placed = position(query.to(work), keys.to(work), q_pos, k_pos)
    if placed.bias is not None and is_qk_transform(position):
        raise TypeError(
            f"{type(position).__name__} declares qk_transform but returned a bias; set "
            "qk_transform = False on it so that attend adds the bias on every path"
        )
    return placed.query.to(query.dtype), placed.keys.to(keys.dtype), placed.bias


def dense_budget_gib() -> float:
    """The most GiB the dense (..., Tq, Tk) tensors of one attention call may take: the
    environment variable ATTNKIT_DENSE_BUDGET_GIB, else 4."""
    return _env.dense_budget_gib()


def check_dense_budget(
    shape: tuple[int, ...], dtype: torch.dtype, need_weights: bool, align: Any
) -> None:
    """Refuse a reference pass whose scores and weights, (..., Tq, Tk) each, exceed the budget;
    say which argument avoids them."""
    need = 2 * math.prod(shape) * torch.finfo(dtype).bits / 8 / 2**30  # scores + weights
    budget = dense_budget_gib()
    if need <= budget:
        return
    fix = (
        "pass need_weights=False (the fused and O(n·window) kernels hold no (Tq, Tk) tensor)"
        if need_weights
        else "use plain scaled-dot softmax attention or a sliding window, which have kernels "
        "that hold no (Tq, Tk) tensor"
    )
    if need_weights and align is not None:
        fix += ', or weights_layout="band" for a sliding window\'s weights in O(n·window)'
    raise ValueError(
        f"this attention would hold dense {tuple(shape)} scores and weights: {need:.1f} GiB, "
        f"over the budget of {budget:g} GiB; {fix}; or raise ATTNKIT_DENSE_BUDGET_GIB"
    )


def _band(
    query: Tensor, keys: Tensor, values: Tensor, score: ScoreFn, align: AlignFn | None,
    normaliser: NormaliseFn, reduce: ReduceFn, mask: Tensor | None, positions: Tensor | None,
    work: tuple[Tensor, Tensor], check_finite: bool,
) -> AttentionResult:  # fmt: skip
    """``attend(..., weights_layout="band")``: the sliding-window kernel with its weights."""
    fast = None
    if align is not None:
        fast = fast_local(query, keys, values, score, align, normaliser, reduce, mask,
                          positions, work=work, band_weights=True)  # fmt: skip
    if fast is None:
        raise ValueError(
            'weights_layout="band" needs a sliding-window alignment with plain scaled-dot '
            "softmax attention and the default positions; use the dense layout otherwise"
        )
    return _finite(AttentionResult(fast.context, fast.weights, extras=fast.extras), check_finite)


def _finite(result: AttentionResult, check: bool) -> AttentionResult:
    """Finite inputs whose scores overflow (|qᵀk| beyond the dtype's range) would give NaN:
    a clear error instead (the inputs were checked finite before)."""
    if check and not bool(torch.isfinite(result.context).all()):
        raise ValueError(
            "attention overflowed: the scores of these finite inputs exceed the range of "
            f"{result.context.dtype} (inf or NaN weights); scale the queries/keys down, use a "
            "scaled or cosine score, or compute in float64"
        )
    return result


def reference_attention(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    spec: AlignSpec,
    score: ScoreFn,
    normaliser: NormaliseFn,
    reduce: ReduceFn,
) -> AttentionResult:
    """The explicit path every fast path is tested against: scores (..., Tq, Tk), weights
    normalised over ``spec.mask`` times ``spec.prior``, reduced with the values. query and keys
    in the compute dtype; the context comes back in the values' dtype."""
    out_dtype = values.dtype
    scores = score(query, keys)  # (..., Tq, Tk)
    weights = normaliser(scores, spec.mask)  # (..., Tq, Tk)
    if spec.prior is not None:
        weights = weights * spec.prior.to(weights.dtype)
    reduced = reduce(weights, values)
    return AttentionResult(
        reduced.context.to(out_dtype), weights, scores, {**_position(spec), **reduced.extras}
    )


def _position(spec: AlignSpec) -> dict[str, Any]:
    return {} if spec.position is None else {"position": spec.position}


__all__ = [
    "COLUMN_SCORES",
    "AlignFn",
    "AttentionResult",
    "BiasedScore",
    "NormaliseFn",
    "PositionFn",
    "ReduceFn",
    "Reduced",
    "ScoreFn",
    "attend",
    "attend_grouped",
    "check_dense_budget",
    "column_attention",
    "dense_budget_gib",
    "drop_masked_keys",
    "reference_attention",
    "sdpa_context",
    "weighted_sum",
]
