"""Stacked attention (Yang, He, Gao, Deng & Smola 2016, §3.3) against a float64 reference
written from the paper's equations in its column layout (regions v_I ∈ R^{d×m}), one example
at a time, on its real regions only; masked regions get exactly zero weight and change
nothing; gradcheck in float64 with a mask; bad inputs are one clear line."""

import pytest
import torch

from attnkit.mechanisms.stacked import StackedAttention, stacked_attention


def san_reference(u0, regions, layers, b_p=0.0):
    """The paper's K layers on one example, in float64, regions as columns v_I (d, m):

        h_A = tanh(W_{I,A} v_I ⊕ (W_{Q,A} u + b_A))     (k, m), ⊕ adds the vector to each column
        p_I = softmax(W_P h_A + b_P)                     (m,)
        ṽ_I = Σ_i p_i v_i,   u ← ṽ_I + u

    u0 (d,), regions (d, m), layers [(W_IA (k, d), W_QA (k, d), b_A (k,), W_P (1, k))]
    -> (u^K (d,), [p^1 … p^K] each (m,))."""
    u, ps = u0.double(), []
    v_i = regions.double()
    for w_ia, w_qa, b_a, w_p in layers:
        h_a = torch.tanh(w_ia.double() @ v_i + (w_qa.double() @ u + b_a.double())[:, None])
        e = (w_p.double() @ h_a)[0] + b_p  # (m,)
        p = torch.exp(e - e.max())
        p = p / p.sum()
        u = v_i @ p + u  # (d,)
        ps.append(p)
    return u, ps


def _layers(module):
    return [(s.w_keys, s.w_query, s.bias, s.v[None, :]) for s in module.scores]


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_matches_the_papers_equations_on_the_real_regions(hops):
    torch.manual_seed(hops)
    san = StackedAttention(dim=6, hidden=5, hops=hops).double()
    for p in san.parameters():  # the bias b_A starts at zero: give it a value to check
        torch.nn.init.normal_(p)
    u, v = torch.randn(3, 6, dtype=torch.float64), torch.randn(3, 7, 6, dtype=torch.float64)
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3, [False, True] * 3 + [True]])
    got = san(u, v, mask)
    assert got.query.shape == (3, 6) and got.weights.shape == (3, hops, 7)
    for b in range(3):
        real = mask[b].nonzero()[:, 0]
        # b_P is a constant on every region's score: the softmax does not see it
        want_u, want_p = san_reference(u[b], v[b, real].T, _layers(san), b_p=0.7)
        torch.testing.assert_close(got.query[b], want_u, rtol=1e-12, atol=1e-12)
        for k in range(hops):
            torch.testing.assert_close(got.weights[b, k, real], want_p[k], rtol=1e-12, atol=1e-12)
            assert torch.all(got.weights[b, k, ~mask[b]] == 0)
    torch.testing.assert_close(got.weights.sum(-1), torch.ones(3, hops, dtype=torch.float64))


def test_masked_regions_change_nothing():
    torch.manual_seed(0)
    san = StackedAttention(dim=4, hidden=3, hops=2)
    u, v = torch.randn(2, 4), torch.randn(2, 5, 4)
    mask = torch.tensor([[True] * 3 + [False] * 2, [True] * 5])
    got = san(u, v, mask)
    noisy = v.clone()
    noisy[0, 3:] = 100.0  # a masked region's features must not reach u^K
    torch.testing.assert_close(san(u, noisy, mask).query, got.query)
    torch.testing.assert_close(san(u[:1], v[:1, :3]).query, got.query[:1])  # = cut away


def test_gradcheck_float64_with_a_mask():
    """Gradients with respect to the question vector, the regions and every hop's W_{Q,A},
    W_{I,A}, b_A and W_P."""
    torch.manual_seed(0)
    san = StackedAttention(dim=3, hidden=2, hops=2).double()
    names = [n for n, _ in san.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in san.parameters()]
    u = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, False, True], [True] * 4])

    def f(u, v, *ps):
        r = torch.func.functional_call(san, dict(zip(names, ps, strict=True)), (u, v, mask))
        return r.query, r.weights

    assert len(names) == 8  # two hops of four parameters
    assert torch.autograd.gradcheck(f, (u, v, *params))


def test_bad_inputs_are_one_clear_line():
    with pytest.raises(ValueError, match=r"hops=0; pass hops >= 1"):
        StackedAttention(4, 3, hops=0)
    san = StackedAttention(4, 3)
    with pytest.raises(ValueError, match=r"must be \(B, D\) and \(B, N, D\)"):
        san(torch.randn(2, 3), torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match="one score per hop"):
        stacked_attention(torch.randn(2, 4), torch.randn(2, 5, 4), [])
    with pytest.raises(TypeError, match="bool"):
        san(torch.randn(2, 4), torch.randn(2, 5, 4), torch.ones(2, 5))
