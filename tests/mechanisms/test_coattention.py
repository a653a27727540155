"""Co-attention (Lu et al. 2016, eq. 3-6) against float64 references written from the paper's
equations in its own column notation (Q ∈ R^{d×T}, V ∈ R^{d×N}), one example at a time on the
real positions only; padded positions get exactly zero weight in both directions and change
nothing; gradcheck in float64 with masks."""

import numpy as np
import pytest
import torch
from _reference import np64
from torch.autograd import gradcheck

from attnkit.mechanisms.coattention import (
    AlternatingCoAttention,
    ParallelCoAttention,
    alternating_coattention,
    parallel_coattention,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def _ref_parallel(m: ParallelCoAttention, Q: np.ndarray, V: np.ndarray):
    """Lu 2016 eq. 3-4 for one example: Q (d, T), V (d, N) -> (q̂, v̂, a^q, a^v)."""
    W_b, W_q, W_v = np64(m.w_b), np64(m.w_q), np64(m.w_v)
    w_hq, w_hv = np64(m.w_hq), np64(m.w_hv)
    C = np.tanh(Q.T @ W_b @ V)  # (T, N)
    H_v = np.tanh(W_v @ V + (W_q @ Q) @ C)  # (k, N)
    H_q = np.tanh(W_q @ Q + (W_v @ V) @ C.T)  # (k, T)
    a_v = _softmax(w_hv @ H_v)
    a_q = _softmax(w_hq @ H_q)
    return Q @ a_q, V @ a_v, a_q, a_v


def _ref_attend(X: np.ndarray, g: np.ndarray, W_x, W_g, w_hx):
    """Lu 2016 eq. 5-6: H = tanh(W_x X + (W_g g) 1ᵀ), a = softmax(w_hxᵀ H), x̂ = Σ a_i x_i."""
    H = np.tanh(W_x @ X + np.outer(W_g @ g, np.ones(X.shape[1])))
    a = _softmax(w_hx @ H)
    return X @ a, a


def _ref_alternating(m: AlternatingCoAttention, Q: np.ndarray, V: np.ndarray):
    w_x = [np64(p) for p in m.w_x]
    w_g = [np.zeros_like(w_x[0])] + [np64(p) for p in m.w_g]
    w_h = [np64(p) for p in m.w_h]
    s, _ = _ref_attend(Q, np.zeros(Q.shape[0]), w_x[0], w_g[0], w_h[0])
    v_hat, a_v = _ref_attend(V, s, w_x[1], w_g[1], w_h[1])
    q_hat, a_q = _ref_attend(Q, v_hat, w_x[2], w_g[2], w_h[2])
    return q_hat, v_hat, a_q, a_v


def _inputs(seed: int, b=3, t=5, n=6, d=4, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, t, d, generator=g, dtype=dtype)
    v = torch.randn(b, n, d, generator=g, dtype=dtype)
    q_len = torch.tensor([t, 2, 1][:b])
    v_len = torch.tensor([n - 1, n, 3][:b])
    q_mask = torch.arange(t)[None, :] < q_len[:, None]  # (B, T)
    v_mask = torch.arange(n)[None, :] < v_len[:, None]  # (B, N)
    return q, v, q_mask, v_mask


MODULES = [
    (ParallelCoAttention, _ref_parallel),
    (AlternatingCoAttention, _ref_alternating),
]


@pytest.mark.parametrize(("cls", "ref"), MODULES)
@pytest.mark.parametrize("seed", [0, 1])
def test_each_module_matches_its_float64_reference_on_the_real_positions(cls, ref, seed):
    torch.manual_seed(seed)
    m = cls(4, 7).double()
    q, v, q_mask, v_mask = _inputs(seed)
    r = m(q, v, q_mask, v_mask)
    for i in range(q.shape[0]):
        t, n = int(q_mask[i].sum()), int(v_mask[i].sum())
        Q, V = np64(q[i, :t]).T, np64(v[i, :n]).T  # (d, T), (d, N): the paper's layout
        q_hat, v_hat, a_q, a_v = ref(m, Q, V)
        np.testing.assert_allclose(np64(r.question_weights[i, :t]), a_q, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np64(r.image_weights[i, :n]), a_v, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np64(r.question[i]), q_hat, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np64(r.image[i]), v_hat, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("cls", "ref"), MODULES)
def test_without_masks_every_position_is_real(cls, ref):
    torch.manual_seed(2)
    m = cls(4, 5).double()
    q, v, _, _ = _inputs(3, b=2)
    r = m(q, v)
    Q, V = np64(q[1]).T, np64(v[1]).T
    q_hat, v_hat, a_q, a_v = ref(m, Q, V)
    np.testing.assert_allclose(np64(r.question_weights[1]), a_q, rtol=1e-10)
    np.testing.assert_allclose(np64(r.image[1]), v_hat, rtol=1e-10)


@pytest.mark.parametrize("cls", [ParallelCoAttention, AlternatingCoAttention])
def test_a_padded_position_gets_exactly_zero_weight_in_either_direction(cls):
    torch.manual_seed(0)
    m = cls(4, 6)
    q, v, q_mask, v_mask = _inputs(0, dtype=torch.float32)
    r = m(q, v, q_mask, v_mask)
    assert torch.all(r.question_weights[~q_mask] == 0)  # words -> padded words: exactly 0
    assert torch.all(r.image_weights[~v_mask] == 0)  # image -> padded positions: exactly 0
    assert torch.all(r.question_weights[q_mask] > 0) and torch.all(r.image_weights[v_mask] > 0)
    torch.testing.assert_close(r.question_weights.sum(-1), torch.ones(3))
    torch.testing.assert_close(r.image_weights.sum(-1), torch.ones(3))
    if r.affinity is not None:  # the affinity of a padded word or position is exactly 0
        assert torch.all(r.affinity[~q_mask] == 0)
        assert torch.all(r.affinity.transpose(1, 2)[~v_mask] == 0)
    # what sits in the padding changes nothing on the other side (nor on its own side)
    q2 = q.masked_fill(~q_mask[..., None], 1e3)
    v2 = v.masked_fill(~v_mask[..., None], -1e3)
    r2 = m(q2, v2, q_mask, v_mask)
    for a, b in ((r.question_weights, r2.question_weights), (r.image_weights, r2.image_weights),
                 (r.question, r2.question), (r.image, r2.image)):  # fmt: skip
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_the_affinity_couples_the_two_sides():
    """Parallel co-attention's image weights depend on the question (through C and W_q Q),
    alternating's on the question summary: neither is attention over one input alone."""
    torch.manual_seed(1)
    for cls in (ParallelCoAttention, AlternatingCoAttention):
        m = cls(4, 6).double()
        q, v, _, _ = _inputs(4)
        a = m(q, v).image_weights
        b = m(q.flip(0), v).image_weights
        assert not torch.allclose(a, b)


@pytest.mark.parametrize("form", ["parallel", "alternating"])
def test_gradcheck_float64_with_masks(form):
    torch.manual_seed(0)
    q, v, q_mask, v_mask = _inputs(5, b=2, t=3, n=4, d=3)
    k = 4
    if form == "parallel":
        params = [torch.randn(3, 3), torch.randn(k, 3), torch.randn(k, 3), torch.randn(k),
                  torch.randn(k)]  # fmt: skip
    else:
        params = [torch.randn(*s) for _ in range(3) for s in ((k, 3), (k, 3), (k,))]
    params = [p.double().requires_grad_() for p in params]
    q, v = q.requires_grad_(), v.requires_grad_()

    def f(q, v, *ps):
        if form == "parallel":
            r = parallel_coattention(q, v, *ps, q_mask=q_mask, v_mask=v_mask)
        else:
            steps = (tuple(ps[0:3]), tuple(ps[3:6]), tuple(ps[6:9]))
            r = alternating_coattention(q, v, steps, q_mask, v_mask)
        return r.question, r.image, r.question_weights, r.image_weights

    assert gradcheck(f, (q, v, *params), eps=1e-6, atol=1e-6)


def test_bad_shapes_and_masks_are_clear_errors():
    m = ParallelCoAttention(4, 4)
    q, v = torch.randn(2, 3, 4), torch.randn(3, 5, 4)
    with pytest.raises(ValueError, match="same batch size"):
        m(q, v)
    with pytest.raises(TypeError, match="bool"):
        m(q, torch.randn(2, 5, 4), q_mask=torch.ones(2, 3))
    with pytest.raises(ValueError, match="broadcast"):
        m(q, torch.randn(2, 5, 4), v_mask=torch.ones(2, 4, dtype=torch.bool))
