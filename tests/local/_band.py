"""What the sliding-window kernels' tests share: float64 inputs, and the check of a context
and its gradients against the dense reference ``attend(..., align=SlidingWindow)``.

Legend: Tq queries, Tk keys, D query/key width, Dv value width.
"""

from __future__ import annotations

import torch

import attnkit

TIGHT = {"atol": 1e-10, "rtol": 1e-10}


def band_inputs(
    lead: tuple[int, ...], tq: int, tk: int, d: int, dv: int, seed: int
) -> list[torch.Tensor]:
    """query (*lead, Tq, D), keys (*lead, Tk, D), values (*lead, Tk, Dv), float64, with grad."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, tq, d, generator=gen, dtype=torch.float64)
    k = torch.randn(*lead, tk, d, generator=gen, dtype=torch.float64)
    v = torch.randn(*lead, tk, dv, generator=gen, dtype=torch.float64)
    return [x.requires_grad_() for x in (q, k, v)]


def matches_reference(
    context: torch.Tensor, inputs: list[torch.Tensor], radius: int, causal: bool,
    mask: torch.Tensor | None,
) -> list[torch.Tensor]:  # fmt: skip
    """Assert that ``context`` and its (dq, dk, dv) for a random output gradient equal the
    dense reference's to 1e-10; -> those gradients."""
    ref = attnkit.attend(*inputs, align=attnkit.SlidingWindow(radius, causal), mask=mask)
    torch.testing.assert_close(context, ref.context, **TIGHT)
    g = torch.randn(ref.context.shape, dtype=torch.float64, generator=torch.Generator())
    got = torch.autograd.grad(context, inputs, g)
    want = torch.autograd.grad(ref.context, inputs, g)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, **TIGHT)
    return list(got)
