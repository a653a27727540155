"""The sliding-window kernel equals the reference ``attend(..., align=SlidingWindow)``: values,
band weights and gradients, on random shapes, radii (some wider than n), blocks that do not
divide n, rectangular Tq x Tk, and every kind of mask."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit.local import band_to_dense, sliding_window_attention

# these pin the SDPA tiles; the native kernel is tests/local/test_native.py
pytestmark = pytest.mark.usefixtures("tiles_only")


def _mask(kind: str, b: int, h: int, tq: int, tk: int, gen: torch.Generator) -> torch.Tensor | None:
    if kind == "none":
        return None
    if kind == "key":  # (B, 1, 1, Tk) padding, one sequence short
        lengths = torch.randint(0, tk + 1, (b,), generator=gen)
        return attnkit.padding_mask(lengths, tk)[:, None]
    if kind == "query":  # (B, 1, Tq, 1)
        return torch.rand(b, 1, tq, 1, generator=gen) > 0.3
    return torch.rand(b, h, tq, tk, generator=gen) > 0.4  # full, fully masked rows likely


def _grads(out: torch.Tensor, inputs: list[torch.Tensor], g: torch.Tensor) -> list[torch.Tensor]:
    return list(torch.autograd.grad(out, inputs, g))


@settings(max_examples=40, deadline=None)
@given(
    tq=st.integers(1, 40),
    extra_keys=st.sampled_from([0, 0, -3, 5]),
    radius=st.integers(0, 50),
    causal=st.booleans(),
    block=st.sampled_from([1, 3, 8, 16, None]),
    kind=st.sampled_from(["none", "key", "query", "full"]),
    need_weights=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_equals_reference(
    tq: int,
    extra_keys: int,
    radius: int,
    causal: bool,
    block: int | None,
    kind: str,
    need_weights: bool,
    seed: int,
) -> None:
    gen = torch.Generator().manual_seed(seed)
    tk = max(1, tq + extra_keys)
    b, h, d, dv = 2, 3, 8, 5
    q, k = (torch.randn(b, h, t, d, generator=gen, dtype=torch.float64) for t in (tq, tk))
    v = torch.randn(b, h, tk, dv, generator=gen, dtype=torch.float64)
    inputs = [x.requires_grad_() for x in (q, k, v)]
    mask = _mask(kind, b, h, tq, tk, gen)
    ref = attnkit.attend(q, k, v, align=attnkit.SlidingWindow(radius, causal), mask=mask)
    out = sliding_window_attention(q, k, v, radius, causal, mask, need_weights, block=block)
    torch.testing.assert_close(out.context, ref.context)
    g = torch.randn(ref.context.shape, generator=gen, dtype=torch.float64)
    for got, want in zip(
        _grads(out.context, inputs, g), _grads(ref.context, inputs, g), strict=True
    ):
        torch.testing.assert_close(got, want)
    if need_weights:
        assert out.weights is not None and ref.weights is not None
        assert out.weights.shape[-1] == (-out.offset + 1 if causal else -2 * out.offset + 1)
        torch.testing.assert_close(band_to_dense(out.weights, out.offset, tk), ref.weights)
    else:
        assert out.weights is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_low_precision_and_larger_n(dtype: torch.dtype, causal: bool) -> None:
    """n = 700 with the default block (n not a multiple of it), a padding mask, against the
    float64 reference."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 700, 32, generator=gen) for _ in range(3))
    mask = attnkit.padding_mask(torch.tensor([700, 555]))[:, None]
    ref = attnkit.attend(
        q.double(), k.double(), v.double(), align=attnkit.SlidingWindow(40, causal), mask=mask
    )
    out = sliding_window_attention(q.to(dtype), k.to(dtype), v.to(dtype), 40, causal, mask)
    assert out.context.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(out.context.double(), ref.context, atol=tol, rtol=tol)


def test_no_dense_tensor_is_built() -> None:
    """n = 8192 with r = 4: a dense float n x n would be 256 MiB; the kernel stays far below
    (checked with the profiler's record of every allocation)."""
    n = 8192
    q, k, v = (torch.randn(1, 1, n, 16, requires_grad=True) for _ in range(3))
    with torch.profiler.profile(profile_memory=True) as prof:
        out = sliding_window_attention(q, k, v, 4, mask=attnkit.padding_mask(torch.tensor([n])))
        out.context.sum().backward()
    biggest = max(e.cpu_memory_usage for e in prof.key_averages())
    assert biggest < n * n  # bytes: a quarter of one dense float32 matrix


def test_errors_say_what_to_do() -> None:
    q = torch.randn(1, 5, 4)
    with pytest.raises(ValueError, match="radius"):
        sliding_window_attention(q, q, q, -1)
    with pytest.raises(TypeError, match="bool"):
        sliding_window_attention(q, q, q, 1, mask=torch.ones(1, 5, 5))
    with pytest.raises(ValueError, match="width"):
        sliding_window_attention(q, torch.randn(1, 5, 3), q, 1)


def test_interior_runs_in_chunks(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The interior blocks split into several SDPA runs give the same values and gradients."""
    import attnkit.local.sliding as sliding

    monkeypatch.setattr(sliding, "CHUNK_QUERIES", 16)
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 2, 257, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    inputs = [x.requires_grad_() for x in (q, k, v)]
    mask = attnkit.padding_mask(torch.tensor([257, 200]))[:, None]
    ref = attnkit.attend(q, k, v, align=attnkit.SlidingWindow(5), mask=mask)
    out = sliding_window_attention(q, k, v, 5, mask=mask, block=4)
    torch.testing.assert_close(out.context, ref.context)
    g = torch.randn(ref.context.shape, generator=gen, dtype=torch.float64)
    for got, want in zip(
        _grads(out.context, inputs, g), _grads(ref.context, inputs, g), strict=True
    ):
        torch.testing.assert_close(got, want)
