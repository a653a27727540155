"""Transformer-XL (Dai et al. 2019) and the vanilla Transformer LM (models/lm.py): the
attention over [memory ∘ segment] against a float64 reference written from §3.2-3.3 with
loops (no attnkit), gradcheck, the causal mask across the boundary, the stop-gradient of the
memory, the memory's update, and equal parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.models import build_model
from attnkit.models.lm import (
    TransformerLM,
    TransformerXL,
    attend_with_memory,
    update_memory,
    xl_extra_ff,
)
from tests._position_reference import sinusoid_ref

V = 11


def reference_memory_attention(h, mem, attn) -> tuple[np.ndarray, np.ndarray]:
    """Dai 2019, §3.2-3.3, one layer, float64 loops: h̃ = [mem ∘ h], q = h W_q, k = h̃ W_k,E,
    v = h̃ W_v; A_ij = q_iᵀk_j + q_iᵀW_R R_{i'-j} + uᵀk_j + vᵀW_R R_{i'-j} with i' = M + i
    the query's place in h̃; softmax of A/√d_h over j <= i'; output Σ_j a_ij v_j, heads
    concatenated, W_o. h (B, L, D), mem (B, M, D) -> context (B, L, D), weights (B, H, L, M+L)."""
    p = {k: t.detach().double().numpy() for k, t in attn.named_parameters()}
    h, mem = h.detach().double().numpy(), mem.detach().double().numpy()
    bsz, length, dim = h.shape
    m = mem.shape[1]
    heads = attn.heads
    dh = dim // heads
    ctx = np.zeros((bsz, length, dim))
    weights = np.zeros((bsz, heads, length, m + length))
    for b in range(bsz):
        rows = [mem[b, j] for j in range(m)] + [h[b, i] for i in range(length)]  # h̃
        keys = [p["k_proj.weight"] @ r + p["k_proj.bias"] for r in rows]
        values = [p["v_proj.weight"] @ r + p["v_proj.bias"] for r in rows]
        heads_out = np.zeros((length, dim))
        for n in range(heads):
            part = slice(n * dh, (n + 1) * dh)
            w_r, u, v = p["position.w_r"][n], p["position.u"][n, 0], p["position.v"][n, 0]
            for i in range(length):
                q = (p["q_proj.weight"] @ h[b, i] + p["q_proj.bias"])[part]
                scores = []
                for j in range(m + length):
                    if j > m + i:  # a key after the query
                        scores.append(-math.inf)
                        continue
                    k = keys[j][part]
                    pos = w_r @ sinusoid_ref(m + i - j, w_r.shape[-1])  # W_k,R R_{i-j}
                    a = q @ k + q @ pos + u @ k + v @ pos
                    scores.append(a / math.sqrt(dh))
                top = max(scores)
                e = [math.exp(s - top) if s > -math.inf else 0.0 for s in scores]
                a_i = [x / sum(e) for x in e]
                weights[b, n, i] = a_i
                heads_out[i, part] = sum(a_i[j] * values[j][part] for j in range(m + length))
        ctx[b] = heads_out @ p["out_proj.weight"].T + p["out_proj.bias"]
    return ctx, weights


def xl_layer(dim: int = 8, heads: int = 2, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = build_model("transformer-xl", src_vocab=4, tgt_vocab=V, dim=dim, heads=heads,
                        layers=1, ff=16, dropout=0.0).double()  # fmt: skip
    attn = model.layers[0].attn
    with torch.no_grad():  # u and v start at zero: give them values the test can see
        attn.position.u.normal_()
        attn.position.v.normal_()
    return attn


@settings(max_examples=12, deadline=None)
@given(
    bsz=st.integers(1, 2),
    length=st.integers(1, 5),
    memory=st.integers(0, 5),
    heads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_attention_over_memory_matches_the_papers_equations(bsz, length, memory, heads, seed):
    attn = xl_layer(heads=heads, seed=seed)
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(bsz, length, 8, generator=g, dtype=torch.float64)
    mem = torch.randn(bsz, memory, 8, generator=g, dtype=torch.float64)
    r = attend_with_memory(attn, h, mem, need_weights=True)
    ctx, weights = reference_memory_attention(h, mem, attn)
    np.testing.assert_allclose(r.weights.detach().numpy(), weights, atol=1e-10)
    np.testing.assert_allclose(r.context.detach().numpy(), ctx, atol=1e-10)
    fast = attend_with_memory(attn, h, mem, need_weights=False)  # the fused path, bias as mask
    np.testing.assert_allclose(fast.context.detach().numpy(), ctx, atol=1e-10)


def test_gradcheck_in_float64_through_segment_and_memory():
    attn = xl_layer()
    h = torch.randn(1, 3, 8, dtype=torch.float64, requires_grad=True)
    mem = torch.randn(1, 2, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: attend_with_memory(attn, a, b).context, (h, mem))


def test_query_i_sees_every_memory_key_and_the_segment_up_to_i():
    attn = xl_layer()
    m, length = 4, 5
    w = attend_with_memory(attn, torch.randn(2, length, 8, dtype=torch.float64),
                           torch.randn(2, m, 8, dtype=torch.float64), need_weights=True).weights
    for i in range(length):
        assert (w[..., i, : m + i + 1] > 0).all(), i  # every memory key, segment keys <= i
        assert (w[..., i, m + i + 1 :] == 0).all(), i  # no later segment key
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, length, dtype=torch.float64))


def tiny(name: str = "transformer-xl", **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    opts = dict(dim=16, heads=2, layers=2, ff=32, dropout=0.0)
    return build_model(name, src_vocab=4, tgt_vocab=V, **{**opts, **kw}).double().eval()


def test_no_gradient_flows_into_the_previous_segment():
    model = tiny(memory=6)
    x1, x2 = torch.randint(4, V, (2, 6)), torch.randint(4, V, (2, 6))
    first = model(x1)
    assert all(not m.requires_grad and m.grad_fn is None for m in first.mems)
    loss = model(x2, first.mems).logits.sum()
    grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    # the same loss on memory that was never part of a graph: identical gradients. Without
    # the stop-gradient, the parameters would also get the first segment's share.
    frozen = [m.clone() for m in model(x1).mems]
    alone = torch.autograd.grad(model(x2, frozen).logits.sum(), list(model.parameters()),
                                allow_unused=True)  # fmt: skip
    for a, b in zip(grads, alone, strict=True):
        if a is None:
            assert b is None
        else:
            torch.testing.assert_close(a, b)


def test_the_memory_keeps_each_layers_last_inputs():
    hids = [torch.arange(5.0).view(1, 5, 1), 10 + torch.arange(5.0).view(1, 5, 1)]
    kept = update_memory(None, hids, 3)
    assert [k.flatten().tolist() for k in kept] == [[2, 3, 4], [12, 13, 14]]
    more = update_memory(kept, [h + 5 for h in hids], 4)
    assert [k.flatten().tolist() for k in more] == [[6, 7, 8, 9], [16, 17, 18, 19]]
    assert update_memory(kept, hids, 0) is None
    model = tiny(memory=7)
    out = model(torch.randint(4, V, (2, 5)))
    assert [m.shape for m in out.mems] == [(2, 5, 16)] * 2  # fewer than M seen so far
    out = model(torch.randint(4, V, (2, 5)), out.mems)
    assert [m.shape for m in out.mems] == [(2, 7, 16)] * 2


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_segments_with_memory_equal_one_pass_when_the_memory_covers_the_past(norm):
    """With M >= everything before it, segment-by-segment reading is exact: layer n's memory
    holds the very states a causal pass over the whole text computes there (Dai 2019, §3.2:
    the recurrence only cuts the context when M is shorter)."""
    model = tiny(memory=64, norm=norm)
    text = torch.randint(4, V, (2, 12))
    whole = model(text).logits
    mems, parts = None, []
    for s in range(0, 12, 4):
        out = model(text[:, s : s + 4], mems)
        parts.append(out.logits)
        mems = out.mems
    torch.testing.assert_close(torch.cat(parts, dim=1), whole)
    short = tiny(memory=2, norm=norm)  # a memory shorter than the past: no longer the same
    mems = short(text[:, :4]).mems
    assert not torch.allclose(short(text[:, 4:8], mems).logits, short(text[:, :8]).logits[:, 4:])


def test_the_vanilla_lm_has_no_memory_and_equal_parameters():
    for dim, heads in ((16, 2), (64, 4), (256, 8)):
        xl, lm = tiny(dim=dim, heads=heads), tiny("transformer-lm", dim=dim, heads=heads)
        assert isinstance(xl, TransformerXL) and isinstance(lm, TransformerLM)
        n_xl = sum(p.numel() for p in xl.parameters())
        n_lm = sum(p.numel() for p in lm.parameters())
        assert abs(n_xl - n_lm) <= 2 * (dim + 1), (dim, n_xl, n_lm)  # half a unit per layer
        assert lm.layers[0].ffn.w1.out_features == 32 + xl_extra_ff(dim, heads)
    plain = tiny("transformer-lm", match_xl=False)
    assert plain.layers[0].ffn.w1.out_features == 32
    out = lm(torch.randint(4, V, (1, 5)), need_weights=True)
    assert out.mems is None and out.weights[0].shape == (1, 8, 5, 5)
    with pytest.raises(ValueError, match=r"memory=-1"):
        build_model("transformer-xl", src_vocab=4, tgt_vocab=V, memory=-1)
    with pytest.raises(ValueError, match="memory"):  # the vanilla LM has none
        build_model("transformer-lm", src_vocab=4, tgt_vocab=V, memory=4)
