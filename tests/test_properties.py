"""Properties over random shapes and masks (hypothesis): weights are distributions over the
allowed keys, fully masked rows are zero without NaN (forward and backward), local/sliding
windows equal dense attention with an independently built band mask, one head equals
single-head attend, sparsemax is sparse, self-attention is permutation-equivariant, a query
asked alone at its position gets its row of the full pass."""

import hypothesis.strategies as st
import pytest
import torch
from _reference import band_ref
from hypothesis import given, settings

import attnkit
from attnkit import (
    AttentionHeads,
    Entmax15,
    LocalM,
    SelfAttention,
    SlidingWindow,
    Softmax,
    Sparsemax,
    attend,
)
from attnkit.stages.normalisers import sparsemax

pytestmark = pytest.mark.usefixtures("one_thread")

SETTINGS = settings(max_examples=30, deadline=None)
NORMALISERS = st.sampled_from([Softmax(), Softmax(0.3), Sparsemax(), Entmax15()])


@st.composite
def qkv_and_mask(draw, *, allow_empty_rows: bool = True):
    b = draw(st.integers(1, 3))
    tq = draw(st.integers(1, 6))
    tk = draw(st.integers(1, 7))
    d = draw(st.sampled_from([2, 4]))
    seed = draw(st.integers(0, 2**16))
    scale = draw(st.sampled_from([0.1, 1.0, 5.0]))
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, tq, d, generator=g, dtype=torch.float64) * scale
    k = torch.randn(b, tk, d, generator=g, dtype=torch.float64) * scale
    v = torch.randn(b, tk, 3, generator=g, dtype=torch.float64)
    mask = torch.rand(b, tq, tk, generator=g) < draw(st.sampled_from([0.3, 0.7, 1.0]))
    if not allow_empty_rows:
        mask[..., 0] = True
    return q, k, v, mask


@SETTINGS
@given(data=qkv_and_mask(), norm=NORMALISERS, need_weights=st.booleans())
def test_weights_are_distributions_over_allowed_keys(data, norm, need_weights) -> None:
    q, k, v, mask = data
    q.requires_grad_(True)
    k.requires_grad_(True)
    v.requires_grad_(True)
    out = attend(q, k, v, normaliser=norm, mask=mask, need_weights=need_weights)
    empty = ~mask.any(dim=-1)  # (B, Tq) rows with no allowed key
    assert torch.isfinite(out.context).all()
    assert (out.context[empty] == 0).all()
    if out.weights is not None:
        w = out.weights
        assert (w >= 0).all()
        assert (w[~mask] == 0).all()  # exactly zero on disallowed keys
        assert (w[empty] == 0).all()
        sums = w.sum(dim=-1)[~empty]
        torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-12, rtol=0)
    out.context.sum().backward()
    for x in (q, k, v):
        assert x.grad is not None and torch.isfinite(x.grad).all()
    assert (q.grad[empty] == 0).all()


@SETTINGS
@given(data=qkv_and_mask(allow_empty_rows=False), extra=st.integers(0, 3), norm=NORMALISERS)
def test_local_m_with_wide_window_equals_global(data, extra, norm) -> None:
    q, k, v, mask = data
    # p_t = t lies inside the source when Tq <= Tk; then D >= Tk covers every key. (A target
    # position t > Tk - 1 + D would see no key at all: Luong 2015 does not say what p_t = t
    # means past the end of the source.)
    q, mask = q[..., : k.shape[-2], :], mask[..., : k.shape[-2], :]
    window = k.shape[-2] + extra  # D >= Tk
    a = attend(q, k, v, align=LocalM(window), mask=mask, normaliser=norm)
    b = attend(q, k, v, mask=mask, normaliser=norm)
    torch.testing.assert_close(a.weights, b.weights, atol=1e-12, rtol=0)
    torch.testing.assert_close(a.context, b.context, atol=1e-12, rtol=0)


@SETTINGS
@given(
    data=qkv_and_mask(),
    radius=st.integers(0, 4),
    causal=st.booleans(),
    norm=NORMALISERS,
    need_weights=st.booleans(),
)
def test_sliding_window_equals_dense_with_band_mask(data, radius, causal, norm, need_weights):
    q, k, v, mask = data
    band = band_ref(q.shape[-2], k.shape[-2], radius, causal)  # built with loops
    a = attend(
        q,
        k,
        v,
        align=SlidingWindow(radius, causal=causal),
        mask=mask,
        normaliser=norm,
        need_weights=need_weights,
    )
    b = attend(q, k, v, mask=mask & band, normaliser=norm)
    torch.testing.assert_close(a.context, b.context, atol=1e-12, rtol=0)
    if need_weights:
        torch.testing.assert_close(a.weights, b.weights, atol=1e-12, rtol=0)


@SETTINGS
@given(data=qkv_and_mask(), seed=st.integers(0, 1000), norm=NORMALISERS)
def test_one_head_equals_single_head_attend(data, seed, norm) -> None:
    q, k, v, mask = data
    torch.manual_seed(seed)
    d = q.shape[-1]
    m = AttentionHeads(d, 1, value_dim=3, normaliser=norm).double()
    res = m(q, k, v, mask=mask)
    ref = attend(m.q_proj(q), m.k_proj(k), m.v_proj(v), mask=mask, normaliser=norm)
    torch.testing.assert_close(res.weights[:, 0], ref.weights, atol=1e-12, rtol=0)
    torch.testing.assert_close(res.context, m.out_proj(ref.context), atol=1e-12, rtol=0)


@SETTINGS
@given(
    shape=st.tuples(st.integers(1, 4), st.integers(1, 9)),
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([0.1, 1.0, 10.0]),
)
def test_sparsemax_sums_to_one_with_exact_zeros(shape, seed, scale) -> None:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(*shape, generator=g, dtype=torch.float64) * scale
    p = sparsemax(z)
    torch.testing.assert_close(p.sum(-1), torch.ones(shape[0], dtype=torch.float64))
    assert (p >= 0).all()
    # τ >= max - 1, so every score more than 1 below the row max gets exactly zero weight
    far = z < z.amax(dim=-1, keepdim=True) - 1
    assert (p[far] == 0).all()
    # and the support is a top set: every kept score beats every dropped one
    for row_z, row_p in zip(z, p, strict=True):
        kept, dropped = row_z[row_p > 0], row_z[row_p == 0]
        if len(dropped):
            assert kept.min() >= dropped.max()


@SETTINGS
@given(
    b=st.integers(1, 2),
    t=st.integers(2, 6),
    heads=st.sampled_from([1, 2]),
    score=st.sampled_from(["scaled_dot", "dot", "general", "additive", "cosine"]),
    norm=st.sampled_from(["softmax", "sparsemax", "entmax15"]),
    seed=st.integers(0, 1000),
)
def test_self_attention_is_permutation_equivariant(b, t, heads, score, norm, seed) -> None:
    torch.manual_seed(seed)
    built = attnkit.build(score, dim=4, heads=heads, normaliser=norm).double()
    attn = SelfAttention(4, heads, score=built.score, normaliser=built.normaliser).double()
    x = torch.randn(b, t, 4, dtype=torch.float64)
    lengths = torch.randint(1, t + 1, (b,))
    mask = attnkit.padding_mask(lengths, t)  # (B, 1, T)
    perm = torch.randperm(t)
    out = attn(x, mask=mask)
    out_p = attn(x[:, perm], mask=mask[..., perm])
    torch.testing.assert_close(out_p.context, out.context[:, perm], atol=1e-10, rtol=0)
    torch.testing.assert_close(
        out_p.weights, out.weights[:, :, perm][..., perm], atol=1e-10, rtol=0
    )


@SETTINGS
@given(
    data=qkv_and_mask(),
    radius=st.integers(0, 3),
    kind=st.sampled_from(["causal", "sliding", "sliding-causal", "local-m"]),
    norm=NORMALISERS,
    need_weights=st.booleans(),
)
def test_each_query_at_its_position_is_its_row(data, radius, kind, norm, need_weights) -> None:
    """Asking the queries one at a time, each at its position t, gives the full pass's rows."""
    q, k, v, mask = data
    align = {
        "causal": attnkit.CausalAlignment(),
        "sliding": SlidingWindow(radius),
        "sliding-causal": SlidingWindow(radius, causal=True),
        "local-m": LocalM(radius),
    }[kind]
    full = attend(q, k, v, align=align, mask=mask, normaliser=norm)
    for t in range(q.shape[-2]):
        kw = dict(align=align, normaliser=norm, need_weights=need_weights)
        at = torch.tensor([t])
        row = attend(q[:, t : t + 1], k, v, mask=mask[:, t : t + 1], positions=at, **kw)
        torch.testing.assert_close(row.context[:, 0], full.context[:, t], atol=1e-12, rtol=0)
        if need_weights:
            torch.testing.assert_close(row.weights[:, 0], full.weights[:, t], atol=1e-12, rtol=0)
