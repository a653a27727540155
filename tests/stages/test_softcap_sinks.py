"""Soft-capped scores (Gemma 2) and the sink softmax (gpt-oss): float64 references written
from the formulas, gradcheck, properties with masks and the sliding window, grouped heads,
the gathered-window kernel for a capped score, and the errors."""

import math

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from torch.autograd import gradcheck

import attnkit
import attnkit.core
from attnkit import LocalM, SlidingWindow, attend
from attnkit.stages.scores import ScaledDotScore
from attnkit.stages.sinks import SinkLogits, SinkSoftmax, sink_softmax
from attnkit.stages.softcap import SoftCappedScore, soft_cap
from tests._reference import band_ref, np64, rows
from tests._spies import only_path

pytestmark = pytest.mark.usefixtures("one_thread_module")


def sink_ref(e: np.ndarray, ok: np.ndarray, sink: float) -> np.ndarray:
    """a_j = exp(e_j) / (exp(s) + Σ_{k allowed} exp(e_k)), with loops; 0 where masked."""
    den = math.exp(sink) + sum(math.exp(e[j]) for j in range(len(e)) if ok[j])
    return np.array([math.exp(e[j]) / den if ok[j] else 0.0 for j in range(len(e))])


def capped_ref(q: np.ndarray, k: np.ndarray, cap: float) -> np.ndarray:
    """cap · tanh((q·k / √d) / cap) for every (query, key), with loops."""
    out = np.zeros(q.shape[:-1] + (k.shape[-2],))
    for idx in np.ndindex(*q.shape[:-1]):
        for j in range(k.shape[-2]):
            lead = idx[:-1]
            s = float(np.dot(q[idx], k[lead + (j,)])) / math.sqrt(q.shape[-1])
            out[idx + (j,)] = cap * math.tanh(s / cap)
    return out


def data(b=2, h=3, t=6, d=4, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, t, d, generator=g, dtype=torch.float64) * scale
    k = torch.randn(b, h, t, d, generator=g, dtype=torch.float64) * scale
    v = torch.randn(b, h, t, d, generator=g, dtype=torch.float64)
    return q, k, v


@settings(max_examples=25, deadline=None)
@given(cap=st.floats(0.1, 20.0), t=st.integers(1, 7), radius=st.none() | st.integers(0, 3),
       pad=st.integers(0, 7), seed=st.integers(0, 99))  # fmt: skip
def test_capped_sink_attention_equals_the_float64_formula(cap, t, radius, pad, seed) -> None:
    """cap·tanh(e/cap) scores, sink softmax weights, under a padding mask and a sliding
    window: every row from the formulas; weights sum to 1 - the sink's share, never above."""
    q, k, v = data(t=t, seed=seed)
    sink = torch.randn(3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    mask = torch.arange(t)[None, None, None, :] < torch.tensor([t, max(0, t - pad)])[:, None,
                                                                                     None, None]
    align = None if radius is None else SlidingWindow(radius)
    out = attend(q, k, v, score=SoftCappedScore(ScaledDotScore(), cap), align=align,
                 normaliser=SinkLogits(sink), mask=mask)  # fmt: skip
    e = capped_ref(np64(q), np64(k), cap)  # (B, H, T, T)
    allowed = np64(mask).astype(bool)
    if radius is not None:
        allowed = allowed & np64(band_ref(t, t, radius, causal=False)).astype(bool)
    ok = rows(allowed, e.shape)
    w = np.zeros_like(e)
    for idx in np.ndindex(*e.shape[:-1]):
        w[idx] = sink_ref(e[idx], ok[idx], float(sink[idx[1]]))
    np.testing.assert_allclose(np64(out.scores)[ok], e[ok], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np64(out.weights), w, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(np64(out.context), np.einsum("bhqk,bhkd->bhqd", w, np64(v)),
                               rtol=1e-10, atol=1e-12)  # fmt: skip
    assert (np.abs(np64(out.scores)) <= cap).all()
    assert (w.sum(-1) <= 1).all()


def test_capping_is_the_identity_near_zero_and_bounded_far_out() -> None:
    s = torch.tensor([-1e6, -1e-4, 0.0, 1e-4, 1e6], dtype=torch.float64)
    capped = soft_cap(s, 5.0)
    torch.testing.assert_close(capped[1:4], s[1:4], rtol=1e-8, atol=0)
    assert capped[0] == -5.0 and capped[-1] == 5.0


def test_gradcheck_through_the_cap_and_the_sinks() -> None:
    q, k, v = (x.requires_grad_() for x in data(b=1, h=2, t=4, d=3, scale=1.0))
    sink = torch.randn(2, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([True, True, False, True])

    def f(q, k, v, sink):
        return attend(q, k, v, score=SoftCappedScore(ScaledDotScore(), 1.5), mask=mask,
                      align=SlidingWindow(1, causal=True), normaliser=SinkLogits(sink),
                      need_weights=False).context  # fmt: skip

    assert gradcheck(f, (q, k, v, sink))


def test_a_fully_masked_row_and_huge_scores_give_no_nan() -> None:
    scores = torch.tensor([[[[1e30, -1e30, 0.0], [5.0, 6.0, 7.0]]]], requires_grad=True)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    w = sink_softmax(scores, mask, torch.tensor([0.5]))
    assert torch.isfinite(w).all() and (w[0, 0, 1] == 0).all() and w[0, 0, 0, 2] == 0
    w.sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_the_sink_is_a_key_of_score_s_and_value_zero() -> None:
    """An independent statement of the same thing: softmax over keys + one extra key."""
    q, k, v = data(h=2)
    sink = torch.tensor([0.3, -1.2], dtype=torch.float64)
    out = attend(q, k, v, normaliser=SinkLogits(sink), need_weights=False)
    e = q @ k.transpose(-2, -1) / 2.0  # (B, H, T, T), √d = 2
    e = torch.cat([e, sink[:, None, None].expand(2, 2, 6, 1)], dim=-1)
    vz = torch.cat([v, torch.zeros(2, 2, 1, 4, dtype=torch.float64)], dim=2)
    torch.testing.assert_close(out.context, e.softmax(-1) @ vz, rtol=1e-10, atol=1e-12)


def test_sinks_learn_and_grouped_heads_repeat_for_them() -> None:
    torch.manual_seed(0)
    m = attnkit.build(dim=12, heads=6, kv_heads=2, sinks=True, softcap=4.0, align="causal")
    assert isinstance(m.normaliser, SinkSoftmax) and isinstance(m.score, SoftCappedScore)
    x = torch.randn(2, 5, 12)
    out = m(x)
    assert out.weights.shape == (2, 6, 5, 5)
    assert (out.weights.sum(-1) < 1).all()
    out.context.sum().backward()
    assert m.normaliser.sink.grad is not None and m.normaliser.sink.grad.abs().sum() > 0


def test_a_capped_score_keeps_the_gathered_window_kernel() -> None:
    q, k, v = (x.float() for x in data(t=40))
    score = SoftCappedScore(ScaledDotScore(), 2.0)
    with only_path("gather"):
        fast = attend(q, k, v, score=score, align=LocalM(3), need_weights=False)
    ref = attend(q, k, v, score=score, align=LocalM(3))
    torch.testing.assert_close(fast.context, ref.context, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cap", [0, -1.0, float("inf"), float("nan")])
def test_a_cap_that_is_not_positive_is_refused(cap) -> None:
    with pytest.raises(ValueError, match="give a positive finite number"):
        SoftCappedScore(ScaledDotScore(), cap)
    with pytest.raises(ValueError, match="give a positive finite number"):
        attnkit.build(dim=8, heads=2, softcap=cap)


def test_sinks_need_heads_and_softmax() -> None:
    with pytest.raises(ValueError, match="pass heads=H"):
        attnkit.build(dim=8, sinks=True)
    with pytest.raises(ValueError, match="normaliser='softmax'"):
        attnkit.build(dim=8, heads=2, sinks=True, normaliser="sparsemax")
    with pytest.raises(ValueError, match="one sink logit per head"):
        sink_softmax(torch.zeros(2, 3, 4, 4), None, torch.zeros(2))


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", ["none", "padding", "sliding", "empty-row"])
def test_the_sink_softmax_runs_fused_without_weights(case: str, grad: bool) -> None:
    """No weights asked: the sink is one more key of SDPA (``sink_context`` spied, the
    reference path refused), equal to the reference path's context."""
    q, k, v = data(t=9)
    sink = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    mask, align = None, None
    if case == "padding":
        mask = torch.arange(9)[None, None, None, :] < torch.tensor([9, 4])[:, None, None, None]
    elif case == "sliding":
        align = SlidingWindow(2, causal=True)
    elif case == "empty-row":
        mask = torch.ones(2, 1, 9, 9, dtype=torch.bool)
        mask[1, :, 3] = False  # query 3 of sample 1 sees no key: all its mass on the sink
    calls = []
    real = attnkit.core.sink_context

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp, torch.set_grad_enabled(grad):
        mp.setattr(attnkit.core, "sink_context", spy)
        mp.setattr(attnkit.core, "reference_attention", None)  # it must not run
        fast = attend(q, k, v, normaliser=SinkLogits(sink), mask=mask, align=align,
                      need_weights=False)  # fmt: skip
    assert calls == [1]
    ref = attend(q, k, v, normaliser=SinkLogits(sink), mask=mask, align=align)
    torch.testing.assert_close(fast.context, ref.context, rtol=1e-10, atol=1e-12)
    if case == "empty-row":
        assert (fast.context[1, :, 3] == 0).all()


def test_gradcheck_of_the_fused_sink_path() -> None:
    q, k, v = (x.requires_grad_() for x in data(b=1, h=2, t=4, d=3, scale=1.0))
    sink = torch.randn(2, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([True, True, False, True])
    assert gradcheck(lambda q, k, v, s: attend(q, k, v, normaliser=SinkLogits(s), mask=mask,
                                               need_weights=False).context, (q, k, v, sink))
