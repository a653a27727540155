"""Local-m / local-p on a gathered window equal the reference ``attend(..., align=LocalM /
LocalP)``: context, band weights, positions and the gradients of every input and parameter,
across scores, normalisers, windows (some wider than Tk) and padding masks."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit.local import band_to_dense
from attnkit.local.window import local_window_attention
from attnkit.registry import build_normaliser, build_score


@settings(max_examples=30, deadline=None)
@given(
    tq=st.integers(1, 12),
    tk=st.integers(1, 20),
    window=st.integers(1, 25),
    local_p=st.booleans(),
    score=st.sampled_from(["scaled_dot", "dot", "general", "additive"]),
    normaliser=st.sampled_from(["softmax", "sparsemax", "entmax15"]),
    padded=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_equals_reference(
    tq: int,
    tk: int,
    window: int,
    local_p: bool,
    score: str,
    normaliser: str,
    padded: bool,
    seed: int,
) -> None:
    torch.manual_seed(seed)
    dim = 6
    q = torch.randn(2, tq, dim, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, tk, dim, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, tk, 4, dtype=torch.float64, requires_grad=True)
    align = (attnkit.LocalP(dim, window) if local_p else attnkit.LocalM(window)).double()
    score_fn = build_score(score, dim).double()
    norm = build_normaliser(normaliser)
    mask = attnkit.padding_mask(torch.tensor([tk, max(1, tk // 2)]), tk) if padded else None
    kw = dict(score=score_fn, normaliser=norm, mask=mask)
    ref = attnkit.attend(q, k, v, align=align, need_weights=True, **kw)  # type: ignore[arg-type]
    out = local_window_attention(q, k, v, align, **kw)  # type: ignore[arg-type]
    torch.testing.assert_close(out.context, ref.context)
    assert ref.weights is not None
    torch.testing.assert_close(band_to_dense(out.weights, out.start, tk), ref.weights)
    torch.testing.assert_close(out.position, ref.extras["position"])
    params = [q, k, v, *align.parameters(), *score_fn.parameters()]
    g = torch.randn_like(ref.context)
    want = torch.autograd.grad(ref.context, params, g, allow_unused=True)
    got = torch.autograd.grad(out.context, params, g, allow_unused=True)
    for a, b in zip(got, want, strict=True):
        if b is None:
            assert a is None or not a.any()
        else:
            torch.testing.assert_close(a, b)


def test_float32_long_source_stays_small() -> None:
    """Tq = Tk = 4096, D = 4: the gathered path touches 10 keys per query."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4096, 16) for _ in range(3))
    align = attnkit.LocalP(16, 4)
    out = local_window_attention(q, k, v, align)
    assert out.weights.shape == (1, 4096, 10)
    assert torch.isfinite(out.context).all()


def test_location_score_is_refused() -> None:
    q = torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match="location"):
        local_window_attention(q, q, q, attnkit.LocalM(1), score=attnkit.LocationScore(4, 3))


def test_an_alignment_without_a_key_window_is_refused() -> None:
    q = torch.randn(1, 3, 4)
    with pytest.raises(TypeError, match="key window"):
        local_window_attention(q, q, q, attnkit.SlidingWindow(1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_and_positions(dtype) -> None:
    """Half inputs: p_t from LocalP's own code in float32 (it used to meet float32 parameters
    in a half matmul); positions move local-m's window."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6) for _ in range(3))
    half = [x.to(dtype) for x in (q, k, v)]
    lp = attnkit.LocalP(6, 2)
    out = local_window_attention(*half, lp)
    ref = attnkit.attend(*(x.float() for x in half), align=lp)
    assert out.context.dtype == dtype
    torch.testing.assert_close(out.context.float(), ref.context, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(out.position, ref.extras["position"])
    at = torch.tensor([2, 0, 1])
    out = local_window_attention(q, k, v, attnkit.LocalM(0), positions=at)
    torch.testing.assert_close(out.context, v[:, at])  # D = 0: each query sees key p_t alone
