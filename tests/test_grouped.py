"""Grouped-query and multi-query attention (Ainslie et al. 2023; Shazeer 2019): H query heads
over Hkv key/value heads equal multi-head attention over the key/value heads repeated, on
every path; the fast paths reach it without repeating the keys."""

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from torch.autograd import gradcheck

import attnkit
import attnkit.core
from attnkit import CausalAlignment, SelfAttention, SlidingWindow, attend
from attnkit.models import build_model
from attnkit.stages.position import ALiBi, RotaryPosition
from tests._reference import band_ref, grouped_ref
from tests._spies import only_path

pytestmark = pytest.mark.usefixtures("one_thread_module")


def qkv(b: int = 2, h: int = 6, hkv: int = 2, tq: int = 7, tk: int = 7, d: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, tq, d, generator=g, dtype=torch.float64)
    k = torch.randn(b, hkv, tk, d, generator=g, dtype=torch.float64)
    v = torch.randn(b, hkv, tk, d + 1, generator=g, dtype=torch.float64)
    return q, k, v


def padding(b: int, tk: int) -> torch.Tensor:
    m = torch.ones(b, 1, 1, tk, dtype=torch.bool)
    m[-1, ..., tk // 2 :] = False
    return m


CAUSAL = band_ref(7, 7, 7, causal=True)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize(
    "case", ["none", "padding", "causal-mask", "per-head", "causal", "sliding", "sliding-pad"]
)
def test_grouped_equals_the_float64_reference(case: str, grad: bool, need_weights: bool) -> None:
    q, k, v = qkv()
    mask, align, allowed = None, None, None
    if case == "padding":
        mask = allowed = padding(2, 7)
    elif case == "causal-mask":
        mask = allowed = CAUSAL
    elif case == "per-head":  # a different mask for every query head
        mask = allowed = torch.rand(2, 6, 7, 7, generator=torch.Generator().manual_seed(3)) > 0.4
    elif case == "causal":
        align, allowed = CausalAlignment(), CAUSAL
    elif case == "sliding":
        align, allowed = SlidingWindow(2), band_ref(7, 7, 2, causal=False)
    elif case == "sliding-pad":
        align, mask = SlidingWindow(1, causal=True), padding(2, 7)
        allowed = band_ref(7, 7, 1, causal=True) & mask
    with torch.set_grad_enabled(grad):
        out = attend(q, k, v, align=align, mask=mask, need_weights=need_weights)
    ctx, w = grouped_ref(q, k, v, allowed)
    torch.testing.assert_close(out.context, ctx, rtol=1e-10, atol=1e-12)
    if need_weights:
        assert out.weights is not None and out.weights.shape == (2, 6, 7, 7)
        torch.testing.assert_close(out.weights, w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("position", [RotaryPosition(4), ALiBi(6)])
def test_grouped_with_a_position_stage_equals_the_repeated_heads(position) -> None:
    q, k, v = qkv()
    out = attend(q, k, v, align=CausalAlignment(), position=position, need_weights=False)
    pick = torch.tensor([0, 0, 0, 1, 1, 1])
    full = attend(q, k[:, pick], v[:, pick], align=CausalAlignment(), position=position,
                  need_weights=False)  # fmt: skip
    torch.testing.assert_close(out.context, full.context, rtol=1e-10, atol=1e-12)


def test_the_fast_paths_share_the_heads_without_repeating_them(monkeypatch) -> None:
    """No-weights attention over every key goes to SDPA (the group folded into the queries,
    or ``enable_gqa`` under a causal mask); a sliding window to the band kernel; never the
    repeat."""

    def no_repeat(*args, **kwargs):
        raise AssertionError("the keys were repeated")

    monkeypatch.setattr(attnkit.core, "repeat_kv", no_repeat)
    q, k, v = (x.float().requires_grad_() for x in qkv(tq=40, tk=40))
    for mask, path in ((padding(2, 40), "sdpa"), (band_ref(40, 40, 40, True), "sdpa")):
        with only_path(path):
            out = attend(q, k, v, mask=mask, need_weights=False)
        ref, _ = grouped_ref(q, k, v, mask)
        torch.testing.assert_close(out.context.double(), ref, rtol=1e-4, atol=1e-5)
    with only_path("sliding"):
        out = attend(q, k, v, align=SlidingWindow(3), need_weights=False)
    ref, _ = grouped_ref(q, k, v, band_ref(40, 40, 3, causal=False))
    torch.testing.assert_close(out.context.double(), ref, rtol=1e-4, atol=1e-5)
    with torch.no_grad(), only_path("column"):  # a decoding step on a CPU
        out = attend(q[:, :, :1], k, v, need_weights=False)
    torch.testing.assert_close(out.context.double(), grouped_ref(q[:, :, :1], k, v, None)[0],
                               rtol=1e-4, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("align", [None, CausalAlignment(), SlidingWindow(1, causal=True)])
def test_gradcheck(align) -> None:
    q, k, v = (x.requires_grad_() for x in qkv(b=1, h=4, tq=5, tk=5, d=3))
    assert gradcheck(
        lambda q, k, v: attend(q, k, v, align=align, need_weights=False).context, (q, k, v)
    )


def _repeated(m: attnkit.AttentionHeads) -> attnkit.AttentionHeads:
    """Multi-head attention whose W^K, W^V hold each key/value head once per query head."""
    h, hkv, dh = m.heads, m.kv_heads, m.head_dim
    full = attnkit.AttentionHeads(h * dh, h, align=m.align).double()
    pick = torch.tensor([i // (h // hkv) for i in range(h)])
    rows = (pick[:, None] * dh + torch.arange(dh)).flatten()  # (H·Dh,) rows of W^K
    with torch.no_grad():
        for name in ("q_proj", "out_proj"):
            getattr(full, name).load_state_dict(getattr(m, name).state_dict())
        for name in ("k_proj", "v_proj"):
            getattr(full, name).weight.copy_(getattr(m, name).weight[rows])
            getattr(full, name).bias.copy_(getattr(m, name).bias[rows])
    return full


@st.composite
def heads_and_kv(draw):
    heads = draw(st.integers(1, 8))
    kv = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    return heads, kv


@settings(max_examples=25, deadline=None)
@given(hk=heads_and_kv(), t=st.integers(1, 9), causal=st.booleans(), pad=st.booleans(),
       need_weights=st.booleans(), seed=st.integers(0, 100))  # fmt: skip
def test_module_equals_multi_head_with_repeated_kv(hk, t, causal, pad, need_weights, seed) -> None:
    heads, kv = hk
    torch.manual_seed(seed)
    align = CausalAlignment() if causal else None
    m = attnkit.AttentionHeads(2 * heads, heads, kv_heads=kv, align=align).double()
    assert m.k_proj.out_features == 2 * kv
    x = torch.randn(2, t, 2 * heads, dtype=torch.float64)
    mask = None
    if pad:
        mask = torch.ones(2, 1, t, dtype=torch.bool)
        mask[1, :, (t + 1) // 2 :] = False
    out = m(x, mask=mask, need_weights=need_weights)
    ref = _repeated(m)(x, mask=mask, need_weights=need_weights)
    torch.testing.assert_close(out.context, ref.context, rtol=1e-10, atol=1e-12)
    if need_weights:
        torch.testing.assert_close(out.weights, ref.weights, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kv", [1, 2, 4])
def test_step_equals_forward_with_a_smaller_cache(kv: int) -> None:
    torch.manual_seed(0)
    m = SelfAttention(16, 4, kv_heads=kv, align=CausalAlignment()).double().eval()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    full = m(x, need_weights=False).context  # (B, T, D)
    cache = m.empty_cache(2, x)
    with torch.no_grad():
        for t in range(6):
            r, cache = m.step(x[:, t : t + 1], cache)
            torch.testing.assert_close(r.context[:, 0], full[:, t], rtol=1e-10, atol=1e-12)
    assert cache[0].shape == (2, kv, 6, 4)


def test_build_takes_kv_heads() -> None:
    m = attnkit.build("scaled_dot", dim=16, heads=4, kv_heads=1, align="sliding", window=2)
    assert isinstance(m, attnkit.AttentionHeads) and m.kv_heads == 1
    assert m.v_proj.out_features == 4
    assert m(torch.randn(1, 5, 16)).weights.shape == (1, 4, 5, 5)


@pytest.mark.parametrize(
    "call, fix",
    [
        (lambda: attnkit.build(dim=16, heads=4, kv_heads=3), r"pick kv_heads from \[1, 2, 4\]"),
        (lambda: attnkit.build(dim=16, kv_heads=2), "pass heads=H"),
        (lambda: SelfAttention(16, 4, kv_heads=0), "pick kv_heads from"),
        (lambda: build_model("transformer", src_vocab=9, tgt_vocab=9, preset="tiny",
                             kv_heads=3), "pick kv_heads from"),  # fmt: skip
        (lambda: build_model("transformer-lm", src_vocab=9, tgt_vocab=9, preset="tiny",
                             kv_heads=3), "pick kv_heads from"),  # fmt: skip
    ],
)
def test_kv_heads_that_do_not_divide_heads_are_refused(call, fix: str) -> None:
    with pytest.raises(ValueError, match=fix):
        call()


def test_transformer_with_grouped_heads_decodes_what_it_teacher_forces() -> None:
    torch.manual_seed(0)
    m = build_model("transformer", src_vocab=20, tgt_vocab=20, preset="tiny", heads=4,
                    kv_heads=2).eval()  # fmt: skip
    assert m.dec[0].self_attn.kv_heads == 2 and m.dec[0].cross_attn.k_proj.out_features == 16
    src, src_len = torch.randint(3, 20, (2, 5)), torch.tensor([5, 3])
    ys = torch.randint(3, 20, (2, 4))
    with torch.no_grad():
        forced = m(src, src_len, ys).logits  # (B, T, V)
        memory = m.encode(src, src_len)
        state = m.init_state(memory)
        assert state[0].keys.shape == (2, 2, 0, 8)  # (B, Hkv, 0, Dh)
        for t in range(4):
            logits, _, state = m.step(ys[:, t], state, memory)
            torch.testing.assert_close(logits, forced[:, t], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["transformer-lm", "transformer-xl"])
def test_language_models_take_kv_heads(name: str) -> None:
    torch.manual_seed(0)
    m = build_model(name, src_vocab=11, tgt_vocab=11, preset="tiny", kv_heads=1)
    assert m.layers[0].attn.kv_heads == 1
    out = m(torch.randint(1, 11, (2, 6)))
    assert out.logits.shape == (2, 6, 11) and torch.isfinite(out.logits).all()


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("name", sorted(attnkit.registry.ALIGNMENTS))
def test_every_registered_alignment_equals_the_repeated_heads(name: str, need_weights: bool
                                                              ) -> None:  # fmt: skip
    from attnkit.registry import STRIDED, build_alignment

    torch.manual_seed(0)
    pattern = name in STRIDED
    align = build_alignment(name, 8, None if pattern else 3, stride=3 if pattern else None)
    q, k, v = qkv(h=4, hkv=2, tq=12, tk=12, d=8)
    pick = torch.tensor([0, 0, 1, 1])
    out = attend(q, k, v, align=align.double(), need_weights=need_weights)
    ref = attend(q, k[:, pick], v[:, pick], align=align.double(), need_weights=need_weights)
    torch.testing.assert_close(out.context, ref.context, rtol=1e-10, atol=1e-12)
