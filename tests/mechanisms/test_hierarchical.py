"""Hierarchical attention pooling (Yang et al. 2016, eq. 5-10) against a float64 loop reference
written from the paper: u_t = tanh(W h_t + b), α_t = exp(u_tᵀu_w) / Σ exp(u_tᵀu_w),
s = Σ α_t h_t; the mean and max baselines; and the two levels put together (one sentence per
document is word-level attention pooling)."""

import math

import numpy as np
import pytest
import torch
from _reference import np64

from attnkit.mechanisms.hierarchical import (
    AttentionPool,
    attention_pool,
    hierarchical_pool,
    max_pool,
    mean_pool,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _han_reference(h, ok, w, b, u):
    """One sentence (or one document): h (T, D), ok (T,) -> (s (D,), α (T,))."""
    scores = {t: float(np.tanh(w @ h[t] + b) @ u) for t in range(len(h)) if ok[t]}
    if not scores:
        return np.zeros(h.shape[1]), np.zeros(len(h))
    top = max(scores.values())
    den = sum(math.exp(v - top) for v in scores.values())
    alpha = np.array([math.exp(scores[t] - top) / den if t in scores else 0.0
                      for t in range(len(h))])  # fmt: skip
    return sum(alpha[t] * h[t] for t in range(len(h))), alpha


def _setup(seed=0, d=5, a=4):
    torch.manual_seed(seed)
    pool = AttentionPool(d, a).double()
    torch.nn.init.normal_(pool.b)
    h = torch.randn(3, 4, 6, d, dtype=torch.float64)  # (B, S, T, D)
    lengths = torch.tensor([[6, 2, 0, 0], [3, 6, 1, 5], [1, 0, 0, 0]])
    mask = torch.arange(6) < lengths[..., None]  # (B, S, T)
    return pool, h, mask


def test_attention_pool_matches_the_papers_equations():
    pool, h, mask = _setup()
    out = pool(h, mask)
    w, b, u = np64(pool.w), np64(pool.b), np64(pool.context)
    hn, ok = np64(h), mask.numpy()
    for i in range(3):
        for s in range(4):
            vec, alpha = _han_reference(hn[i, s], ok[i, s], w, b, u)
            np.testing.assert_allclose(out.vector[i, s].detach().numpy(), vec, atol=1e-12)
            np.testing.assert_allclose(out.weights[i, s].detach().numpy(), alpha, atol=1e-12)
    # weights sum to one over the words of a sentence, and zero for a sentence with none
    sums = out.weights.sum(-1)
    torch.testing.assert_close(sums, mask.any(-1).double())


def test_mean_and_max_pool_read_only_the_real_words():
    _, h, mask = _setup()
    hn, ok = np64(h), mask.numpy()
    mean, top = mean_pool(h, mask).vector.numpy(), max_pool(h, mask).vector.numpy()
    for i in range(3):
        for s in range(4):
            real = hn[i, s][ok[i, s]]
            want_mean = real.mean(0) if len(real) else np.zeros(5)
            want_max = real.max(0) if len(real) else np.zeros(5)
            np.testing.assert_allclose(mean[i, s], want_mean, atol=1e-12)
            np.testing.assert_allclose(top[i, s], want_max, atol=1e-12)
    assert mean_pool(h, mask).weights is None and max_pool(h, mask).weights is None


def test_both_levels_follow_the_paper():
    """s_i from word attention, h_i = encoder(s), v = sentence attention over h_i."""
    words, h, mask = _setup()
    sents = AttentionPool(5, 3).double()
    enc = torch.nn.Linear(5, 5).double()
    tree = hierarchical_pool(h, mask, words, lambda s, m: torch.tanh(enc(s)), sents)
    s_i = words(h, mask).vector  # (B, S, D)
    encoded = torch.tanh(enc(s_i))
    want = sents(encoded, mask.any(-1))
    torch.testing.assert_close(tree.sentences, s_i)
    torch.testing.assert_close(tree.document, want.vector)
    torch.testing.assert_close(tree.sentence_weights, want.weights)
    assert (tree.sentence_weights[2, 1:] == 0).all()  # padding sentences get no weight


def test_one_sentence_per_document_is_word_level_attention_pooling():
    words, h, mask = _setup()
    one, one_mask = h[:, :1], mask[:, :1]  # (B, 1, T, D): documents of one sentence
    tree = hierarchical_pool(one, one_mask, words, lambda s, m: s, AttentionPool(5).double())
    flat = attention_pool(one[:, 0], one_mask[:, 0], words.w, words.b, words.context)
    torch.testing.assert_close(tree.document, flat.vector)
    torch.testing.assert_close(tree.word_weights[:, 0], flat.weights)
    torch.testing.assert_close(tree.sentence_weights, torch.ones(3, 1, dtype=torch.float64))


def test_gradients_flow_to_both_context_vectors():
    words, h, mask = _setup()
    sents = AttentionPool(5).double()
    tree = hierarchical_pool(h, mask, words, lambda s, m: s, sents)
    tree.document.sum().backward()
    assert words.context.grad.abs().sum() > 0 and sents.context.grad.abs().sum() > 0
