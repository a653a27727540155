"""``attend(..., need_weights=False)`` routes local alignments to the O(n·window) kernels and
gives what the reference path (need_weights=True) gives; other stages keep the reference."""

import torch

import attnkit
from attnkit.core import attend


def _pair(**kw):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 33, 8, dtype=torch.float64) for _ in range(3))
    mask = attnkit.padding_mask(torch.tensor([33, 20]))[:, None]
    fast = attend(q, k, v, mask=mask, need_weights=False, **kw)
    ref = attend(q, k, v, mask=mask, need_weights=True, **kw)
    return fast, ref


def test_sliding_window_dispatches(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    calls = []
    import attnkit.local.dispatch as dispatch

    real = dispatch.sliding_window_attention
    monkeypatch.setattr(
        dispatch, "sliding_window_attention", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    for align in (attnkit.SlidingWindow(3), attnkit.SlidingWindow(5, causal=True)):
        fast, ref = _pair(align=align)
        assert fast.weights is None
        torch.testing.assert_close(fast.context, ref.context)
    fast, ref = _pair(align=attnkit.LocalM(4))
    torch.testing.assert_close(fast.context, ref.context)
    torch.testing.assert_close(fast.extras["position"], ref.extras["position"])
    assert len(calls) == 3


def test_local_p_dispatches_to_gather() -> None:
    align = attnkit.LocalP(8, 3).double()
    fast, ref = _pair(align=align)
    torch.testing.assert_close(fast.context, ref.context)
    torch.testing.assert_close(fast.extras["position"], ref.extras["position"])


def test_other_stages_keep_reference() -> None:
    score = attnkit.LocationScore(8, 33).double()
    fast, ref = _pair(align=attnkit.LocalM(2), score=score)
    torch.testing.assert_close(fast.context, ref.context)
