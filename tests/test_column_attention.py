"""attend's column path (core.column_attention: scores held keys-down-a-column, for one query
or few scores on a CPU without autograd) against the float64 reference of eq. 1, with every
mask layout a caller passes; ``attend`` takes it only where ``COLUMN_SCORES`` says and gives
what its other paths give; and ``broadcasts_to`` (the mask check) agrees with torch."""

from __future__ import annotations

import itertools

import pytest
import torch
from _reference import sdpa_ref
from _spies import only_path

from attnkit import CausalAlignment, attend
from attnkit._checks import broadcasts_to
from attnkit.core import COLUMN_SCORES, column_attention


def masks(b: int, tq: int, tk: int) -> list[torch.Tensor | None]:
    """No mask, a padding mask (B, 1, 1, Tk) with one sentence fully masked, a full
    (B, 1, Tq, Tk) mask with a fully masked row, a (Tk,) mask."""
    pad = torch.arange(tk)[None, None, None, :] < torch.tensor([tk, 2, 0])[:b, None, None, None]
    full = torch.rand(b, 1, tq, tk) > 0.4
    full[0, 0, 0] = False
    return [None, pad, full, torch.arange(tk) != 1]


@pytest.mark.parametrize("tq,tk", [(1, 1), (1, 6), (3, 5), (5, 9), (16, 16)])
def test_column_attention_equals_eq_1_in_float64(tq: int, tk: int) -> None:
    torch.manual_seed(tq * 100 + tk)
    q, k, v = torch.randn(3, 2, tq, 4), torch.randn(3, 2, tk, 4), torch.randn(3, 2, tk, 5)
    for mask in masks(3, tq, tk):
        got = column_attention(q.double(), k.double(), v.double(), mask, need_weights=True)
        ctx, w = sdpa_ref(q, k, v, mask)
        assert got.weights is not None and got.scores is not None
        torch.testing.assert_close(got.context, ctx, rtol=0, atol=1e-12)
        torch.testing.assert_close(got.weights, w, rtol=0, atol=1e-12)
        scores = q.double() @ k.double().transpose(-2, -1) / 2.0  # √4
        torch.testing.assert_close(got.scores, scores, rtol=0, atol=1e-12)
        lean = column_attention(q, k, v, mask, need_weights=False)
        assert lean.weights is None
        torch.testing.assert_close(lean.context, ctx.float(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("tq,tk", [(1, 40), (4, 64), (16, 16), (17, 16), (40, 40)])
def test_attend_takes_the_column_path_only_where_it_wins(tq: int, tk: int) -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, tq, 8), torch.randn(2, 3, tk, 8), torch.randn(2, 3, tk, 8)
    mask = torch.arange(tk)[None, None, None, :] < torch.tensor([tk, tk // 2])[:, None, None, None]
    column = tq == 1 or tq * tk <= COLUMN_SCORES
    for need in (False, True):
        trained = attend(q, k, v, mask=mask, need_weights=need)  # autograd on: general paths
        path = "column" if column else "reference" if need else "sdpa"
        with torch.no_grad(), only_path(path):
            got = attend(q, k, v, mask=mask, need_weights=need)
        torch.testing.assert_close(got.context, trained.context, rtol=0, atol=1e-5)
        if need:
            assert got.weights is not None and trained.weights is not None
            torch.testing.assert_close(got.weights, trained.weights, rtol=0, atol=1e-6)


def test_the_column_path_keeps_its_limits() -> None:
    """Half inputs, an alignment, positions, a non-plain score and widths that differ all
    stay on their own paths (the last with the score's error)."""
    q = torch.randn(2, 1, 3, 8)
    with torch.no_grad():
        with only_path("sdpa"):
            attend(q.bfloat16(), q.bfloat16(), q.bfloat16(), need_weights=False)
        with only_path("reference"):
            attend(q, q, q, align=CausalAlignment())
        with only_path("reference"):
            attend(q, q, q, score=lambda a, b: a @ b.transpose(-2, -1))
        with pytest.raises(ValueError, match="widths to match"):
            attend(q, torch.randn(2, 1, 3, 6), torch.randn(2, 1, 3, 6))


def test_broadcasts_to_agrees_with_torch() -> None:
    def torch_says(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
        try:
            return torch.broadcast_shapes(shape, target) == torch.Size(target)
        except RuntimeError:
            return False

    for la, lb in itertools.product(range(4), repeat=2):
        for a in itertools.product((0, 1, 2, 3), repeat=la):
            for b in itertools.product((0, 1, 2, 3), repeat=lb):
                assert broadcasts_to(a, b) == torch_says(a, b), (a, b)
