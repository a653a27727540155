"""Multi-dimensional attention (Shen et al. 2018, DiSAN, eq. 7) against a float64 loop
reference: f(x_j, q) = Wᵀ ELU(W⁽¹⁾x_j + W⁽²⁾q + b⁽¹⁾) + b, a softmax over the keys for every
feature, c = Σ_j P_j ⊙ v_j; weights (B, Tq, Tk, D). Plus gradcheck with a mask."""

import math

import numpy as np
import pytest
import torch
from _reference import np64
from torch.autograd import gradcheck

import attnkit
from attnkit import MultiDimensionalAttention, Sparsemax

pytestmark = pytest.mark.usefixtures("one_thread")


def _elu(x: float) -> float:
    return x if x > 0 else math.exp(x) - 1


def _reference(m: MultiDimensionalAttention, q, k, v, allowed):
    qn, kn, vn = np64(q), np64(k), np64(v)
    w1, w2, b1 = np64(m.w_keys), np64(m.w_query), np64(m.bias)  # W⁽¹⁾ on x_j, W⁽²⁾ on q
    w, b = np64(m.w_out), np64(m.b_out)
    bs, tq, _ = qn.shape
    tk, dv = kn.shape[1], vn.shape[2]
    ok = np.broadcast_to(allowed, (bs, tq, tk))
    weights = np.zeros((bs, tq, tk, dv))
    ctx = np.zeros((bs, tq, dv))
    for i in range(bs):
        for t in range(tq):
            f = np.zeros((tk, dv))
            for j in range(tk):
                pre = w1 @ kn[i, j] + w2 @ qn[i, t] + b1
                f[j] = w @ np.array([_elu(x) for x in pre]) + b
            for d in range(dv):
                keys = [j for j in range(tk) if ok[i, t, j]]
                if not keys:
                    continue
                top = max(f[j, d] for j in keys)
                den = sum(math.exp(f[j, d] - top) for j in keys)
                for j in keys:
                    weights[i, t, j, d] = math.exp(f[j, d] - top) / den
                ctx[i, t, d] = sum(weights[i, t, j, d] * vn[i, j, d] for j in range(tk))
    return ctx, weights


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    m = MultiDimensionalAttention(4, key_dim=5, value_dim=3, hidden=6).double()
    torch.nn.init.normal_(m.bias)
    torch.nn.init.normal_(m.b_out)
    q = torch.randn(2, 3, 4, dtype=torch.float64)
    k = torch.randn(2, 6, 5, dtype=torch.float64)
    v = torch.randn(2, 6, 3, dtype=torch.float64)
    return m, q, k, v


@pytest.mark.parametrize("masked", [False, True])
def test_multidim_matches_reference(masked: bool) -> None:
    m, q, k, v = _setup()
    mask = attnkit.padding_mask(torch.tensor([6, 4])) if masked else None
    out = m(q, k, v, mask=mask)
    allowed = np.ones((1, 1, 6), bool) if mask is None else mask.numpy()
    ctx, w = _reference(m, q, k, v, allowed)
    assert out.weights.shape == (2, 3, 6, 3)
    np.testing.assert_allclose(out.weights.detach().numpy(), w, atol=1e-12)
    np.testing.assert_allclose(out.context.detach().numpy(), ctx, atol=1e-12)
    # per-feature weights sum to one over the allowed keys
    torch.testing.assert_close(out.weights.sum(dim=-2), torch.ones(2, 3, 3, dtype=torch.float64))


def test_multidim_fully_masked_row_and_other_normaliser() -> None:
    m, q, k, v = _setup()
    mask = torch.ones(2, 3, 6, dtype=torch.bool)
    mask[0, 1] = False
    q.requires_grad_(True)
    out = m(q, k, v, mask=mask)
    assert (out.weights[0, 1] == 0).all() and (out.context[0, 1] == 0).all()
    out.context.sum().backward()
    assert torch.isfinite(q.grad).all()
    sparse = MultiDimensionalAttention(4, 5, 3, 6, normaliser=Sparsemax()).double()
    w = sparse(q, k, v).weights
    torch.testing.assert_close(w.sum(dim=-2), torch.ones(2, 3, 3, dtype=torch.float64))


def test_multidim_gradcheck_with_mask() -> None:
    m, q, k, v = _setup(1)
    q, k, v = (x[:, :2, :].clone() if x is q else x[:, :4].clone() for x in (q, k, v))
    for x in (q, k, v):
        x.requires_grad_(True)
    mask = attnkit.padding_mask(torch.tensor([4, 2]))
    params = tuple(m.parameters())

    def f(q, k, v, *ps):
        return m(q, k, v, mask=mask).context

    assert gradcheck(f, (q, k, v, *params), eps=1e-6, atol=1e-6)
