"""The chunked additive score's own backward pass equals autograd through the whole (unchunked)
hidden tensor, in float64 to 1e-10, and passes gradcheck."""

import pytest
import torch

from attnkit.stages._additive_chunks import AdditiveChunks
from attnkit.stages.scores import additive_projected_score, additive_score


def _whole(wq: torch.Tensor, wk: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.tanh(wq[..., :, None, :] + wk[..., None, :, :]) @ v  # (..., Tq, Tk)


@pytest.mark.parametrize("chunks", [(1, 1), (4, 3), (13, 11), (5, 100)])
def test_chunks_equal_the_whole_tensor(chunks: tuple[int, int]) -> None:
    gen = torch.Generator().manual_seed(0)
    wq = torch.randn(2, 3, 13, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    wk = torch.randn(2, 3, 11, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    v = torch.randn(5, dtype=torch.float64, generator=gen, requires_grad=True)
    out = AdditiveChunks.apply(wq, wk, v, *chunks)
    ref = _whole(wq, wk, v)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=1e-10)
    g = torch.randn(ref.shape, dtype=torch.float64, generator=gen)
    got = torch.autograd.grad(out, [wq, wk, v], g)
    want = torch.autograd.grad(ref, [wq, wk, v], g)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def test_score_uses_it_when_chunked_and_passes_gradcheck() -> None:
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 6, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    h = torch.randn(1, 2, 5, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    w1 = torch.randn(3, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    w2 = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    v = torch.randn(3, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, generator=gen, requires_grad=True)
    out = additive_score(q, h, w1, w2, v, b, max_elements=20)  # several chunks
    assert "AdditiveChunks" in type(out.grad_fn).__name__
    ref = additive_score(q, h, w1, w2, v, b, max_elements=1 << 20)  # one block
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=1e-10)
    wk = torch.randn(1, 2, 5, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda q, wk, v: additive_projected_score(q, wk, w1, v, max_elements=15), (q, wk, v)
    )


@pytest.mark.parametrize(
    ("tq", "tk", "budget"), [(64, 64, 4096), (64, 64, 1 << 20), (40, 70, 3000), (7, 900, 500)]
)
def test_blocks_hold_at_most_a_sixteenth_of_the_whole_tensor(
    tq: int, tk: int, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the hidden tensor passes the budget, each block is at most 1/16 of it and at most
    the budget (peak memory under a tenth of the dense form, issue 18 part 5), and the
    blocks still give the whole tensor's scores."""
    from attnkit.stages import scores

    seen: list[tuple[int, int]] = []
    real = AdditiveChunks.apply

    def spy(wq, wk, v, q_chunk, k_chunk):  # type: ignore[no-untyped-def]
        seen.append((q_chunk, k_chunk))
        return real(wq, wk, v, q_chunk, k_chunk)

    monkeypatch.setattr(scores.AdditiveChunks, "apply", spy)
    gen = torch.Generator().manual_seed(2)
    a = 4
    wq = torch.randn(2, tq, a, dtype=torch.float64, generator=gen)
    wk = torch.randn(2, tk, a, dtype=torch.float64, generator=gen)
    v = torch.randn(a, dtype=torch.float64, generator=gen)
    eye = torch.eye(a, dtype=torch.float64)
    out = additive_projected_score(wq, wk, eye, v, max_elements=budget)
    torch.testing.assert_close(out, _whole(wq, wk, v), atol=1e-10, rtol=1e-10)
    whole = 2 * a * tq * tk
    if whole <= budget:
        assert seen == []
        return
    (q_chunk, k_chunk), per_key = seen[0], 2 * a
    block = per_key * q_chunk * k_chunk
    assert block <= max(per_key, min(budget, whole // 16))
    assert block >= min(budget, whole // 16) // 4  # not needlessly small blocks
