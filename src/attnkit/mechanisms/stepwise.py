"""Attention for one query per row: a recurrent decoder's step against fixed annotations.

    res = attend_step(s, keys, values, score=..., normaliser=..., mask=..., every_row=...)

A recurrent decoder (Bahdanau 2015; Luong 2015) attends once per target position with one
query per sentence, against the same keys, values and mask at every step. ``attend`` serves
every shape: it checks its inputs, runs an alignment stage, keeps a (B, 1, Tk) query axis
and fixes up fully masked rows on every call; at a decoder step of a small model that
bookkeeping costs as much as the arithmetic. ``attend_step`` is the same computation for
global attention on (..., Tk) rows:

    e_j = score(s, k_j)            (..., Tk)        (Bahdanau 2015, eq. 6)
    a = normalise(e, mask)         (..., Tk)
    c = Σ_j a_j v_j                (..., Dv)        (Bahdanau 2015, eq. 5)

equal to ``attend(s[..., None, :], keys, values, ...)`` with its query axis dropped
(tests/mechanisms/test_stepwise.py). What depends only on the keys is left to the caller to
do once per sentence: the keys projected by the score (``AdditiveScore.project_keys``, then
``AdditiveScore.step_on_projected_keys`` as the score), and the knowledge that every row has
a key (``every_row``: a decoder whose encoder refused empty sources knows it from that).

Legend: B batch (any leading dims ``...``), Tk keys, Dq/Dk/Dv query/key/value widths.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .._checks import broadcasts_to, check_one_dtype, check_tensor, finite_wanted, get_checks
from .._checks import check_finite as refuse_non_finite
from ..core import AttentionResult, NormaliseFn, _finite, drop_masked_keys
from ..stages.capabilities import is_plain_softmax
from ..stages.normalisers import compute_dtype, softmax

StepScoreFn = Callable[[Tensor, Tensor], Tensor]
"""A score for one query per row: ``score(query (..., Dq), keys (..., Tk, Dk)) -> (..., Tk)``
(``AdditiveScore.step_on_projected_keys``, or any score through ``one_query``)."""


def one_query(score: Callable[[Tensor, Tensor], Tensor]) -> StepScoreFn:
    """Any score (``score(query (..., Tq, Dq), keys (..., Tk, Dk)) -> (..., Tq, Tk)``, see
    scores.py) as a score of one query per row: query (..., Dq) -> scores (..., Tk)."""

    def step_score(query: Tensor, keys: Tensor) -> Tensor:
        return score(query[..., None, :], keys)[..., 0, :]  # (..., Tk)

    return step_score


def _check(query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> None:
    """Metadata only (free): query (..., Dq), keys (..., Tk, Dk), values (..., Tk, Dv)."""
    check_tensor("query", query, min_dim=1)
    check_tensor("keys", keys)
    check_tensor("values", values)
    check_one_dtype(query, keys, values)
    if not (query.shape[:-1] == keys.shape[:-2] == values.shape[:-2]):
        raise ValueError(
            f"attend_step takes one query per row: query (..., Dq) {tuple(query.shape)}, keys "
            f"(..., Tk, Dk) {tuple(keys.shape)}, values (..., Tk, Dv) {tuple(values.shape)} "
            "need the same leading dims; for several queries per row use attnkit.attend"
        )
    if keys.shape[-2] != values.shape[-2] or keys.shape[-2] == 0:
        raise ValueError(
            f"keys {tuple(keys.shape)} and values {tuple(values.shape)} need the same number "
            "of positions Tk >= 1 (each key one value, at least one key)"
        )
    if mask is not None and (
        not isinstance(mask, Tensor)
        or mask.dtype != torch.bool
        or not broadcasts_to(mask.shape, (*query.shape[:-1], keys.shape[-2]))
    ):
        rows = (*query.shape[:-1], keys.shape[-2])
        raise ValueError(
            f"mask must be a bool tensor (..., Tk) broadcastable to {rows}, True = may attend;"
            f" got {getattr(mask, 'dtype', type(mask).__name__)} "
            f"{tuple(getattr(mask, 'shape', ()))}. A (B, 1, Tk) padding mask: pass mask[:, 0]"
        )


def _check_masked_out(mask: Tensor | None, masked_out: Tensor) -> None:
    """``masked_out`` must be ``~mask`` (its values are read under full checks only)."""
    if mask is None:
        raise ValueError("attend_step: masked_out (~mask) was given without mask; pass both")
    if not isinstance(masked_out, Tensor) or masked_out.dtype != torch.bool or (
        masked_out.shape != mask.shape
    ):
        raise ValueError(
            f"masked_out must be ~mask, a bool tensor of mask's shape {tuple(mask.shape)}; got "
            f"{getattr(masked_out, 'dtype', type(masked_out).__name__)} "
            f"{tuple(getattr(masked_out, 'shape', ()))}"
        )
    if get_checks() == "full" and not bool((masked_out != mask).all()):
        raise ValueError("attend_step: masked_out is not ~mask (True where mask is False)")


def attend_step(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    *,
    score: StepScoreFn,
    normaliser: NormaliseFn = softmax,
    mask: Tensor | None = None,
    every_row: bool = False,
    masked_out: Tensor | None = None,
    check_finite: bool | None = None,
) -> AttentionResult:
    """Global attention of one query per row (see the module docstring):

        e = score(query, keys)          # (..., Tk)
        a = normaliser(e, mask)         # (..., Tk), zero on masked keys
        c = Σ_j a_j v_j                 # (..., Dv)

    query (..., Dq), keys (..., Tk, Dk), values (..., Tk, Dv), mask bool (..., Tk) or
    broadcastable to it, True = may attend. ``score`` takes one query per row
    (``StepScoreFn``; ``one_query(score)`` adapts any score). Returns context (..., Dv),
    weights (..., Tk) and scores (..., Tk): ``attend(query[..., None, :], ...)``'s with the
    query axis dropped. Half inputs are scored and normalised in float32, the context comes
    back in the input dtype.

    A plain softmax normaliser (temperature 1) runs as one masked fill and a softmax.
    ``masked_out``: ``~mask`` when the caller holds it (a decoder's padding, the same at
    every step: invert it once per sentence); the fill reads it instead of inverting
    ``mask`` (under ``attnkit.set_checks("full")`` it is checked to be ``~mask``).
    ``every_row=True`` says that each row of ``mask`` allows at least one key: the masked
    keys then get exactly zero weight from the softmax itself, and the fix-up that zeroes a
    fully masked row is skipped (under ``attnkit.set_checks("full")`` the claim is checked,
    one host read). Without it, a fully masked row gets zero weights and a zero context, as
    in ``attend``. Other normalisers are called as ``normaliser(e[..., None, :], mask)``.
    ``check_finite``: as ``attend`` (NaN/Inf in the inputs raise a ValueError)."""
    _check(query, keys, values, mask)
    if masked_out is not None:
        _check_masked_out(mask, masked_out)
    finite = finite_wanted(check_finite)
    if finite:
        for name, x in (("query", query), ("keys", keys), ("values", values)):
            refuse_non_finite(name, x)
    if every_row and mask is not None and get_checks() == "full":
        if not bool(mask.any(-1).all()):
            raise ValueError(
                "attend_step(every_row=True) but a row of the mask allows no key; pass "
                "every_row=False (fully masked rows then get zero weights)"
            )
    if mask is not None:  # as attend: a NaN or Inf at a masked key must not reach the output
        keys, values = drop_masked_keys(keys, values, mask[..., None, :])
    work = compute_dtype(query.dtype)
    if query.dtype != work:  # half inputs: scored and normalised in float32
        query, keys = query.to(work), keys.to(work)
    scores = score(query, keys)  # (..., Tk)
    if not is_plain_softmax(normaliser):
        weights = normaliser(scores[..., None, :], None if mask is None else mask[..., None, :])
        weights = weights[..., 0, :]  # (..., Tk)
    elif mask is None:
        weights = torch.softmax(scores, dim=-1)  # (..., Tk)
    else:
        lowest = torch.finfo(scores.dtype).min  # finite: a fully masked row stays finite
        fill = ~mask if masked_out is None else masked_out  # True = may not attend
        weights = torch.softmax(scores.masked_fill(fill, lowest), dim=-1)  # (..., Tk)
        if not every_row:
            weights = weights * mask  # a fully masked row: uniform above, zero here
    v = values if values.dtype == weights.dtype else values.to(weights.dtype)
    if weights.dim() == 2:  # (B, Tk): one bmm, without matmul's reshapes in the backward
        context = torch.bmm(weights[:, None], v)[:, 0]  # (B, 1, Tk) @ (B, Tk, Dv) -> (B, Dv)
    else:
        context = (weights[..., None, :] @ v)[..., 0, :]  # (..., Dv)
    context = context if context.dtype == values.dtype else context.to(values.dtype)
    return _finite(AttentionResult(context, weights, scores), finite)


__all__ = ["StepScoreFn", "attend_step", "one_query"]
