"""Alignments against loop references: causal, sliding window (symmetric and look-back),
local-m, and local-p (Luong 2015 eqs. 9-10: p_t = S·sigmoid(v_pᵀ tanh(W_p h_t)), window
[p_t - D, p_t + D], Gaussian prior with σ = D/2); gradcheck through attend."""

import math

import numpy as np
import pytest
import torch
from _reference import attention_ref, band_ref, dot_ref, np64, sigmoid, softmax_row
from torch.autograd import gradcheck

import attnkit
from attnkit import (
    CausalAlignment,
    GlobalAlignment,
    LocalM,
    LocalP,
    SlidingWindow,
    attend,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _qkv(tq: int = 6, tk: int = 7, d: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, tq, d, generator=g, dtype=torch.float64)
    k = torch.randn(2, tk, d, generator=g, dtype=torch.float64)
    v = torch.randn(2, tk, 3, generator=g, dtype=torch.float64)
    return q, k, v


def _dense_ref(q, k, v, allowed: np.ndarray):
    scores = dot_ref(np64(q), np64(k), scale=1 / math.sqrt(q.shape[-1]))
    return attention_ref(scores, allowed, np64(v))


def test_global_alignment_keeps_user_mask() -> None:
    q, k, _ = _qkv()
    mask = attnkit.padding_mask(torch.tensor([7, 3]))
    spec = GlobalAlignment()(q, k, mask)
    assert spec.mask is mask and spec.prior is None
    assert GlobalAlignment()(q, k).mask is None


def test_causal_alignment_matches_loops() -> None:
    q, k, v = _qkv(tq=5, tk=5)
    allowed = np.array([[j <= i for j in range(5)] for i in range(5)])
    ctx, w = _dense_ref(q, k, v, allowed)
    out = attend(q, k, v, align=CausalAlignment())
    np.testing.assert_allclose(out.weights.numpy(), w, atol=1e-12)
    np.testing.assert_allclose(out.context.numpy(), ctx, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("radius", [0, 1, 3])
def test_sliding_window_matches_loops(radius: int, causal: bool) -> None:
    q, k, v = _qkv(tq=6, tk=6)
    pad = attnkit.padding_mask(torch.tensor([6, 4]))  # (B, 1, Tk)
    allowed = band_ref(6, 6, radius, causal)[None] & pad
    ctx, w = _dense_ref(q, k, v, allowed.numpy())
    out = attend(q, k, v, align=SlidingWindow(radius, causal=causal), mask=pad)
    np.testing.assert_allclose(out.weights.numpy(), w, atol=1e-12)
    np.testing.assert_allclose(out.context.numpy(), ctx, atol=1e-12)


@pytest.mark.parametrize("window", [0, 2])
def test_local_m_matches_loops(window: int) -> None:
    q, k, v = _qkv(tq=5, tk=7)
    allowed = np.array([[abs(s - t) <= window for s in range(7)] for t in range(5)])
    ctx, w = _dense_ref(q, k, v, allowed)
    out = attend(q, k, v, align=LocalM(window))
    np.testing.assert_allclose(out.weights.numpy(), w, atol=1e-12)
    np.testing.assert_allclose(out.context.numpy(), ctx, atol=1e-12)
    torch.testing.assert_close(out.extras["position"], torch.arange(5, dtype=torch.float64))


def _local_p_ref(q, k, v, lp: LocalP, lengths: list[int]):
    """Luong 2015 local-p, one query at a time: predict p_t, softmax over the scaled-dot scores
    inside [p_t - D, p_t + D] (and inside the source length S), times exp(-(s - p_t)²/(2σ²))."""
    qn, kn, vn = np64(q), np64(k), np64(v)
    wp, vp = np64(lp.w_p), np64(lp.v_p)
    d_win = lp.window
    sigma = d_win / 2
    b, tq, dq = qn.shape
    tk = kn.shape[1]
    weights = np.zeros((b, tq, tk))
    positions = np.zeros((b, tq))
    for i in range(b):
        src_len = lengths[i]
        for t in range(tq):
            p_t = src_len * sigmoid(float(vp @ np.tanh(wp @ qn[i, t])))
            positions[i, t] = p_t
            e = np.array([float(qn[i, t] @ kn[i, s]) / math.sqrt(dq) for s in range(tk)])
            ok = np.array([s < src_len and abs(s - p_t) <= d_win for s in range(tk)])
            a = softmax_row(e, ok)
            for s in range(tk):
                a[s] *= math.exp(-((s - p_t) ** 2) / (2 * sigma**2))
            weights[i, t] = a
    return np.einsum("bqk,bkd->bqd", weights, vn), weights, positions


@pytest.mark.parametrize("masked", [False, True])
def test_local_p_matches_luong_reference(masked: bool) -> None:
    torch.manual_seed(3)
    q, k, v = _qkv(tq=5, tk=9, seed=3)
    lp = LocalP(4, window=2).double()
    torch.nn.init.normal_(lp.v_p, std=2.0)  # spread the predicted positions over the source
    lengths = [9, 6] if masked else [9, 9]
    mask = attnkit.padding_mask(torch.tensor(lengths)) if masked else None
    out = attend(q, k, v, align=lp, mask=mask)
    ctx, w, pos = _local_p_ref(q, k, v, lp, lengths)
    np.testing.assert_allclose(out.extras["position"].detach().numpy(), pos, atol=1e-12)
    np.testing.assert_allclose(out.weights.detach().numpy(), w, atol=1e-12)
    np.testing.assert_allclose(out.context.detach().numpy(), ctx, atol=1e-12)
    position = out.extras["position"]
    assert (position >= 0).all() and (position <= torch.tensor(lengths)[:, None]).all()


def test_local_p_prior_is_gaussian_with_sigma_half_window() -> None:
    # With one key inside the window, softmax gives it weight 1; the weight left is the prior.
    q, k, v = _qkv(tq=1, tk=9)
    lp = LocalP(4, window=2).double()
    out = attend(q, k, v, align=lp)
    p = out.extras["position"]  # (B, Tq)
    s = torch.arange(9, dtype=torch.float64)
    inside = (s - p[..., None]).abs() <= 2
    assert (out.weights[~inside] == 0).all()
    prior = torch.exp(-((s - p[..., None]) ** 2) / (2 * 1.0**2))  # σ = D / 2 = 1
    ratio = out.weights[inside] / prior[inside]  # = the softmax weights inside the window
    e = (q @ k.transpose(-2, -1)) / 2
    soft = torch.softmax(e.masked_fill(~inside, float("-inf")), dim=-1)
    torch.testing.assert_close(ratio, soft[inside].detach())


@pytest.mark.parametrize(
    "align",
    [
        lambda: CausalAlignment(),
        lambda: SlidingWindow(1),
        lambda: SlidingWindow(2, causal=True),
        lambda: LocalM(1),
        lambda: LocalP(4, window=2),
    ],
    ids=["causal", "sliding", "sliding-causal", "local-m", "local-p"],
)
def test_alignment_gradcheck_with_mask(align) -> None:
    torch.manual_seed(1)
    al = align().double()
    q, k, v = (x.requires_grad_(True) for x in _qkv(tq=4, tk=5, seed=1))
    mask = attnkit.padding_mask(torch.tensor([5, 3]))
    params = tuple(al.parameters())

    def f(q, k, v, *ps):
        return attend(q, k, v, align=al, mask=mask).context

    assert gradcheck(f, (q, k, v, *params), eps=1e-6, atol=1e-6)


def test_local_m_wide_window_equals_global() -> None:
    q, k, v = _qkv(tq=5, tk=7)
    a = attend(q, k, v, align=LocalM(7))
    b = attend(q, k, v)
    torch.testing.assert_close(a.context, b.context, atol=1e-12, rtol=0)
    torch.testing.assert_close(a.weights, b.weights, atol=1e-12, rtol=0)


def test_alignments_repr_their_window() -> None:
    assert "radius=3" in repr(SlidingWindow(3))
    assert "window=2" in repr(LocalM(2))
    assert "window=2" in repr(LocalP(4, 2))


def test_gaussian_window_edges_are_inclusive_and_sigma_is_half_window() -> None:
    from attnkit.stages.alignment import gaussian_window

    position = torch.tensor([[2.0, 0.0]], dtype=torch.float64)  # (B, Tq)
    window, prior = gaussian_window(position, 6, 2)
    assert window.tolist() == [
        [[s in (0, 1, 2, 3, 4) for s in range(6)], [s in (0, 1, 2) for s in range(6)]]
    ]
    expected = [[math.exp(-((s - p) ** 2) / 2) for s in range(6)] for p in (2.0, 0.0)]  # σ = 1
    np.testing.assert_allclose(prior[0].numpy(), expected, atol=1e-15)


def test_predict_position_is_source_length_times_sigmoid() -> None:
    from attnkit.stages.alignment import predict_position

    h = torch.tensor([[0.5, -1.0]], dtype=torch.float64)  # (Tq, Dq)
    w_p = torch.tensor([[1.0, 2.0], [0.0, -1.0]], dtype=torch.float64)  # (A, Dq)
    v_p = torch.tensor([0.7, -0.3], dtype=torch.float64)
    hidden = [math.tanh(0.5 * 1 + -1.0 * 2), math.tanh(0.5 * 0 + -1.0 * -1)]
    expected = 9 * sigmoid(0.7 * hidden[0] - 0.3 * hidden[1])
    got = predict_position(h, w_p, v_p, torch.tensor(9.0, dtype=torch.float64))
    assert abs(got.item() - expected) < 1e-14


ROW_ALIGNMENTS = {
    "global": lambda: GlobalAlignment(),
    "causal": lambda: CausalAlignment(),
    "sliding": lambda: SlidingWindow(1),
    "sliding-causal": lambda: SlidingWindow(2, causal=True),
    "local-m": lambda: LocalM(1),
    "local-p": lambda: LocalP(4, window=2),
}


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("name", sorted(ROW_ALIGNMENTS))
def test_one_query_at_its_position_is_that_row_of_the_full_pass(name: str, need_weights) -> None:
    """An incremental decoder asks one query at a time, at step t: it must get row t of the
    full pass (Tq = 6 queries at positions 0 .. 5), on the fast and the reference paths."""
    torch.manual_seed(0)
    align = ROW_ALIGNMENTS[name]().double()
    q, k, v = _qkv(tq=6, tk=7)
    mask = attnkit.padding_mask(torch.tensor([7, 4]))  # (B, 1, Tk)
    full = attend(q, k, v, align=align, mask=mask)  # weights (B, Tq, Tk)
    for t in range(6):
        for positions in (torch.tensor([t]), torch.full((2, 1), t), torch.tensor([float(t)])):
            kw = dict(align=align, mask=mask, need_weights=need_weights)
            row = attend(q[:, t : t + 1], k, v, positions=positions, **kw)
            torch.testing.assert_close(row.context[:, 0], full.context[:, t])
            if need_weights:
                torch.testing.assert_close(row.weights[:, 0], full.weights[:, t])
            if "position" in full.extras:
                p = full.extras["position"]
                p_t = p[t] if p.dim() == 1 else p[:, t]
                got = row.extras["position"].expand(2, 1)[:, 0]  # (1,) or (B, 1) -> (B,)
                torch.testing.assert_close(got, p_t.expand(2))


@pytest.mark.parametrize(
    "align,allows",
    [
        (lambda: SlidingWindow(2), lambda p, j: abs(p - j) <= 2),
        (lambda: SlidingWindow(2, causal=True), lambda p, j: 0 <= p - j <= 2),
        (lambda: CausalAlignment(), lambda p, j: j <= p),
    ],
    ids=["sliding", "sliding-causal", "causal"],
)
def test_windows_at_given_positions_match_loops(align, allows) -> None:
    q, k, v = _qkv(tq=3, tk=7)
    at = torch.tensor([[5, 0, 6], [2, 2, 9]])  # (B, Tq): queries out of order, one past Tk
    allowed = np.array([[[allows(p, j) for j in range(7)] for p in row] for row in at.tolist()])
    ctx, w = _dense_ref(q, k, v, allowed)  # (B, Tq, Tk) built with loops
    for need in (True, False):
        out = attend(q, k, v, align=align(), positions=at, need_weights=need)
        np.testing.assert_allclose(out.context.numpy(), ctx, atol=1e-12)
        if need:
            np.testing.assert_allclose(out.weights.numpy(), w, atol=1e-12)


def test_local_m_at_given_positions_matches_loops() -> None:
    q, k, v = _qkv(tq=4, tk=9)
    at = torch.tensor([7.0, 0.0, 2.5, 12.0])  # p_t: a real step, and one past the source
    allowed = np.array([[abs(s - p) <= 2 for s in range(9)] for p in at.tolist()])
    ctx, w = _dense_ref(q, k, v, allowed)
    for need in (True, False):
        out = attend(q, k, v, align=LocalM(2), positions=at, need_weights=need)
        np.testing.assert_allclose(out.context.numpy(), ctx, atol=1e-12)
        if need:
            np.testing.assert_allclose(out.weights.numpy(), w, atol=1e-12)
        torch.testing.assert_close(out.extras["position"], at.double())


def test_alignments_declare_their_fast_path_capabilities() -> None:
    q, k, _ = _qkv()
    assert SlidingWindow(3, causal=True).sliding_band(q) == attnkit.stages.alignment.Band(3, True)
    assert SlidingWindow(3).key_window(q, k) is None  # a dense band is cheaper for big radii
    assert CausalAlignment().sliding_band(q) is None and GlobalAlignment().key_window(q, k) is None
    band = LocalM(2).sliding_band(q)
    assert band is not None and band.radius == 2 and not band.causal
    win = LocalM(2).key_window(q, k)
    assert win.width == 5 and win.start.tolist() == [-2, -1, 0, 1, 2, 3]
    assert LocalM(2).key_window(q, k, positions=torch.tensor([0.5])).width == 6
    assert LocalP(4, 2).key_window(q.float(), k.float()).width == 6  # floor(p) - D .. + D + 1
