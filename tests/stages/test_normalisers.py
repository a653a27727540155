"""Normalisers against float64 references written from the papers (bisection on τ for
sparsemax / entmax-1.5), and their backward passes against finite differences."""

from collections.abc import Callable

import numpy as np
import pytest
import torch
from _reference import entmax15_row, normalise, softmax_row, sparsemax_row
from torch.autograd import gradcheck

import attnkit
from attnkit.stages.normalisers import (
    Entmax15,
    Softmax,
    Sparsemax,
    entmax15,
    masked_softmax,
    sparsemax,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _scores_and_mask(seed: int, shape=(2, 3, 7), scale: float = 2.0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(*shape, generator=g, dtype=torch.float64) * scale
    mask = torch.rand(*shape, generator=g) > 0.3
    mask[..., 0] = True  # every row keeps a key; fully masked rows are tested separately
    return z, mask


@pytest.mark.parametrize("temperature", [1.0, 0.5, 3.0])
@pytest.mark.parametrize("masked", [False, True])
def test_softmax_matches_reference(temperature: float, masked: bool) -> None:
    z, mask = _scores_and_mask(0)
    m = mask if masked else None
    got = Softmax(temperature)(z, m)
    ref = normalise(z, m, softmax_row, temperature=temperature)
    np.testing.assert_allclose(got.numpy(), ref, atol=1e-12)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize(
    ("fn", "row", "seed", "same_support"),
    [(sparsemax, sparsemax_row, 1, True), (entmax15, entmax15_row, 2, False)],
    ids=["sparsemax", "entmax15"],
)
def test_sparse_normaliser_matches_bisection_reference(
    fn: Callable[..., torch.Tensor], row: Callable[..., np.ndarray], seed: int,
    same_support: bool, masked: bool,
) -> None:  # fmt: skip
    z, mask = _scores_and_mask(seed)
    m = mask if masked else None
    got = fn(z, m)
    ref = normalise(z, m, row)
    np.testing.assert_allclose(got.numpy(), ref, atol=1e-10)
    if same_support:
        assert ((got == 0) == (torch.from_numpy(ref) < 1e-12)).all()  # same support


def test_sparsemax_pinned_value() -> None:
    # z = (0.2, 0.1, -0.5): τ = (0.2 + 0.1 - 1) / 2 = -0.35, p = (0.55, 0.45, 0) exactly.
    p = sparsemax(torch.tensor([0.2, 0.1, -0.5], dtype=torch.float64))
    torch.testing.assert_close(p, torch.tensor([0.55, 0.45, 0.0], dtype=torch.float64))
    assert p[2].item() == 0.0


def test_entmax15_pinned_value() -> None:
    # z = (2, 0): x = z/2 = (1, 0); (1 - τ)² = 1 with τ = 0 gives p = (1, 0), as (0 - τ)₊ = 0.
    p = entmax15(torch.tensor([2.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(p, torch.tensor([1.0, 0.0], dtype=torch.float64))
    # z = (0, 0): τ solves 2(-τ)² = 1, p = (1/2, 1/2).
    p = entmax15(torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(p, torch.full((2,), 0.5, dtype=torch.float64))


def test_entmax_between_softmax_and_sparsemax() -> None:
    z, _ = _scores_and_mask(3, shape=(4, 9), scale=1.0)
    zeros = [int((f(z) == 0).sum()) for f in (masked_softmax, entmax15, sparsemax)]
    assert zeros[0] == 0 and zeros[0] <= zeros[1] <= zeros[2] and zeros[2] > 0


@pytest.mark.parametrize(
    "fn",
    [lambda z, m: masked_softmax(z, m, 0.7), sparsemax, entmax15],
    ids=["softmax", "sparsemax", "entmax15"],
)
@pytest.mark.parametrize("masked", [False, True])
def test_normaliser_gradcheck(fn, masked: bool) -> None:
    z, mask = _scores_and_mask(4, shape=(2, 3, 6), scale=1.5)
    z.requires_grad_(True)
    m = mask if masked else None
    assert gradcheck(lambda x: fn(x, m), (z,), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("norm", [Softmax(), Sparsemax(), Entmax15()], ids=lambda n: n.name)
def test_fully_masked_rows_are_zero_without_nan(norm) -> None:
    z = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[0, 1] = False
    w = norm(z, mask)
    assert (w[0, 1] == 0).all()
    torch.testing.assert_close(w[1].sum(-1), torch.ones(3, dtype=torch.float64))
    (w * torch.randn_like(w)).sum().backward()
    assert z.grad is not None and torch.isfinite(z.grad).all()
    assert (z.grad[0, 1] == 0).all()


def test_normalisers_exported_and_named() -> None:
    assert attnkit.softmax.temperature == 1.0
    assert {Softmax().name, Sparsemax().name, Entmax15().name} == {
        "softmax",
        "sparsemax",
        "entmax15",
    }


def test_bad_temperature_raises() -> None:
    with pytest.raises(ValueError, match="temperature must be > 0"):
        Softmax(0.0)


@pytest.mark.parametrize("scale", [1e3, 5e6, 3e7, 1e12, 1e30])
@pytest.mark.parametrize("fn", [attnkit.sparsemax, attnkit.entmax15])
def test_sparse_normalisers_are_stable_at_any_finite_scale(fn, scale: float) -> None:
    """Shift invariance, f(z + c) = f(z): large logits give the same weights as the same
    logits near zero (after the float32 rounding of the input itself), summing to one."""
    torch.manual_seed(0)
    offsets = torch.randn(3, 7) * 4  # (B, Tk)
    z = (scale + offsets).float()  # (B, Tk), rounded to float32's grid at this scale
    shifted = (z.double() - z.double().amax(-1, keepdim=True)).float()  # exact: Sterbenz
    w = fn(z)
    assert torch.isfinite(w).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(w, fn(shifted), atol=1e-6, rtol=0)


def test_scores_that_overflow_raise_a_clear_error() -> None:
    q, k, v = torch.full((1, 2, 4), 1e20), torch.full((1, 3, 4), 1e20), torch.randn(1, 3, 4)
    for need_weights in (True, False):  # a data check: under set_checks("full")
        with pytest.raises(ValueError, match="attention overflowed.*scale the queries/keys"):
            attnkit.attend(
                q, k, v, score=attnkit.DotScore(), need_weights=need_weights, check_finite=True
            )
    out = attnkit.attend(q / 1e20, k / 1e20, v, score=attnkit.DotScore())  # same, scaled: fine
    assert torch.isfinite(out.context).all()
