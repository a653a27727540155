"""The sliding-window kernel's autograd.Function: its gradients equal the reference path's
(the dense band of ``attend(..., align=SlidingWindow)``, plain autograd) to 1e-10 in float64,
pass gradcheck, and give zero (never NaN) on fully masked rows."""

import pytest
import torch
from _band import TIGHT, band_inputs, matches_reference
from _spies import graph_has
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
import attnkit.local.sliding as sliding
import attnkit.local.sliding_grad as sliding_grad
from attnkit.local import sliding_window_attention

# these pin the SDPA tiles; the native kernel is tests/local/test_native.py
pytestmark = pytest.mark.usefixtures("tiles_only")



def _uses_function(out: torch.Tensor) -> bool:
    return graph_has(out, "SlidingWindowFunction")


def _mask(kind: str, n: int, short: int, seed: int) -> torch.Tensor | None:
    """A mask of ``kind`` over n queries x n keys for B = 2, H = 3: none, key padding with the
    second sequence ``short`` keys long (B, 1, 1, Tk), random query rows (B, 1, Tq, 1) or a
    random full mask (B, H, Tq, Tk)."""
    gen = torch.Generator().manual_seed(seed)
    return {
        "none": None,
        "key": attnkit.padding_mask(torch.tensor([n, short]), n)[:, None],  # (B, 1, 1, Tk)
        "query": torch.rand(2, 1, n, 1, generator=gen) > 0.3,
        "full": torch.rand(2, 3, n, n, generator=gen) > 0.5,
    }[kind]


def _check(
    tq: int, tk: int, radius: int, causal: bool, mask: torch.Tensor | None, block: int | None,
    d: int = 8, dv: int = 8, seed: int = 0,
) -> list[torch.Tensor]:  # fmt: skip
    inputs = band_inputs((2, 3), tq, tk, d, dv, seed)
    out = sliding_window_attention(*inputs, radius, causal, mask, block=block)
    assert _uses_function(out.context)
    return matches_reference(out.context, inputs, radius, causal, mask)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", ["none", "key", "query", "full"])
def test_gradients_equal_reference(causal: bool, kind: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """n = 301 (not a multiple of the block), several forward and backward runs, every mask
    kind, D != Dv."""
    monkeypatch.setattr(sliding, "CHUNK_QUERIES", 64)
    monkeypatch.setattr(sliding_grad, "BACKWARD_QUERIES", 48)
    _check(301, 301, 20, causal, _mask(kind, 301, 170, seed=7), block=16, d=8, dv=5)


def test_fully_masked_rows_give_zero_output_and_gradient() -> None:
    """Rows whose window holds no allowed key: context 0 and no gradient flows to them."""
    mask = torch.ones(2, 3, 40, 40, dtype=torch.bool)
    mask[:, :, 5:12] = False  # queries 5..11 may attend nothing
    mask[1] = False  # the whole second batch element is masked
    inputs = band_inputs((2, 3), 40, 40, 8, 8, 1)
    out = sliding_window_attention(*inputs, 3, False, mask, block=4)
    assert torch.equal(out.context[:, :, 5:12], torch.zeros_like(out.context[:, :, 5:12]))
    assert torch.equal(out.context[1], torch.zeros_like(out.context[1]))
    out.context.sum().backward()
    for x in inputs:
        assert x.grad is not None and torch.isfinite(x.grad).all()
    q, k, v = inputs
    assert q.grad is not None and k.grad is not None and v.grad is not None
    assert q.grad[:, :, 5:12].abs().max() == 0 and q.grad[1].abs().max() == 0
    assert k.grad[1].abs().max() == 0 and v.grad[1].abs().max() == 0
    _check(40, 40, 3, False, mask, block=4)


def test_rectangular_and_wide_radius() -> None:
    """Tq != Tk both ways, a radius wider than the sequence, block 1."""
    _check(17, 25, 4, False, None, block=5)
    _check(25, 17, 4, True, None, block=3)
    _check(9, 9, 50, False, None, block=1)


def test_gradcheck_tiny() -> None:
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 1, 8, 2, generator=gen, dtype=torch.float64) for _ in range(3))
    mask = attnkit.padding_mask(torch.tensor([6]), 8)[:, None]

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return sliding_window_attention(q, k, v, 2, False, mask, block=4).context

    def fn_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return sliding_window_attention(q, k, v, 3, True, block=3).context

    inputs = tuple(x.requires_grad_() for x in (q, k, v))
    assert torch.autograd.gradcheck(fn, inputs)
    assert torch.autograd.gradcheck(fn_causal, inputs)


def test_no_grad_path_skips_the_function() -> None:
    q = torch.randn(1, 20, 4)
    with torch.no_grad():
        out = sliding_window_attention(q.requires_grad_(), q, q, 2).context
    assert out.grad_fn is None


def test_bfloat16_gradients_near_float64() -> None:
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 2, 200, 16, generator=gen) for _ in range(3))
    grads = []
    for dtype in (torch.float64, torch.bfloat16):
        xs = [x.to(dtype).requires_grad_() for x in (q, k, v)]
        sliding_window_attention(*xs, 10, True).context.float().sum().backward()
        grads.append([x.grad for x in xs])
    for want, got in zip(*grads, strict=True):
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.double(), want, atol=5e-2, rtol=5e-2)


@settings(max_examples=15, deadline=None)
@given(
    tq=st.integers(1, 30),
    extra=st.sampled_from([0, 4, -2]),
    radius=st.integers(0, 12),
    causal=st.booleans(),
    block=st.sampled_from([1, 2, 5, 8, None]),
    seed=st.integers(0, 1000),
)
def test_gradients_over_shapes(
    tq: int, extra: int, radius: int, causal: bool, block: int | None, seed: int
) -> None:
    tk = max(1, tq + extra)
    mask = torch.rand(2, 1, 1, tk, generator=torch.Generator().manual_seed(seed)) > 0.2
    _check(tq, tk, radius, causal, mask, block, d=4, dv=6, seed=seed)


def test_backward_block_follows_the_width() -> None:
    """About the band's width, between the forward block and ``BACKWARD_BLOCK``."""
    smallest = sliding.DEFAULT_BLOCK
    assert sliding_grad.backward_block(2 * 256 + 1, smallest) == sliding_grad.BACKWARD_BLOCK == 192
    assert sliding_grad.backward_block(65, smallest) == 64
    assert sliding_grad.backward_block(9, smallest) == sliding.DEFAULT_BLOCK


@pytest.fixture
def own_backward_blocks(monkeypatch):  # type: ignore[no-untyped-def]
    """Forward blocks of 5, backward blocks of 16 (neither divides the sizes below), several
    runs in each pass."""
    monkeypatch.setattr(sliding, "DEFAULT_BLOCK", 5)
    monkeypatch.setattr(sliding_grad, "BACKWARD_BLOCK", 16)
    monkeypatch.setattr(sliding, "CHUNK_QUERIES", 40)
    monkeypatch.setattr(sliding_grad, "BACKWARD_QUERIES", 48)
    assert sliding_grad.backward_block(2 * 20 + 1, sliding.DEFAULT_BLOCK) == 16


@pytest.mark.usefixtures("own_backward_blocks")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", ["none", "key", "query", "full"])
def test_backward_on_its_own_blocks_equals_reference(causal: bool, kind: str) -> None:
    """The backward pass re-tiles the forward's log-sum-exp and the user mask on its own
    blocks: gradients still equal the reference's to 1e-10, every mask kind, causal."""
    _check(203, 203, 20, causal, _mask(kind, 203, 111, seed=11), block=None, d=8, dv=5)


@pytest.mark.usefixtures("own_backward_blocks")
def test_backward_on_its_own_blocks_masked_rows_rectangular_gradcheck() -> None:
    """Fully masked rows (zero output, zero gradient), Tq != Tk both ways, and gradcheck,
    with the backward blocks differing from the forward's."""
    mask = torch.ones(2, 3, 90, 90, dtype=torch.bool)
    mask[:, :, 30:47] = False  # rows a backward block (16) and forward blocks (5) straddle
    mask[1] = False
    got = _check(90, 90, 20, False, mask, block=None)
    assert got[0][:, :, 30:47].abs().max() == 0 and got[1][1].abs().max() == 0
    _check(70, 93, 20, False, None, block=None)
    _check(93, 70, 20, True, None, block=None)
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 1, 37, 2, generator=gen, dtype=torch.float64) for _ in range(3))
    pad = attnkit.padding_mask(torch.tensor([31]), 37)[:, None]

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return sliding_window_attention(q, k, v, 20, False, pad).context

    assert torch.autograd.gradcheck(fn, tuple(x.requires_grad_() for x in (q, k, v)))


def test_a_mask_broadcast_over_queries_and_keys() -> None:
    """A (B, 1, 1, 1) mask (one batch element masked whole) and a key padding mask over one key
    tile as blocks (1, 1): their tiles broadcast over the blocks of every run, not only the
    first (a run starting past block 0 once sliced them empty)."""
    mask = torch.tensor([True, False]).view(2, 1, 1, 1)
    got = _check(40, 40, 3, False, mask, block=4)
    assert got[0][1].abs().max() == 0
    _check(40, 40, 3, True, mask, block=None)
    _check(2, 1, 0, False, torch.ones(2, 1, 1, 1, dtype=torch.bool), block=1, d=4, dv=6)
    q, k, v = band_inputs((2, 3), 40, 40, 8, 8, 3)
    with torch.no_grad():  # the forward-only path shares the run masks
        out = sliding_window_attention(q, k, v, 3, False, mask, block=4).context
        ref = attnkit.attend(q, k, v, align=attnkit.SlidingWindow(3), mask=mask).context
    torch.testing.assert_close(out, ref, **TIGHT)
