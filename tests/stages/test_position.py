"""Position stages (attnkit.stages.position) against float64 references written from the papers
(tests/_position_reference.py): ALiBi, RoPE, T5, Shaw, Transformer-XL, learned absolute.
Weights are distributions over the allowed keys with masks, causal and sliding alignments;
gradcheck in float64; incremental decoding equals the full pass; the fused paths are taken."""

import math

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from _position_reference import (
    alibi_scores,
    alibi_slopes_ref,
    learned_scores,
    rope_scores,
    shaw_scores,
    t5_bucket_ref,
    t5_scores,
    xl_scores,
)
from _reference import softmax_row
from hypothesis import given, settings

import attnkit
from attnkit import CausalAlignment, LocalM, SelfAttention, SlidingWindow, attend
from attnkit.registry import build_position, names
from attnkit.stages.position import (
    alibi_slopes,
    learned_offsets,
    rotate,
    shaw_bias,
    t5_bias,
    t5_bucket,
    xl_bias,
    xl_bias_factored,
)

pytestmark = pytest.mark.usefixtures("one_thread")

SETTINGS = settings(max_examples=40, deadline=None)
NAMES = ("alibi", "learned", "rope", "shaw", "t5", "xl")


def _stage(name: str, heads: int, d: int, seed: int = 0, causal: bool = False):
    """The registry's stage in float64 with every parameter random (u, v start at zero)."""
    stage = build_position(name, heads, d, max_len=32, causal=causal).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in stage.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
    return stage


def _ref_scores(name, stage, q, k, qp, kp) -> np.ndarray:
    """The reference's scores for the stage's parameters: q (B, H, Tq, D) -> (B, H, Tq, Tk)."""
    q, k = q.numpy(), k.numpy()
    qp, kp = qp.tolist(), kp.tolist()
    p = {n: t.detach().numpy() for n, t in stage.named_parameters()}
    if name == "alibi":
        return alibi_scores(q, k, qp, kp, alibi_slopes_ref(q.shape[1]))
    if name == "rope":
        return rope_scores(q, k, qp, kp)
    if name == "t5":
        return t5_scores(q, k, qp, kp, p["table"], stage.max_distance, stage.bidirectional)
    if name == "shaw":
        return shaw_scores(q, k, qp, kp, p["table"])
    if name == "xl":
        return xl_scores(q, k, qp, kp, p["w_r"], p["u"][:, 0], p["v"][:, 0])
    return learned_scores(q, k, qp, kp, p["p_query"], p["p_keys"])


def _ref_attention(scores: np.ndarray, allowed: np.ndarray, values: np.ndarray):
    """Softmax over the allowed keys per row, then Σ_j a_ij v_j."""
    ok = np.broadcast_to(allowed, scores.shape)
    w = np.zeros_like(scores)
    for idx in np.ndindex(*scores.shape[:-1]):
        w[idx] = softmax_row(scores[idx], ok[idx])
    return np.einsum("bhqk,bhkd->bhqd", w, values), w


@st.composite
def cases(draw):
    b, h = draw(st.integers(1, 2)), draw(st.sampled_from([1, 2, 4]))
    t = draw(st.integers(1, 7))
    d = draw(st.sampled_from([2, 4]))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, h, t, d, generator=g, dtype=torch.float64) for _ in range(3))
    lengths = torch.tensor(draw(st.lists(st.integers(0, t), min_size=b, max_size=b)))
    pad = (torch.arange(t) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
    mask = draw(st.sampled_from([None, pad]))
    return q, k, v, mask, seed


@SETTINGS
@given(
    case=cases(),
    name=st.sampled_from(NAMES),
    align=st.sampled_from(["global", "causal", "sliding-1", "sliding-causal-2"]),
    need_weights=st.booleans(),
)
def test_positioned_attention_equals_reference(case, name, align, need_weights) -> None:
    """Weights sum to one over the allowed keys (zero elsewhere, zero rows where none is
    allowed) and equal the reference, context too; masks and alignments compose."""
    q, k, v, mask, seed = case
    b, h, t, d = q.shape
    stage = _stage(name, h, d, seed, causal="causal" in align)
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    allowed = np.ones((b, 1, t, t), dtype=bool) if mask is None else mask.numpy().copy()
    alignment = None
    if align == "causal":
        alignment, allowed = CausalAlignment(), allowed & (j <= i)
    elif align == "sliding-1":
        alignment, allowed = SlidingWindow(1), allowed & (abs(i - j) <= 1)
    elif align == "sliding-causal-2":
        alignment, allowed = SlidingWindow(2, causal=True), allowed & (i - j >= 0) & (i - j <= 2)
    pos = torch.arange(t)
    ref_ctx, ref_w = _ref_attention(_ref_scores(name, stage, q, k, pos, pos), allowed, v.numpy())
    out = attend(q, k, v, align=alignment, mask=mask, position=stage, need_weights=need_weights)
    np.testing.assert_allclose(out.context.detach().numpy(), ref_ctx, atol=1e-10)
    if need_weights:
        w = out.weights.detach().numpy()
        np.testing.assert_allclose(w, ref_w, atol=1e-10)
        full = np.broadcast_to(allowed, w.shape)
        assert (w[~full] == 0).all()
        sums = w.sum(-1)
        np.testing.assert_allclose(sums[full.any(-1)], 1.0, atol=1e-12)
        assert (sums[~full.any(-1)] == 0).all()


@pytest.mark.parametrize("name", NAMES)
def test_positions_given_equal_reference_at_those_positions(name) -> None:
    """Queries at 5 .. 7 over keys at 3 .. 7 (a decoder's later steps): the reference at
    those positions."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 2, n, 4, generator=g, dtype=torch.float64) for n in (3, 5, 5))
    stage = _stage(name, 2, 4, 3)
    qp, kp = torch.arange(5, 8), torch.arange(3, 8)
    out = attend(q, k, v, position=stage, positions=qp, key_positions=kp)
    ref_ctx, ref_w = _ref_attention(
        _ref_scores(name, stage, q, k, qp, kp), np.ones((1, 1, 3, 5), bool), v.numpy()
    )
    np.testing.assert_allclose(out.weights.detach().numpy(), ref_w, atol=1e-10)
    np.testing.assert_allclose(out.context.detach().numpy(), ref_ctx, atol=1e-10)


def test_alibi_slopes_are_the_papers() -> None:
    for heads in (1, 2, 4, 8, 16):
        np.testing.assert_allclose(alibi_slopes(heads).numpy(), alibi_slopes_ref(heads))
    # not a power of two: the slopes of 4 heads, then every other slope of 8 (authors' code)
    np.testing.assert_allclose(alibi_slopes(6).numpy(), [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3])


def test_t5_buckets_are_the_papers() -> None:
    rel = torch.arange(-300, 301)
    for bidirectional in (True, False):
        for buckets, far in ((32, 128), (8, 20)):
            got = t5_bucket(rel, buckets, far, bidirectional).tolist()
            want = [t5_bucket_ref(r, buckets, far, bidirectional) for r in rel.tolist()]
            assert got == want
    one = torch.tensor([0, -1, 1, -8, -200, 200])  # j - i
    assert t5_bucket(one, 32, 128, True).tolist() == [0, 1, 17, 8, 15, 31]
    assert t5_bucket(one, 32, 128, False).tolist() == [0, 1, 0, 8, 31, 0]


def test_rope_scores_depend_on_the_offset_only() -> None:
    """Su et al. 2021, eq. 16: q_mᵀk_n depends on n - m; shifting every position changes
    nothing, and the rotation keeps each vector's norm."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(5, 8, generator=g, dtype=torch.float64), torch.randn(5, 8, generator=g)
    k = k.double()
    pos = torch.arange(5)
    base = rotate(q, pos) @ rotate(k, pos).T
    shifted = rotate(q, pos + 37) @ rotate(k, pos + 37).T
    torch.testing.assert_close(base, shifted)
    torch.testing.assert_close(rotate(q, pos).norm(dim=-1), q.norm(dim=-1))
    assert not torch.allclose(base, rotate(q, pos) @ rotate(k, pos.flip(0)).T)


def test_pure_functions_gradcheck() -> None:
    """float64 gradcheck of every position function in its tensors (queries, keys, tables)."""
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)

    qp, kp = torch.arange(4), torch.arange(5)
    rel = kp[None, :] - qp[:, None]  # (Tq, Tk)
    q, k = r(2, 3, 4, 6), r(2, 3, 5, 6)
    checks = [
        (lambda x: rotate(x, qp), (q,)),
        (lambda x: rotate(x, qp.double() + 0.5), (q,)),
        (lambda tab: t5_bias(qp, kp, tab, 16, True), (r(3, 8),)),
        (lambda x, tab: shaw_bias(x, rel, tab, 0.4), (q, r(5, 6))),
        (lambda x, y, w, u, v: xl_bias(x, y, -rel, w, u, v, 0.4),
         (q, k, r(3, 6, 4), r(3, 1, 6), r(3, 1, 6))),  # fmt: skip
        (lambda x, y, w, u, v: xl_bias_factored(x, y, qp + 7, kp, w, u, v, 0.4),
         (q, k, r(3, 6, 4), r(3, 1, 6), r(3, 1, 6))),  # fmt: skip
        (lambda tab: learned_offsets(qp, tab), (r(3, 7, 6),)),
    ]
    for fn, args in checks:
        assert torch.autograd.gradcheck(fn, args)


@pytest.mark.parametrize("name", NAMES)
def test_attend_gradcheck(name) -> None:
    """Through attend, with a mask: the reference path (weights), the fused one (causal, no
    weights) and the O(n·w) kernels (sliding window, no weights)."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 2, 4, 4, generator=g, dtype=torch.float64) for _ in range(3))
    for x in (q, k, v):
        x.requires_grad_(True)
    mask = attnkit.padding_mask(torch.tensor([4, 2]))[:, None]  # (B, 1, 1, Tk)
    stage = _stage(name, 2, 4)
    for need, align in ((True, CausalAlignment()), (False, CausalAlignment()),
                        (False, SlidingWindow(1))):  # fmt: skip
        assert torch.autograd.gradcheck(
            lambda q, k, v, need=need, align=align: attend(
                q, k, v, align=align, mask=mask, position=stage, need_weights=need
            ).context,
            (q, k, v),
        )


@pytest.mark.parametrize("name", NAMES)
def test_decoding_steps_equal_the_full_pass(name) -> None:
    """SelfAttention.step at t (query at t, keys 0 .. t) equals row t of the causal pass."""
    torch.manual_seed(0)
    stage = _stage(name, 2, 4, causal=True)
    attn = SelfAttention(8, 2, align=CausalAlignment(), position=stage).double().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    full = attn(x, need_weights=False).context  # (B, T, D)
    cache = attn.empty_cache(2, x)
    for t in range(5):
        out, cache = attn.step(x[:, t : t + 1], cache)
        torch.testing.assert_close(out.context[:, 0], full[:, t])


def test_fused_paths_are_taken() -> None:
    """RoPE and learned positions transform q and k, then the fused SDPA and sliding-window
    kernels run; a bias (ALiBi, T5, ...) goes to SDPA as its float mask. Each equals the
    reference path."""
    from _spies import only_path

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 20, 8, generator=g) for _ in range(3))  # 20 x 20: over COLUMN
    mask = attnkit.padding_mask(torch.tensor([20, 13]))[:, None]  # (B, 1, 1, Tk)
    for name in NAMES:
        stage = build_position(name, 2, 8, max_len=32)
        with torch.no_grad():
            for p in stage.parameters():
                p.normal_(generator=g)
        for align in (None, CausalAlignment()):
            with only_path("reference"):
                ref = attend(q, k, v, align=align, mask=mask, position=stage).context
            with only_path("sdpa"):
                fast = attend(q, k, v, align=align, mask=mask, position=stage, need_weights=False)
            torch.testing.assert_close(fast.context, ref, atol=1e-5, rtol=1e-5)
        # a transform of q and k: the O(n·w) band kernel; a bias at gathered keys: the
        # gathered window; XL's bias (it reads every key for uᵀk_j): SDPA with a dense mask
        kernel = {"rope": "sliding", "learned": "sliding", "xl": "sdpa"}.get(name, "gather")
        for band in (SlidingWindow(3), SlidingWindow(3, causal=True), LocalM(2)):
            with only_path("reference"):
                ref = attend(q, k, v, align=band, mask=mask, position=stage).context
            with only_path(kernel):  # local-m at t: the band |s - t| <= D
                fast = attend(q, k, v, align=band, mask=mask, position=stage, need_weights=False)
            torch.testing.assert_close(fast.context, ref, atol=1e-5, rtol=1e-5)
    small = q[:, :, :5]  # 5 x 5 scores without autograd: a decoder's column path, rotated
    rope = build_position("rope", 2, 8)
    with only_path("reference"):  # with autograd on: the reference path
        ref = attend(small, small, small, position=rope).context
    with torch.no_grad():
        with only_path("column"):
            fast = attend(small, small, small, position=rope, need_weights=False)
    torch.testing.assert_close(fast.context, ref, atol=1e-5, rtol=1e-5)


def test_build_with_position() -> None:
    """attnkit.build(..., position=NAME): the stage per head, the same as attend on the
    module's own projections; unknown names and unfit options refused with the choices."""
    torch.manual_seed(0)
    assert names("position") == NAMES
    x = torch.randn(2, 6, 8)
    for name in NAMES:
        mha = attnkit.build(dim=8, heads=2, align="causal", position=name)
        q, k, v = mha.project_qkv(x)
        want = attend(q, k, v, align=CausalAlignment(), position=mha.position).context
        got = mha(x).context
        torch.testing.assert_close(got, mha.out_proj(want.transpose(1, 2).flatten(2)))
        single = attnkit.build(dim=8, position=name)  # one head of width 8
        assert single(x[:, :, :8], x).weights.shape == (2, 6, 6)
    assert mha.position is not None
    with pytest.raises(ValueError, match=r"unknown position 'sinus'.*'alibi'"):
        attnkit.build(dim=8, heads=2, position="sinus")
    with pytest.raises(ValueError, match="odd"):
        attnkit.build(dim=6, heads=2, position="rope")
    with pytest.raises(ValueError, match="max_len"):
        attnkit.build(dim=8, heads=2, position="learned", max_len=4)(x)
    with pytest.raises(ValueError, match="one width"):
        attnkit.build(dim=8, key_dim=4, position="alibi")
    with pytest.raises(ValueError, match="no position bias"):
        attend(x, x, x, align=SlidingWindow(2), position=build_position("alibi", 1, 8),
               weights_layout="band")  # fmt: skip
    with pytest.raises(ValueError, match="key_positions"):
        attend(x, x, x, key_positions=torch.arange(6))
    assert math.isclose(float(build_position("alibi", 8, 4).slopes[0]), 0.5)


@pytest.mark.parametrize("name", NAMES)
def test_batched_positions_reach_every_head(name) -> None:
    """AttentionHeads with positions (B, Tq) (per sentence, a heads dim added inside)
    equals the default positions when they are 0 .. T-1, and the reference at an offset."""
    torch.manual_seed(0)
    mha = attnkit.build(dim=8, heads=2, position=name).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    at = torch.arange(5).expand(2, 5)
    torch.testing.assert_close(mha(x, positions=at).weights, mha(x).weights)
    q, k, v = mha.project_qkv(x)
    got = mha(x, positions=at + 3).weights
    want = attend(q, k, v, position=mha.position, positions=torch.arange(3, 8)).weights
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("name", ["alibi", "rope", "t5"])
def test_drop_in_multihead_attention_with_position(name) -> None:
    """attnkit.nn.MultiheadAttention(position=...): PyTorch's in/out projections around the
    position stage, equal to the float64 reference on projections done by hand; PyTorch's
    key_padding_mask (True = ignore) composes; extra keys without a place are refused."""
    from attnkit.nn import MultiheadAttention

    torch.manual_seed(0)
    stage = _stage(name, 2, 4)
    mha = MultiheadAttention(8, 2, batch_first=True, position=stage).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    ignore = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])  # (B, S)
    out, weights = mha(x, x, x, key_padding_mask=ignore, average_attn_weights=False)
    w_q, w_k, w_v = mha.in_proj_weight.detach().split(8)
    b_q, b_k, b_v = mha.in_proj_bias.detach().split(8)

    def heads(t):  # (B, T, 8) -> (B, 2, T, 4)
        return t.reshape(2, 5, 2, 4).transpose(1, 2)

    q, k, v = heads(x @ w_q.T + b_q), heads(x @ w_k.T + b_k), heads(x @ w_v.T + b_v)
    pos = torch.arange(5)
    allowed = (~ignore).numpy()[:, None, None, :]
    ctx, ref_w = _ref_attention(_ref_scores(name, stage, q, k, pos, pos), allowed, v.numpy())
    np.testing.assert_allclose(weights.detach().numpy(), ref_w, atol=1e-10)
    merged = torch.from_numpy(ctx).transpose(1, 2).reshape(2, 5, 8)
    torch.testing.assert_close(out, mha.out_proj(merged))
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiheadAttention(8, 2, add_bias_kv=True, position=stage)


def test_window_kernel_makes_no_dense_bias(monkeypatch) -> None:
    """With a sliding window and no weights asked, ALiBi's bias is made at the gathered keys
    only: its dense (Tq, Tk) form (``forward``) is never called."""
    from attnkit.stages.position import ALiBi

    stage = ALiBi(2)
    q = torch.randn(1, 2, 40, 4)
    want = attend(q, q, q, align=SlidingWindow(2), position=stage).context

    def refuse(*args, **kwargs):
        raise AssertionError("the dense bias was built")

    monkeypatch.setattr(ALiBi, "forward", refuse)
    got = attend(q, q, q, align=SlidingWindow(2), position=stage, need_weights=False).context
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("name", ["alibi", "t5", "shaw"])
def test_window_kernel_in_small_query_blocks(name, monkeypatch) -> None:
    """The band in query blocks of a few queries each (``WINDOW_ELEMENTS`` shrunk), with a
    mask that differs per query, equals the reference path; so do its gradients."""
    import attnkit.local.dispatch as dispatch

    monkeypatch.setattr(dispatch, "WINDOW_ELEMENTS", 200)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 2, 11, 4, generator=g, dtype=torch.float64) for _ in range(3))
    for x in (q, k, v):
        x.requires_grad_(True)
    mask = torch.rand(2, 1, 11, 11, generator=g) < 0.7  # (B, 1, Tq, Tk), rows differ
    stage = _stage(name, 2, 4, 5)
    for align in (SlidingWindow(2), SlidingWindow(3, causal=True)):
        from _spies import only_path

        with only_path("gather") as calls:
            fast = attend(q, k, v, align=align, mask=mask, position=stage, need_weights=False)
        assert calls["gather"] > 2  # several blocks
        ref = attend(q, k, v, align=align, mask=mask, position=stage).context
        torch.testing.assert_close(fast.context, ref)
        grads = torch.autograd.grad(fast.context.sum(), (q, k, v))
        torch.testing.assert_close(grads, torch.autograd.grad(ref.sum(), (q, k, v)))


@pytest.mark.parametrize("name", NAMES)
def test_half_inputs_keep_their_dtype(name) -> None:
    """bfloat16 / float16 inputs on every path: the context comes back in their dtype, close
    to the float32 result (positions and scores are computed in float32)."""
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, 2, 20, 8, generator=g)
    stage = build_position(name, 2, 8, max_len=32)
    for align in (None, CausalAlignment(), SlidingWindow(3)):
        want = attend(q, q, q, position=stage, align=align).context
        for dtype, tol in ((torch.bfloat16, 5e-2), (torch.float16, 1e-2)):
            h = q.to(dtype)
            for need in (True, False):
                got = attend(h, h, h, position=stage, align=align, need_weights=need).context
                assert got.dtype == dtype
                torch.testing.assert_close(got.float(), want, atol=tol, rtol=tol)


@settings(max_examples=25, deadline=None)
@given(tq=st.integers(1, 6), tk=st.integers(1, 7), width=st.sampled_from([2, 4, 8]),
       shift=st.floats(-3000, 3000), seed=st.integers(0, 2**16))  # fmt: skip
def test_the_factored_xl_bias_equals_the_distance_form(tq, tk, width, shift, seed) -> None:
    """xl_bias_factored (angle-difference identities, no (Tq, Tk, R) tensor) equals xl_bias
    at the distances i - j, at integer and real, small and large positions, in float64."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, tq, 4, generator=g, dtype=torch.float64)
    k = torch.randn(2, 3, tk, 4, generator=g, dtype=torch.float64)
    w, u, v = (torch.randn(*s, generator=g, dtype=torch.float64)
               for s in ((3, 4, width), (3, 1, 4), (3, 1, 4)))  # fmt: skip
    qp = torch.randn(tq, generator=g, dtype=torch.float64) * 50 + shift
    kp = torch.arange(tk, dtype=torch.float64) + shift
    rel = qp[:, None] - kp[None, :]  # i - j (Tq, Tk)
    torch.testing.assert_close(xl_bias_factored(q, k, qp, kp, w, u, v, 0.5),
                               xl_bias(q, k, rel, w, u, v, 0.5), rtol=1e-9, atol=1e-9)  # fmt: skip
