"""Every score against a float64 loop reference from its paper, gradcheck through attend, and
the additive score's memory budget (chunked == unchunked, no block over max_elements)."""

import math

import numpy as np
import pytest
import torch
from _reference import (
    additive_ref,
    cosine_ref,
    dot_ref,
    general_ref,
    location_ref,
    np64,
)
from torch.autograd import gradcheck

import attnkit
import attnkit.stages._additive_chunks as chunks_mod
import attnkit.stages.scores as scores_mod
from attnkit import (
    AdditiveScore,
    CosineScore,
    DotScore,
    GeneralScore,
    LocationScore,
    ScaledDotScore,
    attend,
)
from attnkit.stages.scores import (
    additive_score,
    cosine_score,
    dot_score,
    general_score,
    location_score,
    scaled_dot_score,
)

pytestmark = pytest.mark.usefixtures("one_thread")

B, TQ, TK = 2, 3, 5


def _qk(dq: int = 4, dk: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, TQ, dq, generator=g, dtype=torch.float64)
    k = torch.randn(B, TK, dk, generator=g, dtype=torch.float64)
    return q, k


def test_dot_and_scaled_dot_match_reference() -> None:
    q, k = _qk()
    np.testing.assert_allclose(dot_score(q, k).numpy(), dot_ref(np64(q), np64(k)), atol=1e-12)
    np.testing.assert_allclose(DotScore()(q, k).numpy(), dot_ref(np64(q), np64(k)), atol=1e-12)
    ref = dot_ref(np64(q), np64(k), scale=1 / math.sqrt(4))
    np.testing.assert_allclose(scaled_dot_score(q, k).numpy(), ref, atol=1e-12)
    np.testing.assert_allclose(ScaledDotScore()(q, k).numpy(), ref, atol=1e-12)
    ref = dot_ref(np64(q), np64(k), scale=0.3)
    np.testing.assert_allclose(ScaledDotScore(0.3)(q, k).numpy(), ref, atol=1e-12)


def test_general_score_different_widths() -> None:
    q, k = _qk(dq=4, dk=6)
    sc = GeneralScore(4, 6).double()
    ref = general_ref(np64(q), np64(k), np64(sc.weight))
    np.testing.assert_allclose(sc(q, k).detach().numpy(), ref, atol=1e-12)
    np.testing.assert_allclose(general_score(q, k, sc.weight).detach().numpy(), ref, atol=1e-12)


@pytest.mark.parametrize("max_elements", [1 << 24, 12], ids=["whole", "chunked"])
@pytest.mark.parametrize("bias", [True, False])
def test_additive_score_different_widths(bias: bool, max_elements: int) -> None:
    q, k = _qk(dq=4, dk=6)
    sc = AdditiveScore(4, 6, hidden=5, bias=bias, max_elements=max_elements).double()
    if sc.bias is not None:
        torch.nn.init.normal_(sc.bias)
    b = None if sc.bias is None else np64(sc.bias)
    ref = additive_ref(np64(q), np64(k), np64(sc.w_query), np64(sc.w_keys), np64(sc.v), b)
    np.testing.assert_allclose(sc(q, k).detach().numpy(), ref, atol=1e-12)


def test_cosine_score() -> None:
    q, k = _qk()
    ref = cosine_ref(np64(q), np64(k), beta=2.5)
    np.testing.assert_allclose(cosine_score(q, k, 2.5).numpy(), ref, atol=1e-12)
    np.testing.assert_allclose(CosineScore(2.5)(q, k).numpy(), ref, atol=1e-12)


def test_location_score_uses_query_only() -> None:
    q, k = _qk()
    sc = LocationScore(4, max_keys=8).double()
    ref = location_ref(np64(q), np64(sc.weight), TK)
    np.testing.assert_allclose(sc(q, k).detach().numpy(), ref, atol=1e-12)
    np.testing.assert_allclose(location_score(q, sc.weight, TK).detach().numpy(), ref, atol=1e-12)
    torch.testing.assert_close(sc(q, k), sc(q, torch.randn_like(k)))  # keys' content unused


def test_scores_have_formula_and_name() -> None:
    for cls in (DotScore, ScaledDotScore, GeneralScore, AdditiveScore, LocationScore, CosineScore):
        assert cls.formula and cls.name != "score"


SCORES = {
    "dot": lambda: DotScore(),
    "scaled_dot": lambda: ScaledDotScore(),
    "general": lambda: GeneralScore(4, 6),
    "additive": lambda: AdditiveScore(4, 6, hidden=3),
    "additive-chunked": lambda: AdditiveScore(4, 6, hidden=3, max_elements=7),
    "location": lambda: LocationScore(4, max_keys=6),
    "cosine": lambda: CosineScore(2.0),
}


@pytest.mark.parametrize("name", sorted(SCORES))
def test_score_gradcheck_through_attend(name: str) -> None:
    torch.manual_seed(0)
    sc = SCORES[name]().double()
    dk = 6 if name in ("general", "additive", "additive-chunked") else 4
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 4, dk, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    mask = attnkit.padding_mask(torch.tensor([4, 2]))
    params = tuple(p for p in sc.parameters())

    def f(q, k, v, *ps):
        return attend(q, k, v, score=sc, mask=mask).context

    assert gradcheck(f, (q, k, v, *params), eps=1e-6, atol=1e-6)


# ----------------------------------------------------------------- additive: the memory budget


def _additive_inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 7, 4, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 9, 6, generator=g, dtype=torch.float64, requires_grad=True)
    w1 = torch.randn(5, 4, generator=g, dtype=torch.float64, requires_grad=True)
    w2 = torch.randn(5, 6, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(5, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, generator=g, dtype=torch.float64, requires_grad=True)
    return q, k, w1, w2, v, b


# B * Tk * A = 90 per query row: 200 chunks the queries, 40 and 10 must also chunk the keys
# (10 = B * A is the smallest block: one (query, key) pair for every batch row).
@pytest.mark.parametrize("budget", [200, 40, 10])
def test_additive_chunked_equals_unchunked_and_respects_budget(monkeypatch, budget: int) -> None:
    inputs = _additive_inputs()
    full = additive_score(*inputs[:5], inputs[5])
    grads_full = torch.autograd.grad(full.square().sum(), inputs)

    seen: list[tuple[int, ...]] = []
    original = scores_mod._additive_block

    def recording(wq, wk, v):
        seen.append((*wq.shape[:-1], wk.shape[-2], wq.shape[-1]))  # (B, tq, tk, A)
        return original(wq, wk, v)

    def recording_hidden(wq, wk):  # the chunked path's own blocks (forward and backward)
        seen.append((*wq.shape[:-1], wk.shape[-2], wq.shape[-1]))
        return original_hidden(wq, wk)

    original_hidden = chunks_mod._block
    monkeypatch.setattr(scores_mod, "_additive_block", recording)
    monkeypatch.setattr(chunks_mod, "_block", recording_hidden)
    chunked = additive_score(*inputs[:5], inputs[5], max_elements=budget)
    grads_chunked = torch.autograd.grad(chunked.square().sum(), inputs)

    assert len(seen) > 1, "the small budget should have forced chunking"
    for shape in seen:
        assert math.prod(shape) <= budget, f"block {shape} exceeds max_elements={budget}"
    torch.testing.assert_close(chunked, full, atol=1e-12, rtol=0)
    for gc, gf in zip(grads_chunked, grads_full, strict=True):
        torch.testing.assert_close(gc, gf, atol=1e-12, rtol=0)


def test_additive_unchunked_when_within_budget(monkeypatch) -> None:
    seen: list[int] = []
    original = scores_mod._additive_block
    monkeypatch.setattr(scores_mod, "_additive_block", lambda *a: (seen.append(1), original(*a))[1])
    inputs = _additive_inputs()
    additive_score(*inputs[:5], inputs[5], max_elements=2 * 7 * 9 * 5)
    assert len(seen) == 1


def test_additive_module_budget_through_attend(monkeypatch) -> None:
    seen: list[int] = []
    original = scores_mod._additive_block

    def recording(wq, wk, v):
        seen.append(math.prod(wq.shape[:-1]) * wk.shape[-2] * wq.shape[-1])
        return original(wq, wk, v)

    def recording_hidden(wq, wk):  # the chunked path's own blocks (forward and backward)
        seen.append(math.prod(wq.shape[:-1]) * wk.shape[-2] * wq.shape[-1])
        return original_hidden(wq, wk)

    original_hidden = chunks_mod._block
    monkeypatch.setattr(scores_mod, "_additive_block", recording)
    monkeypatch.setattr(chunks_mod, "_block", recording_hidden)
    torch.manual_seed(0)
    sc = AdditiveScore(8, hidden=16, max_elements=500)
    x = torch.randn(2, 10, 8, requires_grad=True)
    out = attend(x, x, x, score=sc).context
    out.sum().backward()
    assert seen and max(seen) <= 500
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_additive_chunked_with_no_queries() -> None:
    sc = AdditiveScore(4, max_elements=10)
    assert sc(torch.randn(2, 0, 4), torch.randn(2, 5, 4)).shape == (2, 0, 5)


def test_additive_on_projected_keys_equals_the_full_score() -> None:
    """Bahdanau 2015, App. A.1.2: U_a h_j precomputed once gives the same scores and
    gradients as projecting the keys inside the score (float64)."""
    from attnkit.stages.scores import AdditiveScore

    torch.manual_seed(0)
    s = AdditiveScore(5, 7, 6).double()
    torch.nn.init.normal_(s.bias)
    q = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 4, 7, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(s.on_projected_keys(q, s.project_keys(k)), s(q, k))
    assert torch.autograd.gradcheck(lambda q, k: s.on_projected_keys(q, s.project_keys(k)), (q, k))
    with pytest.raises(ValueError, match="keys has width 5"):
        s.project_keys(q)
