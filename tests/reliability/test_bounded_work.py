"""Issue "Nothing lost, nothing silently wrong, nothing that hangs", section 2: bounded work.
No input makes attnkit try an allocation it cannot hold; the O(n·w) way is always named."""

from __future__ import annotations

import pytest
import torch

from attnkit import attend
from attnkit.alignment import LocalP, SlidingWindow
from attnkit.local import band_to_dense

N = 256  # with a tiny budget, (1, 2, 256, 256) float32 scores + weights = 1 MiB is "too much"


@pytest.fixture
def tiny_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNKIT_DENSE_BUDGET_GIB", str(0.5 / 1024))  # 0.5 MiB


def qkv(n: int = N, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, 2, n, 8, generator=g) for _ in range(3))  # type: ignore[return-value]


CASES = {
    "global weights": (dict(), r"need_weights=False \(the fused"),
    "sliding weights": (dict(align=SlidingWindow(4)), r'weights_layout="band" for a sliding'),
    "local-p weights": (dict(align=LocalP(8, 4)), r"need_weights=False"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_dense_weights_over_the_budget_are_a_clear_error(case: str, tiny_budget: None) -> None:
    kwargs, fix = CASES[case]
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"dense \(1, 2, 256, 256\) scores and weights: .* GiB, "
                       r"over the budget of .* GiB; .*" + fix):  # fmt: skip
        attend(q, k, v, **kwargs)  # type: ignore[arg-type]


def test_the_kernels_without_dense_tensors_still_run_over_the_budget(tiny_budget: None) -> None:
    q, k, v = qkv()
    ref = attend(q.double(), k.double(), v.double(), need_weights=False).context
    assert torch.allclose(attend(q, k, v, need_weights=False).context, ref.float(), atol=1e-5)
    band = attend(q, k, v, align=SlidingWindow(4), weights_layout="band")
    assert band.weights is not None and band.weights.shape == (1, 2, N, 9)


@pytest.mark.parametrize("radius,causal", [(1, False), (4, True), (7, False), (300, False)])
def test_band_weights_are_the_dense_weights_on_the_band(radius: int, causal: bool) -> None:
    q, k, v = qkv(n=40, seed=radius)
    mask = torch.rand(1, 1, 1, 40, generator=torch.Generator().manual_seed(1)) > 0.2
    align = SlidingWindow(radius, causal=causal)
    dense = attend(q, k, v, align=align, mask=mask)
    band = attend(q, k, v, align=align, mask=mask, weights_layout="band")
    assert band.weights is not None and dense.weights is not None
    width = min(radius, 39) + 1 if causal else 2 * min(radius, 39) + 1
    assert band.weights.shape[-1] == width
    back = band_to_dense(band.weights, band.extras["band_offset"], 40)
    assert torch.allclose(back, dense.weights, atol=1e-6)
    assert torch.allclose(band.context, dense.context, atol=1e-5)


def test_band_layout_needs_a_sliding_window() -> None:
    q, k, v = qkv(n=16)
    with pytest.raises(ValueError, match='weights_layout="band" needs a sliding-window'):
        attend(q, k, v, weights_layout="band")
    with pytest.raises(ValueError, match="choose 'dense' or 'band'"):
        attend(q, k, v, weights_layout="diagonal")


@pytest.mark.parametrize("raw", ["0", "-1", "nan", "lots"])
def test_a_meaningless_budget_is_refused(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNKIT_DENSE_BUDGET_GIB", raw)
    q, k, v = qkv(n=8)
    with pytest.raises(ValueError, match="ATTNKIT_DENSE_BUDGET_GIB=.*give a positive number"):
        attend(q, k, v)
