"""float16 / bfloat16 inputs with logits near 1e4 stay finite and within 1e-2 relative of the
float32 result (computed from the same rounded inputs): attnkit scores and normalises half
inputs in float32."""

import pytest
import torch
from _spies import only_path

import attnkit
from attnkit import (
    AdditiveScore,
    AttentionHeads,
    Entmax15,
    GeneralScore,
    LocalP,
    Softmax,
    Sparsemax,
    attend,
)

pytestmark = pytest.mark.usefixtures("one_thread")

HALF = [torch.float16, torch.bfloat16]


def _large_logits(dtype, seed: int = 0):
    """Elements ~100 (representable in both half types), logits qᵀk/√16 ~ 1e4."""
    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(2, 5, 16, generator=g) * 100).to(dtype)
    k = (torch.randn(2, 7, 16, generator=g) * 100).to(dtype)
    v = torch.randn(2, 7, 8, generator=g).to(dtype)
    return q, k, v


def _close(got: torch.Tensor, ref: torch.Tensor) -> None:
    assert torch.isfinite(got).all()
    scale = float(ref.detach().abs().max())
    torch.testing.assert_close(got.float(), ref, rtol=1e-2, atol=1e-2 * scale)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("need_weights", [True, False])
def test_softmax_attention_half_matches_float32(dtype, need_weights: bool) -> None:
    q, k, v = _large_logits(dtype)
    logits = (q.float() @ k.float().transpose(-2, -1)) / 4
    assert logits.abs().max() > 1e4  # really near 1e4: float16 would overflow exp() directly
    mask = attnkit.padding_mask(torch.tensor([7, 4]))
    ref = attend(q.float(), k.float(), v.float(), mask=mask)
    out = attend(q, k, v, mask=mask, need_weights=need_weights)
    assert out.context.dtype == dtype
    _close(out.context, ref.context)
    if need_weights:
        assert out.weights is not None
        _close(out.weights, ref.weights)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("norm", [Softmax(), Softmax(3.0), Sparsemax(), Entmax15()], ids=str)
def test_normalisers_finite_on_half_logits(dtype, norm) -> None:
    g = torch.Generator().manual_seed(0)
    z = (torch.randn(3, 4, 9, generator=g) * 1e4).to(dtype)  # (B, Tq, Tk)
    mask = torch.rand(3, 4, 9, generator=g) > 0.3
    mask[..., 0] = True
    w = norm(z, mask)
    assert w.dtype == torch.float32 and torch.isfinite(w).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 4))
    assert (w[~mask] == 0).all()
    _close(w, norm(z.float(), mask))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("norm", [Sparsemax(), Entmax15()], ids=str)
def test_sparse_attention_half_finite(dtype, norm) -> None:
    q, k, v = _large_logits(dtype)
    out = attend(q, k, v, normaliser=norm)
    ref = attend(q.float(), k.float(), v.float(), normaliser=norm)
    _close(out.context, ref.context)


@pytest.mark.parametrize("dtype", HALF)
def test_local_p_half_inputs(dtype) -> None:
    # Used to fail: the float32 local-p parameters met the half query in a matmul.
    torch.manual_seed(0)
    lp = LocalP(16, window=2)
    q, k, v = _large_logits(dtype)
    q = q / 100
    out = attend(q, k / 100, v, align=lp)
    ref = attend(q.float(), k.float() / 100, v.float(), align=lp)
    _close(out.context, ref.context)


@pytest.mark.parametrize("dtype", HALF)
def test_multihead_module_in_half(dtype) -> None:
    torch.manual_seed(0)
    m = AttentionHeads(16, 4)
    x = torch.randn(2, 5, 16) * 30
    ref = m(x.to(dtype).float()).context
    half = m.to(dtype)
    for need in (True, False):
        out = half(x.to(dtype), need_weights=need).context
        assert out.dtype == dtype
        _close(out, ref)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("align", ["global", "local-p"])
@pytest.mark.parametrize(
    "score", ["scaled_dot", "dot", "general", "additive", "location", "cosine"]
)
def test_half_modules_with_parameters(score: str, align: str, dtype) -> None:
    # Used to fail: a module cast with .half() met attend's float32 work tensors in a matmul.
    torch.manual_seed(0)
    m = attnkit.build(score, dim=8, heads=2, align=align, window=2, max_keys=6)
    x = torch.randn(2, 6, 8).to(dtype)
    m_half = attnkit.build(score, dim=8, heads=2, align=align, window=2, max_keys=6).to(dtype)
    m_half.load_state_dict({k: v.to(dtype) for k, v in m.state_dict().items()})
    ref = m.to(torch.float32)(x.float()).context
    out = m_half(x).context
    assert out.dtype == dtype
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), ref, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("dtype", HALF)
def test_half_multidimensional_module(dtype) -> None:
    torch.manual_seed(0)
    m = attnkit.MultiDimensionalAttention(8)
    x = torch.randn(2, 5, 8)
    ref = m(x.to(dtype).float(), x.to(dtype).float()).context
    out = m.to(dtype)(x.to(dtype), x.to(dtype)).context
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), ref, rtol=0.05, atol=0.05)


FAST_PATHS = {
    "sliding": ("sliding", lambda: dict(align=attnkit.SlidingWindow(2))),
    "sliding-causal": ("sliding", lambda: dict(align=attnkit.SlidingWindow(3, causal=True))),
    "local-m": ("sliding", lambda: dict(align=attnkit.LocalM(2))),
    "local-m/general": ("gather", lambda: dict(align=attnkit.LocalM(2), score=GeneralScore(16))),
    "local-p": ("gather", lambda: dict(align=LocalP(16, window=2))),
    "local-p/additive": ("gather", lambda: dict(align=LocalP(16, 2), score=AdditiveScore(16))),
    "global": ("sdpa", lambda: dict()),
    "causal": ("sdpa", lambda: dict(align=attnkit.CausalAlignment())),
}


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("case", sorted(FAST_PATHS))
def test_every_fast_path_in_half(case: str, dtype) -> None:
    # Used to fail for local-p: its fast path had its own copy of the position code, without
    # the cast of LocalP's float32 parameters ("RuntimeError: Half != float").
    path, stages = FAST_PATHS[case]
    torch.manual_seed(0)
    kw = stages()
    q, k, v = _large_logits(dtype)
    if "align" in kw and not isinstance(kw["align"], attnkit.SlidingWindow | attnkit.LocalM):
        q = q / 100  # local-p: a position spread over the source, not saturated at S
    mask = attnkit.padding_mask(torch.tensor([7, 4]))
    with only_path(path):
        out = attend(q, k, v, mask=mask, need_weights=False, **kw)
    ref = attend(q.float(), k.float(), v.float(), mask=mask, **kw)
    assert out.context.dtype == dtype
    _close(out.context, ref.context)
    if "position" in ref.extras:
        torch.testing.assert_close(out.extras["position"], ref.extras["position"])
