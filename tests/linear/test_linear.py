"""Linear attention (Katharopoulos et al. 2020): the reassociated kernels against a float64
reference written from eq. 2, the implied weights, padding masks (hypothesis), gradcheck,
the chunked causal sums with no (n, n) tensor, the recurrent step, what it refuses, and the
language model with ``attention="linear"``."""

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from _linear_reference import elu_plus_one, kernel_attention
from _reference import np64
from _spies import only_path
from hypothesis import given, settings
from torch.utils._python_dispatch import TorchDispatchMode

import attnkit
from attnkit.core import attend
from attnkit.linear import (
    LinearState,
    causal_linear_attention,
    linear_attention,
    linear_step,
    step_heads,
)
from attnkit.stages.alignment import CausalAlignment, SlidingWindow
from attnkit.stages.kernels import LinearScore, elu_features, ratio
from attnkit.stages.position import ALiBi, RotaryPosition

pytestmark = pytest.mark.usefixtures("one_thread")

SETTINGS = settings(max_examples=25, deadline=None)


def _ref(q, k, v, causal, keep=None):
    """The reference over (B, H, T, D) inputs, (B, Tk) keep -> context, weights (numpy)."""
    b, h = q.shape[:2]
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    w = np.zeros((*q.shape[:-1], k.shape[-2]))
    for i in range(b):
        for j in range(h):
            pq, pk = elu_plus_one(np64(q[i, j])), elu_plus_one(np64(k[i, j]))
            kk = None if keep is None else np64(keep[i]).astype(bool)
            out[i, j], w[i, j] = kernel_attention(pq, pk, np64(v[i, j]), causal, kk)
    return out, w


def _qkv(b, h, tq, tk, d, dv, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, tq, d, generator=g, dtype=torch.float64) * scale
    k = torch.randn(b, h, tk, d, generator=g, dtype=torch.float64) * scale
    v = torch.randn(b, h, tk, dv, generator=g, dtype=torch.float64)
    return q, k, v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("t", "d", "dv"), [(1, 2, 3), (7, 4, 5), (70, 8, 3)])
def test_fast_path_equals_the_papers_equation(causal, t, d, dv) -> None:
    q, k, v = _qkv(2, 2, t, t, d, dv, seed=t)
    align = CausalAlignment() if causal else None
    with only_path("linear-causal" if causal else "linear"):
        got = attend(q, k, v, score=LinearScore(), normaliser=ratio, align=align,
                     need_weights=False)  # fmt: skip
    want, _ = _ref(q, k, v, causal)
    np.testing.assert_allclose(np64(got.context), want, rtol=1e-10, atol=1e-12)
    assert got.weights is None


@pytest.mark.parametrize("causal", [False, True])
def test_implied_weights_are_the_papers(causal) -> None:
    q, k, v = _qkv(2, 3, 9, 9, 4, 2, seed=3)
    with only_path("implied"):
        got = attend(q, k, v, score=LinearScore(), normaliser=ratio,
                     align=CausalAlignment() if causal else None)  # fmt: skip
    want_ctx, want_w = _ref(q, k, v, causal)
    np.testing.assert_allclose(np64(got.weights), want_w, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(np64(got.context), want_ctx, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got.weights.sum(-1), torch.ones(2, 3, 9, dtype=torch.float64))
    if causal:
        assert bool((got.weights.triu(1) == 0).all())


@st.composite
def padded(draw):
    b, h = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    t = draw(st.integers(1, 12))
    tk = t if draw(st.booleans()) else draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**16))
    scale = draw(st.sampled_from([0.1, 1.0, 4.0]))
    q, k, v = _qkv(b, h, t, tk, draw(st.sampled_from([2, 4])), 3, seed, scale)
    g = torch.Generator().manual_seed(seed + 1)
    keep = torch.rand(b, tk, generator=g) < draw(st.sampled_from([0.3, 0.7, 1.0]))
    return q, k, v, keep


@SETTINGS
@given(data=padded(), causal=st.booleans(), need_weights=st.booleans())
def test_padding_masks_are_honoured(data, causal, need_weights) -> None:
    """A key-padding mask (B, 1, 1, Tk), every path, against eq. 2 over the kept keys; fully
    padded rows give zero, never NaN."""
    q, k, v, keep = data
    if causal and q.shape[-2] != k.shape[-2]:
        k, v = k[..., : q.shape[-2], :], v[..., : q.shape[-2], :]
        keep = keep[:, : q.shape[-2]]
        if k.shape[-2] < q.shape[-2]:
            return
    got = attend(q, k, v, score=LinearScore(), normaliser=ratio, mask=keep[:, None, None, :],
                 align=CausalAlignment() if causal else None, need_weights=need_weights)
    want, want_w = _ref(q, k, v, causal, keep)
    assert bool(torch.isfinite(got.context).all())
    np.testing.assert_allclose(np64(got.context), want, rtol=1e-9, atol=1e-11)
    if need_weights:
        np.testing.assert_allclose(np64(got.weights), want_w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("chunk", [1, 3, 16, 64, 200])
def test_chunk_length_does_not_change_the_result(chunk) -> None:
    q, k, v = _qkv(1, 2, 50, 50, 4, 3, seed=1)
    pq, pk = elu_features(q), elu_features(k)
    want, _ = _ref(q, k, v, causal=True)
    got = causal_linear_attention(pq, pk, v, chunk=chunk)
    np.testing.assert_allclose(np64(got), want, rtol=1e-10, atol=1e-12)


def test_gradcheck() -> None:
    q, k, v = (x.requires_grad_() for x in _qkv(1, 2, 7, 7, 3, 2, seed=5))
    keep = torch.tensor([[True, False, True, True, True, False, True]])
    for align in (None, CausalAlignment()):
        def f(q, k, v, align=align):
            return attend(q, k, v, score=LinearScore(), normaliser=ratio, align=align,
                          mask=keep[:, None, None], need_weights=False).context  # fmt: skip

        assert torch.autograd.gradcheck(f, (q, k, v))
    pq, pk = elu_features(q), elu_features(k)
    assert torch.autograd.gradcheck(lambda a, b, c: causal_linear_attention(a, b, c, chunk=3),
                                    (pq.detach().requires_grad_(), pk.detach().requires_grad_(),
                                     v))  # fmt: skip


class _Largest(TorchDispatchMode):
    """The most elements any op produced (forward and backward)."""

    def __init__(self) -> None:
        super().__init__()
        self.most = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for x in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(x, torch.Tensor):
                self.most = max(self.most, x.numel())
        return out


def test_causal_pass_holds_no_n_by_n_tensor() -> None:
    """Forward and backward at n = 1024 make no tensor of n² elements (nor near it)."""
    n = 1024
    q, k, v = (torch.randn(1, 1, n, 8, requires_grad=True) for _ in range(3))
    with _Largest() as seen:
        out = attend(q, k, v, score=LinearScore(), normaliser=ratio, align=CausalAlignment(),
                     need_weights=False).context  # fmt: skip
        out.square().sum().backward()
    assert seen.most < n * n // 8, seen.most
    assert q.grad is not None and bool(torch.isfinite(q.grad).all())


def test_step_equals_the_parallel_form_token_by_token() -> None:
    q, k, v = _qkv(2, 3, 11, 11, 4, 5, seed=8)
    pq, pk = elu_features(q), elu_features(k)
    full = causal_linear_attention(pq, pk, v, chunk=4)
    state: LinearState | None = None
    for t in range(11):
        ctx, state = linear_step(pq[..., t : t + 1, :], pk[..., t : t + 1, :],
                                 v[..., t : t + 1, :], state)  # fmt: skip
        torch.testing.assert_close(ctx[..., 0, :], full[..., t, :], rtol=1e-12, atol=1e-12)
        assert state.kv.shape == (2, 3, 4, 5) and state.k_sum.shape == (2, 3, 4)


@pytest.mark.parametrize("position", [None, "rope"])
def test_module_step_equals_forward(position) -> None:
    torch.manual_seed(0)
    m = attnkit.build("linear", dim=12, heads=3, align="causal", position=position).double()
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    full = m(x, need_weights=False).context
    state = None
    for t in range(6):
        out, state = step_heads(m, x[:, t : t + 1], state, t)
        torch.testing.assert_close(out[:, 0], full[:, t], rtol=1e-12, atol=1e-12)


def test_build_picks_the_ratio_normaliser() -> None:
    m = attnkit.build("linear", dim=8, heads=2)
    assert isinstance(m.score, LinearScore) and m.normaliser is ratio
    assert attnkit.build("scaled_dot", dim=8, heads=2).normaliser is not ratio
    with pytest.raises(ValueError, match="temperature"):
        attnkit.build("linear", dim=8, heads=2, temperature=0.5)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        (dict(align=SlidingWindow(2)), "SlidingWindow restricts the keys"),
        (dict(mask=torch.ones(5, 5, dtype=torch.bool).tril()), "one row per query"),
        (dict(position=ALiBi(1)), "position bias"),
        (dict(align=CausalAlignment(), positions=torch.arange(5)), "default positions"),
    ],
)
def test_what_it_cannot_honour_is_refused_in_one_line(kw, says) -> None:
    q, k, v = _qkv(1, 1, 5, 5, 4, 2, seed=0)
    with pytest.raises(ValueError, match=says) as err:
        attend(q[0], k[0], v[0], score=LinearScore(), normaliser=ratio, need_weights=False, **kw)
    assert "\n" not in str(err.value) and "honours" in str(err.value)


def test_attention_dropout_is_refused() -> None:
    m = attnkit.build("linear", dim=8, heads=2, dropout=0.1).train()
    with pytest.raises(ValueError, match="dropout=0"):
        m(torch.randn(1, 4, 8))


def test_rope_runs_before_the_features() -> None:
    """RoPE transforms q and k, then φ: the same as rotating by hand."""
    q, k, v = _qkv(1, 2, 6, 6, 4, 3, seed=2)
    rope = RotaryPosition(4)
    got = attend(q, k, v, score=LinearScore(), normaliser=ratio, position=rope,
                 align=CausalAlignment(), need_weights=False).context  # fmt: skip
    pos = torch.arange(6)
    placed = rope(q, k, pos, pos)
    want, _ = _ref(placed.query, placed.keys, v, causal=True)
    np.testing.assert_allclose(np64(got), want, rtol=1e-10, atol=1e-12)


def test_half_inputs_keep_their_dtype() -> None:
    q, k, v = (x.to(torch.bfloat16) for x in _qkv(1, 2, 9, 9, 4, 3, seed=4))
    out = attend(q, k, v, score=LinearScore(), normaliser=ratio, align=CausalAlignment(),
                 need_weights=False).context  # fmt: skip
    assert out.dtype == torch.bfloat16
    want = linear_attention(elu_features(q.double()), elu_features(k.double()), v.double())
    assert out.shape == want.shape


@pytest.mark.parametrize("attention", ["linear", "performer"])
def test_language_model_with_linear_attention(attention) -> None:
    from attnkit.models.lm import TransformerLM, TransformerLMConfig

    torch.manual_seed(0)
    c = TransformerLMConfig(10, 30, dim=16, heads=2, layers=2, ff=32, attention=attention)
    lm = TransformerLM(c)
    ids = torch.randint(1, 30, (2, 9))
    out = lm(ids).logits  # training mode: attention dropout is off for linear attention
    out.logsumexp(-1).mean().backward()
    assert all(p.grad is not None for p in lm.parameters() if p.requires_grad)
    lm.eval()
    with torch.no_grad():
        full = lm(ids).logits
        state = None
        for t in range(9):
            logits, state = lm.step(ids[:, t], state, t)
            torch.testing.assert_close(logits, full[:, t], rtol=1e-4, atol=1e-4)


def test_language_model_config_refuses_what_linear_attention_cannot() -> None:
    from attnkit.models.lm import TransformerLMConfig

    with pytest.raises(ValueError, match="align='causal'"):
        TransformerLMConfig(10, 30, attention="linear", align="sliding-causal", window=2)
    with pytest.raises(ValueError, match="choose one of"):
        TransformerLMConfig(10, 30, attention="kernel")
    with pytest.raises(ValueError, match="features"):
        TransformerLMConfig(10, 30, attention="linear", features=8)


def test_info_shows_linear_attention_under_cost(capsys) -> None:
    from attnkit.cli import main

    assert main(["info"]) == 0
    out = capsys.readouterr().out
    cost = out[out.index("\ncost:") : out.index("\nposition:")]
    for needed in ("restricted", "sparse", "linear", "Performer", 'score="linear"'):
        assert needed in cost, needed
    assert "--rope-scaling yarn" in out
