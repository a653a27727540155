"""Multi-dimensional attention (Shen et al. 2018, DiSAN) as a registered output kind
(``attnkit.build(..., output="multi-dimensional")``, ``attnkit info``), feature-wise
source2token pooling and the directional self-attention encoder, each against a float64 loop
reference written from the paper's equations."""

import math

import numpy as np
import pytest
import torch
from _reference import np64

import attnkit
from attnkit.cli import main
from attnkit.mechanisms.disan import DirectionalSelfAttention, DiSAEncoder, direction_mask
from attnkit.mechanisms.multidim import FeaturewisePool, MultiDimensionalAttention
from attnkit.registry import canonical, names

pytestmark = pytest.mark.usefixtures("one_thread")


def _elu(x):
    return np.where(x > 0, x, np.exp(np.minimum(x, 0)) - 1)


def _softmax_cols(f, ok):
    """Softmax over rows (tokens) of f (T, D), feature by feature, over allowed rows only."""
    out = np.zeros_like(f)
    idx = [j for j in range(len(f)) if ok[j]]
    for d in range(f.shape[1]):
        if not idx:
            continue
        top = max(f[j, d] for j in idx)
        den = sum(math.exp(f[j, d] - top) for j in idx)
        for j in idx:
            out[j, d] = math.exp(f[j, d] - top) / den
    return out


def test_build_gives_multidimensional_attention_and_info_lists_it(capsys):
    m = attnkit.build(dim=6, key_dim=4, value_dim=3, hidden=5, output="multi-dimensional")
    assert isinstance(m, MultiDimensionalAttention)
    q, k, v = torch.randn(2, 3, 6), torch.randn(2, 7, 4), torch.randn(2, 7, 3)
    mask = attnkit.padding_mask(torch.tensor([7, 4]))
    out = m(q, k, v, mask=mask)
    assert out.weights.shape == (2, 3, 7, 3)
    # weights sum to one per feature over the allowed keys, zero on padded keys
    torch.testing.assert_close(out.weights.sum(-2), torch.ones(2, 3, 3))
    assert (out.weights[1, :, 4:] == 0).all()
    assert canonical("output", "multidim") == "multi-dimensional"
    assert names("output") == ("multi-dimensional", "scalar")
    assert isinstance(attnkit.build("dot", dim=4, output="scalar"), attnkit.Attention)
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "outputs:" in text and "multi-dimensional" in text and "Shen et al. 2018" in text


@pytest.mark.parametrize(
    "kwargs", [{"heads": 2}, {"score": "dot"}, {"align": "causal"}, {"reduce": "hard"}]
)
def test_build_refuses_what_multidimensional_attention_does_not_have(kwargs):
    with pytest.raises(ValueError, match="output='multi-dimensional' has its own"):
        attnkit.build(dim=4, output="multi-dimensional", **kwargs)
    with pytest.raises(ValueError, match="unknown output 'vectorial'"):
        attnkit.build(dim=4, output="vectorial")


def test_featurewise_pool_matches_the_papers_equations():
    torch.manual_seed(0)
    pool = FeaturewisePool(4, 6).double()
    torch.nn.init.normal_(pool.b1)
    torch.nn.init.normal_(pool.b)
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    mask = attnkit.padding_mask(torch.tensor([5, 2, 1]))[:, 0]  # (B, T)
    out = pool(x, mask)
    w1, b1, w, b = (np64(p) for p in (pool.w1, pool.b1, pool.w, pool.b))
    for i in range(3):
        xi = np64(x[i])
        f = np.stack([w @ _elu(w1 @ xi[t] + b1) + b for t in range(5)])  # (T, D)
        p = _softmax_cols(f, mask[i].numpy())
        np.testing.assert_allclose(out.weights[i].detach().numpy(), p, atol=1e-12)
        np.testing.assert_allclose(out.vector[i].detach().numpy(), (p * xi).sum(0), atol=1e-12)
    torch.testing.assert_close(out.weights.sum(1), torch.ones(3, 4, dtype=torch.float64))


def _disa_reference(m: DirectionalSelfAttention, x, ok):
    """DiSAN eq. 14-19 for one sentence x (T, Din) with real tokens ok (T,)."""
    wh, bh = np64(m.inp.weight), np64(m.inp.bias)
    w1, w2, b1 = np64(m.w_keys), np64(m.w_query), np64(m.bias)
    wf1, wf2, bf = np64(m.gate_s.weight), np64(m.gate_h.weight), np64(m.gate_h.bias)
    n = len(x)
    h = np.stack([_elu(wh @ x[t] + bh) for t in range(n)])
    u = np.zeros_like(h)
    for i in range(n):  # query i
        allowed = [(j < i if m.direction == "forward" else j > i) and ok[j] and ok[i]
                   for j in range(n)]  # fmt: skip
        f = np.stack([m.c * np.tanh((w1 @ h[j] + w2 @ h[i] + b1) / m.c) for j in range(n)])
        p = _softmax_cols(f, allowed)
        s = (p * h).sum(0)
        gate = 1 / (1 + np.exp(-(wf1 @ s + wf2 @ h[i] + bf)))
        u[i] = gate * h[i] + (1 - gate) * s
    return u


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_directional_self_attention_matches_the_papers_equations(direction):
    torch.manual_seed(1)
    m = DirectionalSelfAttention(3, 4, direction).double()
    torch.nn.init.normal_(m.bias)
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    mask = attnkit.padding_mask(torch.tensor([5, 3]))[:, 0]  # (B, T)
    u, weights = m(x, mask)
    for i in range(2):
        want = _disa_reference(m, np64(x[i]), mask[i].numpy())
        real = mask[i].numpy()
        np.testing.assert_allclose(u[i].detach().numpy()[real], want[real], atol=1e-12)
    # the first (forward) / last (backward) real token has no key: its weights are all zero
    first = 0 if direction == "forward" else 4
    assert (weights[0, first] == 0).all()
    allowed = direction_mask(5, direction)
    assert (weights[0][~allowed] == 0).all()  # never a key on the wrong side or itself


def test_disan_encoder_concatenates_both_directions_and_zeroes_padding():
    torch.manual_seed(2)
    enc = DiSAEncoder(3, 4)
    x = torch.randn(2, 5, 3)
    mask = attnkit.padding_mask(torch.tensor([5, 2]))[:, 0]  # (B, T)
    u = enc(x, mask)
    assert u.shape == (2, 5, 8)
    torch.testing.assert_close(u[:, :, :4], enc.fw(x, mask)[0] * mask[..., None])
    torch.testing.assert_close(u[:, :, 4:], enc.bw(x, mask)[0] * mask[..., None])
    assert (u[1, 2:] == 0).all()
    with pytest.raises(ValueError, match="direction 'sideways'"):
        direction_mask(3, "sideways")
    with pytest.raises(ValueError, match="c=0"):
        DirectionalSelfAttention(3, 4, "forward", c=0)
