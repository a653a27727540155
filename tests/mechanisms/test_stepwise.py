"""``attend_step`` (one query per row, a recurrent decoder's step) equals ``attend`` with a
one-query axis: context, weights, scores and their gradients in float64, for every score,
several normalisers, masks with and without fully masked rows, and leading dims (B,) and
(B, H); the additive step score equals the paper's formula computed pair by pair."""

import numpy as np
import pytest
import torch
from _reference import additive_ref, np64

import attnkit
from attnkit import (
    AdditiveScore,
    CosineScore,
    DotScore,
    GeneralScore,
    ScaledDotScore,
    Softmax,
    attend,
    entmax15,
    softmax,
    sparsemax,
)
from attnkit.mechanisms.stepwise import attend_step, one_query
from attnkit.stages.scores import additive_step_score

pytestmark = pytest.mark.usefixtures("one_thread")

TK, D = 6, 4


def _inputs(lead: tuple[int, ...], seed: int = 0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, D, generator=g, dtype=dtype, requires_grad=True)  # (..., Dq)
    k = torch.randn(*lead, TK, D, generator=g, dtype=dtype, requires_grad=True)  # (..., Tk, Dk)
    v = torch.randn(*lead, TK, 3, generator=g, dtype=dtype, requires_grad=True)  # (..., Tk, Dv)
    return q, k, v


def _mask(lead: tuple[int, ...], kind: str) -> torch.Tensor | None:
    """None; "padding": row i allows its first 1 + i % TK keys (every row has one);
    "empty": the same with row 0 fully masked."""
    if kind == "none":
        return None
    n = torch.arange(int(np.prod(lead))).reshape(lead) % TK + 1  # (...,) lengths >= 1
    mask = torch.arange(TK) < n[..., None]  # (..., Tk)
    if kind == "empty":
        mask.view(-1, TK)[0] = False
    return mask


def _grads(out: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    w = torch.randn(out.shape, generator=g, dtype=out.dtype)
    return list(torch.autograd.grad((out * w).sum(), inputs, allow_unused=True))


def _both(score, normaliser, lead, kind, every_row):
    q, k, v = _inputs(lead)
    mask = _mask(lead, kind)
    step = attend_step(q, k, v, score=one_query(score), normaliser=normaliser, mask=mask,
                       every_row=every_row)  # fmt: skip
    ref = attend(q[..., None, :], k, v, score=score, normaliser=normaliser,
                 mask=None if mask is None else mask[..., None, :])  # fmt: skip
    return (q, k, v), step, ref


SCORES = {
    "additive": lambda: AdditiveScore(D, D, 5),
    "dot": DotScore,
    "scaled_dot": ScaledDotScore,
    "general": lambda: GeneralScore(D, D),
    "cosine": lambda: CosineScore(2.0),
}


@pytest.mark.parametrize("name", sorted(SCORES))
@pytest.mark.parametrize("lead", [(5,), (2, 3)])
@pytest.mark.parametrize("kind", ["none", "padding", "empty"])
def test_attend_step_equals_attend_with_one_query(name: str, lead, kind: str) -> None:
    torch.manual_seed(0)
    score = SCORES[name]().double()
    for every_row in [False, True] if kind != "empty" else [False]:
        inputs, step, ref = _both(score, softmax, lead, kind, every_row)
        assert ref.weights is not None and ref.scores is not None
        torch.testing.assert_close(step.context, ref.context[..., 0, :], rtol=0, atol=1e-12)
        torch.testing.assert_close(step.weights, ref.weights[..., 0, :], rtol=0, atol=1e-12)
        torch.testing.assert_close(step.scores, ref.scores[..., 0, :], rtol=0, atol=1e-12)
        out = torch.cat([step.context.flatten(), step.weights.flatten()])
        out_ref = torch.cat([ref.context.flatten(), ref.weights.flatten()])
        for a, b in zip(_grads(out, inputs), _grads(out_ref, inputs), strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "normaliser", [Softmax(0.5), sparsemax, entmax15], ids=["softmax-T0.5", "sparsemax", "entmax"]
)
@pytest.mark.parametrize("kind", ["none", "padding", "empty"])
def test_other_normalisers_take_the_generic_call(normaliser, kind: str) -> None:
    torch.manual_seed(0)
    inputs, step, ref = _both(AdditiveScore(D, D, 5).double(), normaliser, (5,), kind, False)
    assert ref.weights is not None
    torch.testing.assert_close(step.context, ref.context[:, 0], rtol=0, atol=1e-12)
    torch.testing.assert_close(step.weights, ref.weights[:, 0], rtol=0, atol=1e-12)
    for a, b in zip(_grads(step.context, inputs), _grads(ref.context[:, 0], inputs), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_a_fully_masked_row_gets_zero_weights_context_and_gradient() -> None:
    q, k, v = _inputs((5,))
    mask = _mask((5,), "empty")
    score = AdditiveScore(D, D, 5).double()
    res = attend_step(q, k, v, score=one_query(score), mask=mask)
    assert torch.equal(res.weights[0], torch.zeros(TK, dtype=torch.float64))
    assert torch.equal(res.context[0], torch.zeros(3, dtype=torch.float64))
    (res.context.sum() + res.weights.sum()).backward()
    assert q.grad is not None and torch.equal(q.grad[0], torch.zeros(D, dtype=torch.float64))
    assert torch.isfinite(q.grad).all()
    # masked keys get exactly zero weight, every row sums to one
    assert mask is not None
    assert torch.equal(res.weights[~mask], torch.zeros_like(res.weights[~mask]))
    torch.testing.assert_close(res.weights[1:].sum(-1), torch.ones(4, dtype=torch.float64))


def test_every_row_is_checked_under_full_checks_only() -> None:
    q, k, v = _inputs((5,))
    mask = _mask((5,), "empty")
    score = one_query(DotScore())
    attend_step(q, k, v, score=score, mask=mask, every_row=True)  # shapes only: not read
    with attnkit.checks("full"), pytest.raises(ValueError, match="every_row=True"):
        attend_step(q, k, v, score=score, mask=mask, every_row=True)
    with attnkit.checks("full"):  # a valid claim passes
        attend_step(q, k, v, score=score, mask=_mask((5,), "padding"), every_row=True)


def test_the_additive_step_score_is_the_papers_formula() -> None:
    torch.manual_seed(0)
    score = AdditiveScore(D, 3, 5).double()
    g = torch.Generator().manual_seed(2)
    q = torch.randn(4, D, generator=g, dtype=torch.float64)  # (B, Dq)
    h = torch.randn(4, TK, 3, generator=g, dtype=torch.float64)  # (B, Tk, Dk)
    got = score.step_on_projected_keys(q, score.project_keys(h))  # (B, Tk)
    p = {n: np64(t) for n, t in score.named_parameters()}
    want = additive_ref(np64(q[:, None]), np64(h), p["w_query"], p["w_keys"], p["v"], p["bias"])
    np.testing.assert_allclose(np64(got), want[:, 0], rtol=0, atol=1e-12)
    wq, v = score.w_query, score.v
    assert additive_step_score(q, score.project_keys(h), wq, v).shape == (4, TK)


def test_half_inputs_are_scored_in_float32_and_return_their_dtype() -> None:
    q, k, v = (x.detach().to(torch.bfloat16) for x in _inputs((5,)))
    mask = _mask((5,), "padding")
    res = attend_step(q, k, v, score=one_query(DotScore()), mask=mask, every_row=True)
    ref = attend(q[:, None], k, v, score=DotScore(), mask=None if mask is None else mask[:, None])
    assert res.context.dtype == torch.bfloat16 and res.weights.dtype == torch.float32
    assert ref.weights is not None
    torch.testing.assert_close(res.weights, ref.weights[:, 0])
    torch.testing.assert_close(res.context, ref.context[:, 0])


def test_errors_say_what_to_pass() -> None:
    q, k, v = _inputs((5,))
    score = one_query(DotScore())
    with pytest.raises(ValueError, match="one query per row"):
        attend_step(q[:, None], k, v, score=score)  # a (B, 1, Dq) query: use attend
    with pytest.raises(ValueError, match="mask must be a bool"):
        attend_step(q, k, v, score=score, mask=torch.ones(5, TK))
    with pytest.raises(ValueError, match=r"pass mask\[:, 0\]"):
        attend_step(q, k, v, score=score, mask=torch.ones(5, 1, TK, dtype=torch.bool))
    with pytest.raises(ValueError, match="at least one key"):
        attend_step(q, k[:, :0], v[:, :0], score=score)
    with pytest.raises(TypeError, match="one dtype"):
        attend_step(q.float(), k, v, score=score)
    with pytest.raises(ValueError, match="NaN or Inf"):
        attend_step(q * float("nan"), k, v, score=score, check_finite=True)


@pytest.mark.parametrize("lead", [(5,), (2, 3)])
@pytest.mark.parametrize("kind", ["padding", "empty"])
def test_a_given_masked_out_gives_the_same_as_the_mask_alone(lead, kind: str) -> None:
    """``masked_out`` (~mask, inverted once by a decoder) only spares the inversion: the
    context, weights and gradients equal ``attend``'s, with and without ``every_row``."""
    score = AdditiveScore(D, D, 5).double()
    mask = _mask(lead, kind)
    assert mask is not None
    for every_row in [False, True] if kind != "empty" else [False]:
        q, k, v = _inputs(lead)
        step = attend_step(q, k, v, score=one_query(score), mask=mask, every_row=every_row,
                           masked_out=~mask)  # fmt: skip
        ref = attend(q[..., None, :], k, v, score=score, mask=mask[..., None, :])
        assert ref.weights is not None
        torch.testing.assert_close(step.weights, ref.weights[..., 0, :], rtol=0, atol=1e-12)
        torch.testing.assert_close(step.context, ref.context[..., 0, :], rtol=0, atol=1e-12)
        for a, b in zip(_grads(step.context, (q, k, v)), _grads(ref.context, (q, k, v)),
                        strict=True):  # fmt: skip
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_masked_out_must_be_the_inverted_mask() -> None:
    q, k, v = _inputs((5,))
    score = one_query(DotScore())
    mask = _mask((5,), "padding")
    assert mask is not None
    with pytest.raises(ValueError, match="without mask"):
        attend_step(q, k, v, score=score, masked_out=~mask)
    with pytest.raises(ValueError, match="mask's shape"):
        attend_step(q, k, v, score=score, mask=mask, masked_out=~mask[:1])
    with pytest.raises(ValueError, match="mask's shape"):
        attend_step(q, k, v, score=score, mask=mask, masked_out=(~mask).float())
    attend_step(q, k, v, score=score, mask=mask, masked_out=mask)  # values not read by default
    with attnkit.checks("full"), pytest.raises(ValueError, match="is not ~mask"):
        attend_step(q, k, v, score=score, mask=mask, masked_out=mask)
    with attnkit.checks("full"):
        attend_step(q, k, v, score=score, mask=mask, masked_out=~mask)
