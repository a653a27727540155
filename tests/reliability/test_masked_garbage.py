"""A masked position never reaches the output: NaN or Inf in the keys or values at padding
positions (masked for every query) leaves every output, and every gradient, exactly as it is
with finite data there. A weight of zero is not enough (0·NaN = NaN in the weighted sum, and
SDPA adds -inf to a NaN score): ``attend`` zeroes the masked keys and values themselves.

Each case runs one mechanism twice, once with garbage (NaN, +Inf, -Inf) at the padded keys
and values and once with random finite numbers there, from the same random state, and
compares: on the fused SDPA path, the column path, the dense reference path, the banded C++
kernel (sliding windows, strided heads), the factorised patterns, every score and normaliser.

Legend: B batch, H heads, T positions, D head width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import attnkit
import attnkit.nn as ann
from attnkit import attend
from attnkit.mechanisms.hierarchical import AttentionPool, FunctionPool, max_pool, mean_pool
from attnkit.mechanisms.multidim import FeaturewisePool
from attnkit.registry import ALIGNMENTS, STRIDED, build_alignment, build_normaliser, build_score

pytestmark = pytest.mark.usefixtures("one_thread_module")

B, H, T, D = 2, 2, 16, 8
PAD = 3  # the last PAD positions of every sequence are padding


def _padding() -> torch.Tensor:
    mask = torch.ones(B, 1, 1, T, dtype=torch.bool)  # (B, 1, 1, T): True = may attend
    mask[0, ..., -PAD:] = False
    mask[1, ..., -1] = False
    return mask


def _spoil(x: torch.Tensor, mask: torch.Tensor, garbage: bool) -> torch.Tensor:
    """x (B, H, T, D) with its padded rows set to NaN/+Inf/-Inf (garbage) or random numbers."""
    out = x.clone()
    hidden = ~mask[:, 0, 0]  # (B, T)
    fill = torch.tensor([float("nan"), float("inf"), -float("inf")]) if garbage else None
    for b, t in hidden.nonzero().tolist():
        out[b, :, t] = fill[t % 3] if fill is not None else torch.randn(x.shape[1], x.shape[3])
    return out


def _stages() -> dict[str, dict[str, Any]]:
    cases: dict[str, dict[str, Any]] = {}
    for name in sorted(ALIGNMENTS):
        size = "stride" if name in STRIDED else "window"  # a pattern's l, a window's radius
        cases[f"align={name}"] = {"align": build_alignment(name, D, **{size: 4})}
    for name in ("dot", "general", "additive", "cosine"):
        cases[f"score={name}"] = {"score": build_score(name, D, hidden=8)}
    for name in ("sparsemax", "entmax15", "gumbel"):
        cases[f"normaliser={name}"] = {"normaliser": build_normaliser(name)}
    cases["plain"] = {}
    return cases


STAGES = _stages()


def _run(stages: dict[str, Any], garbage: bool, need_weights: bool, grad: bool) -> list[Any]:
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))  # (B, H, T, D) each
    mask = _padding()
    torch.manual_seed(1)
    k, v = _spoil(k, mask, garbage), _spoil(v, mask, garbage)
    for x in (q, k, v):
        x.requires_grad_(grad)
    torch.manual_seed(2)  # gumbel's noise, the same in both runs
    with torch.set_grad_enabled(grad):
        out = attend(q, k, v, mask=mask, need_weights=need_weights, **stages)
    got = [out.context, out.weights]
    if grad:
        out.context.square().sum().backward()
        seen = mask[:, 0, 0, :, None].expand(B, T, D).unsqueeze(1)  # (B, 1, T, D)
        got += [q.grad, k.grad * seen, v.grad * seen]  # the padded rows' grads are not compared
    return got


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "weights"])
@pytest.mark.parametrize("case", sorted(STAGES))
def test_garbage_at_masked_positions_never_reaches_the_output(
    case: str, need_weights: bool, grad: bool
) -> None:
    clean = _run(STAGES[case], garbage=False, need_weights=need_weights, grad=grad)
    spoiled = _run(STAGES[case], garbage=True, need_weights=need_weights, grad=grad)
    for a, b in zip(spoiled, clean, strict=True):
        if a is None:
            assert b is None
            continue
        assert torch.isfinite(a).all(), case
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def _module_case(make: Callable[[], torch.nn.Module], call: str) -> Callable[[bool], Any]:
    def run(garbage: bool) -> torch.Tensor:
        torch.manual_seed(0)
        module = make()
        x = torch.randn(B, T, 8)  # (B, T, 8): a batch of padded sequences
        pad = torch.zeros(B, T, dtype=torch.bool)  # (B, T)
        pad[0, -PAD:] = True
        pad[1, -1] = True
        x[pad] = float("nan") if garbage else 0.5
        if call == "drop-in":  # nn.MultiheadAttention's key_padding_mask: True = ignore
            out = module(x, x, x, key_padding_mask=pad)[0]
        else:
            out = module(x, x, mask=(~pad)[:, None, :]).context  # (B, 1, T): True = may attend
        return out[~pad]  # the outputs of real positions

    return run


MODULES = {
    "multi-head": _module_case(lambda: attnkit.build(dim=8, heads=2), "heads"),
    "multi-head additive": _module_case(
        lambda: attnkit.build("additive", dim=8, heads=2, hidden=8), "heads"
    ),
    "multi-head sliding": _module_case(
        lambda: attnkit.build(dim=8, heads=2, align="sliding", window=3), "heads"
    ),
    "single-head": _module_case(lambda: attnkit.build(dim=8), "heads"),
    "drop-in nn.MultiheadAttention": _module_case(
        lambda: ann.MultiheadAttention(8, 2, batch_first=True), "drop-in"
    ),
    "multi-dimensional (DiSAN)": _module_case(
        lambda: attnkit.build(dim=8, output="multi-dimensional"), "heads"
    ),
}


@pytest.mark.parametrize("case", sorted(MODULES))
def test_nan_in_padded_inputs_of_a_module_never_reaches_real_positions(case: str) -> None:
    with torch.no_grad():
        spoiled, clean = MODULES[case](True), MODULES[case](False)
    assert torch.isfinite(spoiled).all()
    torch.testing.assert_close(spoiled, clean, rtol=1e-5, atol=1e-6)


def test_a_position_some_query_attends_is_data() -> None:
    """Only what no query may attend is dropped: under a causal alignment a NaN in the last
    value is data the last query attends, and its output says so."""
    q, k, v = (torch.randn(1, T, D) for _ in range(3))
    v[0, -1] = float("nan")
    mask = torch.ones(1, 1, T, dtype=torch.bool)
    out = attend(q, k, v, mask=mask, align=build_alignment("causal", D)).context  # (1, T, D)
    assert torch.isnan(out[0, -1]).all()


POOLS = {
    "attention (HAN)": lambda: AttentionPool(8, 8),
    "feature-wise (DiSAN source2token)": lambda: FeaturewisePool(8),
    "mean": lambda: FunctionPool(mean_pool),
    "max": lambda: FunctionPool(max_pool),
}


@pytest.mark.parametrize("case", sorted(POOLS))
def test_nan_at_padded_positions_never_reaches_a_pooled_vector(case: str) -> None:
    def pooled(garbage: bool) -> torch.Tensor:
        torch.manual_seed(0)
        pool = POOLS[case]()
        h = torch.randn(B, T, 8)  # (B, T, 8) annotations
        mask = torch.ones(B, T, dtype=torch.bool)  # (B, T): True = a real word
        mask[0, -PAD:] = False
        h[~mask] = float("nan") if garbage else 0.5
        return pool(h, mask).vector  # (B, 8)

    spoiled, clean = pooled(True), pooled(False)
    assert torch.isfinite(spoiled).all()
    torch.testing.assert_close(spoiled, clean, rtol=1e-5, atol=1e-6)
