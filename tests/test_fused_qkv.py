"""Self-attention projects q, k and v in one matrix product (modules.AttentionHeads
``project_qkv``): the fused path equals the three separate projections, values and
gradients, and a forward hook on a projection still sees it called (the unfused path)."""

import pytest
import torch

from attnkit.modules import AttentionHeads, SelfAttention, split_heads
from attnkit.stages.alignment import CausalAlignment


def test_project_qkv_equals_the_three_projections() -> None:
    torch.manual_seed(0)
    m = SelfAttention(12, 3).double()
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    q, k, v = m.project_qkv(x)  # (B, H, T, Dh) each
    for got, layer in zip((q, k, v), (m.q_proj, m.k_proj, m.v_proj), strict=True):
        assert got.shape == (2, 3, 5, 4)
        torch.testing.assert_close(got, split_heads(layer(x), 3), rtol=0, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_self_attention_equals_the_unfused_path(bias: bool, causal: bool) -> None:
    torch.manual_seed(0)
    align = CausalAlignment() if causal else None
    m = SelfAttention(16, 4, bias=bias, align=align).double()
    x = torch.randn(3, 6, 16, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(3, 1, 6, dtype=torch.bool)
    mask[1, :, 4:] = False
    fused = m(x, mask=mask)
    grads = torch.autograd.grad(fused.context.sum(), [x, *m.parameters()])
    calls = []
    hook = m.q_proj.register_forward_hook(lambda *_: calls.append(1))  # forces the unfused path
    try:
        plain = m(x, mask=mask)
        plain_grads = torch.autograd.grad(plain.context.sum(), [x, *m.parameters()])
    finally:
        hook.remove()
    assert calls == [1]
    torch.testing.assert_close(fused.context, plain.context, rtol=0, atol=1e-12)
    torch.testing.assert_close(fused.weights, plain.weights, rtol=0, atol=1e-12)
    for a, b in zip(grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_cross_attention_inputs_keep_separate_projections() -> None:
    torch.manual_seed(0)
    m = AttentionHeads(8, 2, key_dim=6)  # keys of another width: no fusing possible
    out = m(torch.randn(2, 3, 8), torch.randn(2, 4, 6))
    assert out.context.shape == (2, 3, 8)
