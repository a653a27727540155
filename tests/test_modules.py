"""AttentionHeads / SelfAttention / CrossAttention / Attention: the multi-head path equals
SDPA on the module's own projections (need_weights True and False), one head equals attend
on the projected inputs, and gradients pass gradcheck."""

import hypothesis.strategies as st
import pytest
import torch
import torch.nn.functional as F
from einops import rearrange
from hypothesis import given, settings
from torch.autograd import gradcheck

import attnkit
from attnkit import (
    Attention,
    AttentionHeads,
    CausalAlignment,
    CrossAttention,
    GeneralScore,
    SelfAttention,
    attend,
)

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def _sdpa_mha(m: AttentionHeads, q, k, v, mask):
    """Vaswani 2017 §3.2.2 with torch's SDPA: project, split heads, attend, merge, W_O."""
    h = m.heads
    qh = rearrange(F.linear(q, m.q_proj.weight, m.q_proj.bias), "b t (h d) -> b h t d", h=h)
    kh = rearrange(F.linear(k, m.k_proj.weight, m.k_proj.bias), "b t (h d) -> b h t d", h=h)
    vh = rearrange(F.linear(v, m.v_proj.weight, m.v_proj.bias), "b t (h d) -> b h t d", h=h)
    if mask is not None and mask.dim() == 3:
        mask = mask[:, None]
    ctx = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask)
    out = F.linear(rearrange(ctx, "b h t d -> b t (h d)"), m.out_proj.weight, m.out_proj.bias)
    e = (qh @ kh.transpose(-2, -1)) / qh.shape[-1] ** 0.5
    if mask is not None:
        e = e.masked_fill(~mask, float("-inf"))
    return out, torch.softmax(e, dim=-1)


@settings(max_examples=30, deadline=None)
@given(
    b=st.integers(1, 3),
    tq=st.integers(1, 5),
    tk=st.integers(1, 6),
    heads=st.sampled_from([1, 2, 4]),
    kind=st.sampled_from(["none", "padding", "causal", "full"]),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    seed=st.integers(0, 1000),
)
def test_multihead_equals_sdpa(b, tq, tk, heads, kind, dtype, seed) -> None:
    torch.manual_seed(seed)
    m = AttentionHeads(8, heads, key_dim=6, value_dim=5).to(dtype)
    q = torch.randn(b, tq, 8, dtype=dtype)
    k = torch.randn(b, tk, 6, dtype=dtype)
    v = torch.randn(b, tk, 5, dtype=dtype)
    mask = None
    if kind == "padding":
        mask = attnkit.padding_mask(torch.randint(1, tk + 1, (b,)), tk)  # (B, 1, Tk)
    elif kind == "causal":
        mask = torch.ones(tq, tk, dtype=torch.bool).tril()
    elif kind == "full":
        mask = torch.rand(b, tq, tk) > 0.5
        mask[..., 0] = True
    out_ref, w_ref = _sdpa_mha(m, q, k, v, mask)
    for need in (True, False):
        res = m(q, k, v, mask=mask, need_weights=need)
        torch.testing.assert_close(res.context, out_ref, atol=TOL[dtype], rtol=0)
        if need:
            torch.testing.assert_close(res.weights, w_ref, atol=TOL[dtype], rtol=0)
        else:
            assert res.weights is None
    avg = m(q, k, v, mask=mask, average_weights=True).weights
    torch.testing.assert_close(avg, w_ref.mean(dim=1), atol=TOL[dtype], rtol=0)


def test_one_head_equals_attend_on_projections() -> None:
    torch.manual_seed(0)
    m = AttentionHeads(6, 1, score=GeneralScore(6), align=CausalAlignment()).double()
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    mask = attnkit.padding_mask(torch.tensor([5, 3]))
    res = m(x, mask=mask)
    q, k, v = m.q_proj(x), m.k_proj(x), m.v_proj(x)
    ref = attend(q, k, v, score=m.score, align=CausalAlignment(), mask=mask)
    torch.testing.assert_close(res.weights[:, 0], ref.weights)
    torch.testing.assert_close(res.context, m.out_proj(ref.context))


def test_self_and_cross_attention_are_multihead_with_tied_inputs() -> None:
    torch.manual_seed(0)
    sa = SelfAttention(8, 2)
    x = torch.randn(2, 4, 8)
    torch.testing.assert_close(sa(x).context, AttentionHeads.forward(sa, x, x, x).context)
    ca = CrossAttention(8, 2, key_dim=3)
    mem = torch.randn(2, 6, 3)
    res = ca(x, mem)
    assert res.context.shape == (2, 4, 8) and res.weights.shape == (2, 2, 4, 6)
    torch.testing.assert_close(res.context, AttentionHeads.forward(ca, x, mem, mem).context)


def test_attention_module_values_default_to_keys() -> None:
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    att = Attention()
    torch.testing.assert_close(att(q, k).context, attend(q, k, k).context)


def test_dropout_only_in_training() -> None:
    torch.manual_seed(0)
    m = AttentionHeads(8, 2, dropout=0.5)
    x = torch.randn(2, 6, 8)
    m.eval()
    a, b = m(x).context, m(x).context
    torch.testing.assert_close(a, b)
    m.train()
    assert not torch.allclose(m(x).context, a)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_gradcheck_with_mask(need_weights: bool) -> None:
    torch.manual_seed(0)
    m = AttentionHeads(4, 2).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    mask = attnkit.padding_mask(torch.tensor([3, 2]))
    params = tuple(m.parameters())

    def f(x, *ps):
        return m(x, mask=mask, need_weights=need_weights).context

    assert gradcheck(f, (x, *params), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_causal_alignment_equals_sdpa_is_causal(need_weights: bool) -> None:
    torch.manual_seed(0)
    m = AttentionHeads(8, 2, align=CausalAlignment())
    x = torch.randn(2, 6, 8)
    h = 2
    qh, kh, vh = (
        rearrange(p(x), "b t (h d) -> b h t d", h=h) for p in (m.q_proj, m.k_proj, m.v_proj)
    )
    ctx = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
    expected = m.out_proj(rearrange(ctx, "b h t d -> b t (h d)"))
    got = m(x, need_weights=need_weights).context
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_self_attention_step_equals_the_causal_row_it_replaces() -> None:
    """Incremental decoding: position t attending its cached past equals row t of the causal
    forward pass over the whole prefix (values, in float64)."""
    from attnkit.modules import SelfAttention
    from attnkit.stages.alignment import CausalAlignment

    torch.manual_seed(0)
    m = SelfAttention(8, 2, align=CausalAlignment()).double()
    x = torch.randn(3, 5, 8, dtype=torch.float64)  # (B, T, D)
    full = m(x).context  # (B, T, D)
    cache = m.empty_cache(3, x)
    for t in range(5):
        result, cache = m.step(x[:, t : t + 1], cache)  # (B, 1, D); cache (B, H, t+1, Dh)
        torch.testing.assert_close(result.context[:, 0], full[:, t], rtol=1e-12, atol=1e-12)
        assert cache[0].shape == cache[1].shape == (3, 2, t + 1, 4)
    k, v = m.project_keys(x)  # the cache holds the projected rows, each projected once
    torch.testing.assert_close(cache[0], k, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(cache[1], v, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="use forward"):
        SelfAttention(8, 2).step(x[:, :1].float(), m.empty_cache(3, x.float()))
    with pytest.raises(ValueError, match=r"one position x \(B, 1, D\)"):
        m.step(x[:, :2], m.empty_cache(3, x))
