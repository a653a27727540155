"""attnkit.nn.MultiheadAttention is a drop-in for torch.nn.MultiheadAttention: a torch
state_dict loads as it is and outputs and weights agree, over layouts, masks and options.
Masks keep key 0 of every query allowed, so torch never sees a fully masked row (it gives NaN
there, attnkit zeros)."""

import itertools

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from torch import nn

import attnkit.nn as ann

pytestmark = pytest.mark.usefixtures("one_thread")

E, H, L, S = 8, 2, 4, 5

MASKS = [
    "none",
    "key_padding",
    "bool_attn",
    "float_attn",
    "bool_attn_3d",
    "causal",
    "key_padding+bool_attn",
    "key_padding+float_attn",
    "float_key_padding",
]

OPTIONS = {  # name: (constructor kwargs)
    "plain": {},
    "kdim_vdim": {"kdim": 6, "vdim": 3},
    "bias_kv": {"add_bias_kv": True},
    "zero_attn": {"add_zero_attn": True},
    "bias_kv+zero_attn+kdim": {"add_bias_kv": True, "add_zero_attn": True, "kdim": 6, "vdim": 3},
    "no_bias": {"bias": False},
}


def _pair(dtype=torch.float32, **kw):
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(E, H, dtype=dtype, **kw).eval()
    if ref.in_proj_bias is not None:  # torch zero-initialises the biases: make them count
        nn.init.normal_(ref.in_proj_bias)
        nn.init.normal_(ref.out_proj.bias)
    ours = ann.MultiheadAttention(E, H, dtype=dtype, **kw).eval()
    ours.load_state_dict(ref.state_dict())  # strict: same parameter names
    return ref, ours


def _masks(kind: str, b: int, dtype, unbatched: bool):
    g = torch.Generator().manual_seed(1)
    kpm = attn = None
    causal = False
    if "key_padding" in kind:
        kpm = torch.rand(b, S, generator=g) > 0.6
        kpm[:, 0] = False  # True = ignore; key 0 always kept
        if kind.startswith("float_key_padding"):
            kpm = torch.zeros(b, S, dtype=dtype).masked_fill(kpm, float("-inf"))
            kpm[:, 1] += 0.5  # a finite additive bias too
    if "bool_attn" in kind:
        shape = (b * H, L, S) if kind.endswith("3d") else (L, S)
        attn = torch.rand(*shape, generator=g) > 0.6
        attn[..., 0] = False  # True = not allowed
    if "float_attn" in kind:
        attn = torch.randn(L, S, generator=g, dtype=dtype)
        attn[1, 2:] = float("-inf")
    if kind == "causal":
        attn = torch.ones(L, S, dtype=torch.bool).triu(1)  # torch needs the mask with is_causal
        causal = True
    if unbatched:
        kpm = None if kpm is None else kpm[0]
        if attn is not None and attn.dim() == 3:
            attn = attn[:H]
    return kpm, attn, causal


def _inputs(batch_first: bool, unbatched: bool, kdim: int, vdim: int, dtype, b: int = 3):
    g = torch.Generator().manual_seed(2)
    q = torch.randn(b, L, E, generator=g, dtype=dtype)
    k = torch.randn(b, S, kdim, generator=g, dtype=dtype)
    v = torch.randn(b, S, vdim, generator=g, dtype=dtype)
    if unbatched:
        return q[0], k[0], v[0]
    if not batch_first:
        return q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
    return q, k, v


CASES = list(itertools.product(MASKS, sorted(OPTIONS)))


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("mask_kind,option", CASES)
@pytest.mark.parametrize("batch_first", [False, True])
def test_matches_torch(mask_kind: str, option: str, batch_first: bool) -> None:
    kw = OPTIONS[option]
    ref, ours = _pair(batch_first=batch_first, **kw)
    q, k, v = _inputs(batch_first, False, kw.get("kdim", E), kw.get("vdim", E), torch.float32)
    kpm, attn, causal = _masks(mask_kind, 3, torch.float32, False)
    for average, need in ((True, True), (False, True), (True, False)):
        if causal and not need and ("bias_kv" in option or "zero_attn" in option):
            # torch disagrees with itself here: with need_weights=False it drops the padded
            # attn_mask for SDPA's is_causal, which then also hides the appended bias/zero key.
            continue
        args = dict(
            key_padding_mask=kpm,
            attn_mask=attn,
            is_causal=causal,
            need_weights=need,
            average_attn_weights=average,
        )
        out_ref, w_ref = ref(q, k, v, **args)
        out, w = ours(q, k, v, **args)
        torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=0)
        if need:
            assert w is not None and w_ref is not None and w.shape == w_ref.shape
            torch.testing.assert_close(w, w_ref, atol=1e-5, rtol=0)
        else:
            assert w is None and w_ref is None


@pytest.mark.parametrize("mask_kind", ["none", "key_padding", "bool_attn_3d", "float_attn"])
@pytest.mark.parametrize("option", ["plain", "bias_kv+zero_attn+kdim"])
@pytest.mark.parametrize("batch_first", [False, True])  # ignored by torch for unbatched input
def test_unbatched_matches_torch(mask_kind: str, option: str, batch_first: bool) -> None:
    kw = OPTIONS[option]
    ref, ours = _pair(batch_first=batch_first, **kw)
    q, k, v = _inputs(False, True, kw.get("kdim", E), kw.get("vdim", E), torch.float32)
    kpm, attn, _ = _masks(mask_kind, 1, torch.float32, True)
    for average in (True, False):
        args = dict(key_padding_mask=kpm, attn_mask=attn, average_attn_weights=average)
        out_ref, w_ref = ref(q, k, v, **args)
        out, w = ours(q, k, v, **args)
        assert out.shape == (L, E)
        torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=0)
        torch.testing.assert_close(w, w_ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("mask_kind", ["key_padding+bool_attn", "float_attn"])
def test_float64_matches_torch_tightly(mask_kind: str) -> None:
    ref, ours = _pair(dtype=torch.float64, batch_first=True, add_bias_kv=True, kdim=6, vdim=3)
    q, k, v = _inputs(True, False, 6, 3, torch.float64)
    kpm, attn, _ = _masks(mask_kind, 3, torch.float64, False)
    out_ref, w_ref = ref(q, k, v, key_padding_mask=kpm, attn_mask=attn, average_attn_weights=False)
    out, w = ours(q, k, v, key_padding_mask=kpm, attn_mask=attn, average_attn_weights=False)
    torch.testing.assert_close(out, out_ref, atol=1e-10, rtol=0)
    torch.testing.assert_close(w, w_ref, atol=1e-10, rtol=0)


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_is_causal_without_mask_builds_the_causal_mask(option: str) -> None:
    # Used to fail with add_bias_kv / add_zero_attn: the causal mask was built over the
    # appended keys too, hiding them from the first queries.
    kw = OPTIONS[option]
    ref, ours = _pair(batch_first=True, **kw)
    q, k, v = _inputs(True, False, kw.get("kdim", E), kw.get("vdim", E), torch.float32)
    causal = torch.ones(L, S, dtype=torch.bool).triu(1)
    out_ref, w_ref = ref(q, k, v, attn_mask=causal)
    for need in (True, False):
        out, w = ours(q, k, v, is_causal=True, need_weights=need)
        torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=0)
        if need:
            torch.testing.assert_close(w, w_ref, atol=1e-5, rtol=0)


def test_self_attention_and_gradients_match_torch() -> None:
    ref, ours = _pair(dtype=torch.float64, batch_first=True)
    x = torch.randn(2, 6, E, dtype=torch.float64, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    out_ref, _ = ref(x, x, x)
    out, _ = ours(x2, x2, x2)
    out_ref.square().sum().backward()
    out.square().sum().backward()
    torch.testing.assert_close(x2.grad, x.grad, atol=1e-10, rtol=0)
    for (name, p_ref), (_, p) in zip(ref.named_parameters(), ours.named_parameters(), strict=True):
        torch.testing.assert_close(p.grad, p_ref.grad, atol=1e-10, rtol=0, msg=name)


def test_fully_masked_row_gives_zero_not_nan() -> None:
    _, ours = _pair(batch_first=True)
    q, k, v = _inputs(True, False, E, E, torch.float32)
    kpm = torch.zeros(3, S, dtype=torch.bool)
    kpm[1] = True  # batch 1 may attend nothing
    out, w = ours(q, k, v, key_padding_mask=kpm)
    assert torch.isfinite(out).all() and (w[1] == 0).all()
    bias = ours.out_proj.bias
    torch.testing.assert_close(out[1], bias.expand(L, E).detach())  # zero context, then W_O


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(1, 3),
    tq=st.integers(1, 5),
    tk=st.integers(1, 6),
    heads=st.sampled_from([1, 2, 4]),
    batch_first=st.booleans(),
    need_weights=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_random_shapes_with_padding_match_torch(b, tq, tk, heads, batch_first, need_weights, seed):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(8, heads, batch_first=batch_first).eval()
    nn.init.normal_(ref.in_proj_bias)
    ours = ann.MultiheadAttention(8, heads, batch_first=batch_first).eval()
    ours.load_state_dict(ref.state_dict())
    q, k = torch.randn(b, tq, 8), torch.randn(b, tk, 8)
    if not batch_first:
        q, k = q.transpose(0, 1), k.transpose(0, 1)
    kpm = torch.rand(b, tk) > 0.5
    kpm[:, 0] = False  # never a fully masked row
    out_ref, w_ref = ref(q, k, k, key_padding_mask=kpm, need_weights=need_weights)
    out, w = ours(q, k, k, key_padding_mask=kpm, need_weights=need_weights)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=0)
    if need_weights:
        torch.testing.assert_close(w, w_ref, atol=1e-5, rtol=0)


def _output_from_weights(m, q, k, v, w):
    """out = W_O · concat_h(w_h · V W_h^V) + b_O, batch-first, per-head weights w (B, H, L, S)."""
    _, _, w_v = m.in_proj_weight.split(E)
    b_v = m.in_proj_bias.split(E)[2]
    vh = (v @ w_v.T + b_v).view(v.shape[0], v.shape[1], H, E // H).transpose(1, 2)
    ctx = (w @ vh).transpose(1, 2).reshape(q.shape[0], q.shape[1], E)
    return m.out_proj(ctx)


@pytest.mark.parametrize("module", ["torch", "attnkit"])
def test_training_weights_are_the_dropped_ones(module: str) -> None:
    # PyTorch returns the weights after dropout; so must the drop-in.
    torch.manual_seed(0)
    cls = nn.MultiheadAttention if module == "torch" else ann.MultiheadAttention
    m = cls(E, H, dropout=0.5, batch_first=True).train()
    q, k, v = _inputs(True, False, E, E, torch.float32)
    out, w = m(q, k, v, average_attn_weights=False)
    assert (w == 0).any()  # some weights were dropped
    torch.testing.assert_close(out, _output_from_weights(m, q, k, v, w), atol=1e-5, rtol=0)
