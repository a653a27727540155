"""attend() against torch's scaled_dot_product_attention and a float64 reference, on both the
weights path and the fused path (need_weights=False), with padding and causal masks."""

import hypothesis.strategies as st
import pytest
import torch
import torch.nn.functional as F
from _reference import sdpa_ref
from hypothesis import given, settings

import attnkit
from attnkit import CausalAlignment, attend
from attnkit.core import weighted_sum

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def _inputs(data, dtype, *, heads: bool):
    b = data.draw(st.integers(1, 3), label="B")
    tq = data.draw(st.integers(1, 6), label="Tq")
    tk = data.draw(st.integers(1, 7), label="Tk")
    d = data.draw(st.sampled_from([1, 4, 8]), label="D")
    dv = data.draw(st.sampled_from([1, 3, 8]), label="Dv")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    g = torch.Generator().manual_seed(seed)
    lead = (b, 2) if heads else (b,)
    q = torch.randn(*lead, tq, d, generator=g, dtype=dtype)
    k = torch.randn(*lead, tk, d, generator=g, dtype=dtype)
    v = torch.randn(*lead, tk, dv, generator=g, dtype=dtype)
    return q, k, v


def _mask(data, q, k, kind: str):
    b, tq, tk = q.shape[0], q.shape[-2], k.shape[-2]
    if kind == "none":
        return None
    if kind == "causal":
        return torch.ones(tq, tk).tril().bool()
    lengths = torch.tensor(data.draw(st.lists(st.integers(1, tk), min_size=b, max_size=b)))
    pad = attnkit.padding_mask(lengths, tk)  # (B, 1, Tk)
    if q.dim() == 4:
        pad = pad[:, None]  # (B, 1, 1, Tk)
    if kind == "padding":
        return pad
    # padding and causal: row 0 always keeps key 0, so no row is fully masked
    return pad & torch.ones(tq, tk).tril().bool()


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    kind=st.sampled_from(["none", "padding", "causal", "padding+causal"]),
    heads=st.booleans(),
    need_weights=st.booleans(),
)
def test_attend_equals_sdpa(data, dtype, kind, heads, need_weights) -> None:
    q, k, v = _inputs(data, dtype, heads=heads)
    mask = _mask(data, q, k, kind)
    out = attend(q, k, v, mask=mask, need_weights=need_weights)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    tol = TOL[dtype]
    torch.testing.assert_close(out.context, expected, atol=tol, rtol=0)
    ref_ctx, ref_w = sdpa_ref(q, k, v, mask)
    torch.testing.assert_close(out.context.double(), ref_ctx, atol=tol, rtol=0)
    assert out.context.dtype == dtype
    if need_weights:
        assert out.weights is not None
        torch.testing.assert_close(out.weights.double(), ref_w, atol=tol, rtol=0)
    else:
        assert out.weights is None


def test_causal_alignment_equals_sdpa_is_causal() -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 4)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    for need in (True, False):
        out = attend(q, k, v, align=CausalAlignment(), need_weights=need)
        torch.testing.assert_close(out.context, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("need_weights", [True, False])
def test_fully_masked_rows_zero_forward_and_backward(need_weights: bool) -> None:
    torch.manual_seed(0)
    q = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(2, 4, 5, dtype=torch.bool)
    mask[0, 2] = False  # query 2 of batch 0 may attend nothing
    mask[1, :, 3:] = False
    out = attend(q, k, v, mask=mask, need_weights=need_weights)
    assert (out.context[0, 2] == 0).all()
    if need_weights:
        assert (out.weights[0, 2] == 0).all()
    ref_ctx, _ = sdpa_ref(q, k, v, mask)
    torch.testing.assert_close(out.context, ref_ctx, atol=1e-10, rtol=0)
    out.context.sum().backward()
    for x in (q, k, v):
        assert x.grad is not None and torch.isfinite(x.grad).all()
    assert (q.grad[0, 2] == 0).all()


def test_weighted_sum_and_result_fields() -> None:
    w = torch.tensor([[0.25, 0.75]], dtype=torch.float64)
    v = torch.tensor([[4.0], [8.0]], dtype=torch.float64)
    assert weighted_sum(w, v).context.item() == 7.0
    q = torch.randn(1, 2, 4)
    out = attend(q, q, q)
    assert out.scores is not None and out.scores.shape == (1, 2, 2)
    assert out.extras == {}


def test_attend_gradcheck_scaled_dot_with_mask() -> None:
    torch.manual_seed(0)
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 5, 2, dtype=torch.float64, requires_grad=True)
    mask = attnkit.padding_mask(torch.tensor([5, 2]))
    for need in (True, False):
        assert torch.autograd.gradcheck(
            lambda q, k, v, need=need: attend(q, k, v, mask=mask, need_weights=need).context,
            (q, k, v),
        )


def test_fused_paths_are_taken() -> None:
    from _spies import only_path

    q = torch.randn(2, 3, 17, 8)  # 17 x 17 scores: over COLUMN_SCORES
    with only_path("sdpa"):
        attend(q, q, q, need_weights=False)
    with only_path("sdpa"):
        attend(q, q, q, align=CausalAlignment(), need_weights=False)
    with only_path("reference"):
        attend(q, q, q, align=CausalAlignment())
    small, one = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 1, 8)  # 5 x 5 scores; one query
    with torch.no_grad():  # the column path is for inference: training keeps the fused one
        for query, need in ((small, False), (small, True), (one, False), (one, True)):
            with only_path("column"):
                attend(query, small, small, need_weights=need)
        with only_path("reference"):  # a causal mask is an alignment: not the column path's
            attend(small, small, small, align=CausalAlignment())
    with only_path("sdpa"):
        attend(one, small, small, need_weights=False)


def test_positions_errors_say_what_to_give() -> None:
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"positions has shape \(4,\).*one position per query"):
        attend(q, q, q, align=CausalAlignment(), positions=torch.arange(4))
    with pytest.raises(ValueError, match="positions"):
        attend(q, q, q, align=CausalAlignment(), positions=torch.zeros(3, 3))
    with pytest.raises(TypeError, match="integer or float"):
        attend(q, q, q, align=CausalAlignment(), positions=torch.ones(3, dtype=torch.bool))
    attend(q, q, q, align=CausalAlignment(), positions=torch.zeros(2, 1, dtype=torch.long))
