"""Variational attention's estimators (Deng et al. 2018), in float64 against enumeration and
closed forms: the ELBO bounds the exact log-likelihood and meets it at the exact posterior,
the KL is that of two categoricals, and the sampled estimator's mean gradient is the
enumerated one."""

import math

import pytest
import torch
from torch.distributions import Categorical, kl_divergence

from attnkit.mechanisms.variational import (
    categorical_kl,
    enumerated_elbo,
    log_marginal,
    log_normalise,
    masked_log_softmax,
    posterior_log,
    sample_latent,
    sampled_elbo,
)

F64 = torch.float64


def random_case(seed: int, shape=(3, 4), k: int = 6):
    """q, p log-probabilities, log p(y | z) and a mask with >= 1 allowed position per row."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(*shape, k, generator=g) < 0.7
    mask[..., 0] = True
    q_log = masked_log_softmax(torch.randn(*shape, k, generator=g, dtype=F64) * 2, mask)
    p_log = masked_log_softmax(torch.randn(*shape, k, generator=g, dtype=F64) * 2, mask)
    log_lik = -torch.rand(*shape, k, generator=g, dtype=F64) * 5  # log p(y | z) <= 0
    return q_log, p_log, log_lik, mask


@pytest.mark.parametrize("seed", range(5))
def test_elbo_is_below_the_exact_log_likelihood(seed: int) -> None:
    q_log, p_log, log_lik, mask = random_case(seed)
    exact = torch.log(
        (torch.where(mask, p_log.exp(), 0) * log_lik.exp()).sum(-1)
    )  # log Σ_z p(z) p(y|z), summed by hand
    torch.testing.assert_close(log_marginal(p_log, log_lik, mask), exact)
    elbo = enumerated_elbo(q_log, p_log, log_lik, mask)
    assert bool((elbo.elbo <= exact + 1e-12).all())
    assert bool((elbo.kl >= -1e-12).all())
    torch.testing.assert_close(elbo.elbo, elbo.reconstruction - elbo.kl)
    # the gap is KL(q ‖ posterior)
    post = posterior_log(p_log, log_lik, mask)
    torch.testing.assert_close(exact - elbo.elbo, categorical_kl(q_log, post, mask))


@pytest.mark.parametrize("seed", range(5))
def test_elbo_equals_the_log_likelihood_at_the_exact_posterior(seed: int) -> None:
    _, p_log, log_lik, mask = random_case(seed)
    post = posterior_log(p_log, log_lik, mask)
    assert torch.allclose(torch.where(mask, post.exp(), 0).sum(-1), torch.ones((), dtype=F64))
    elbo = enumerated_elbo(post, p_log, log_lik, mask).elbo
    exact = log_marginal(p_log, log_lik, mask)
    assert float((elbo - exact).abs().max()) < 1e-6


def test_kl_matches_the_closed_form() -> None:
    # KL([.5, .5] ‖ [.25, .75]) = .5 ln 2 + .5 ln(2/3), by hand
    q = torch.tensor([0.5, 0.5], dtype=F64).log()
    p = torch.tensor([0.25, 0.75], dtype=F64).log()
    full = torch.ones(2, dtype=torch.bool)
    want = 0.5 * math.log(2) + 0.5 * math.log(2 / 3)
    assert float(categorical_kl(q, p, full)) == pytest.approx(want, abs=1e-15)
    # random full-support rows against torch.distributions
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 7, generator=g, dtype=F64), torch.randn(5, 7, generator=g, dtype=F64)
    mask = torch.ones(5, 7, dtype=torch.bool)
    ours = categorical_kl(a.log_softmax(-1), b.log_softmax(-1), mask)
    theirs = kl_divergence(Categorical(logits=a), Categorical(logits=b))
    torch.testing.assert_close(ours, theirs)
    # a mask restricts both to the allowed positions: the KL of the restricted categoricals
    mask[:, 4:] = False
    ours = categorical_kl(masked_log_softmax(a, mask), masked_log_softmax(b, mask), mask)
    theirs = kl_divergence(Categorical(logits=a[:, :4]), Categorical(logits=b[:, :4]))
    torch.testing.assert_close(ours, theirs)


def test_log_normalise_renormalises_unnormalised_weights() -> None:
    w = torch.tensor([[0.1, 0.3, 0.0, 0.4]], dtype=F64)  # sums to 0.8 (local-p style)
    mask = torch.tensor([[True, True, True, False]])
    got = log_normalise(w, mask)
    assert got[0, 3] == 0  # off the mask: 0, never -inf
    torch.testing.assert_close(got[0, :2].exp(), torch.tensor([0.25, 0.75], dtype=F64))
    assert float(got[0, 2]) < -60  # a zero weight is a (finite) impossible position


def test_samples_follow_q_and_stay_on_the_mask() -> None:
    torch.manual_seed(0)
    mask = torch.tensor([True, True, False, True])
    q_log = masked_log_softmax(torch.tensor([0.0, 1.0, 5.0, -1.0], dtype=F64), mask)
    n = 20_000
    idx = sample_latent(q_log.expand(n, 4), mask.expand(n, 4))
    freq = torch.bincount(idx, minlength=4).double() / n
    q = torch.where(mask, q_log.exp(), 0)
    assert freq[2] == 0
    assert bool(((freq - q).abs() <= 4 * (q * (1 - q) / n).sqrt() + 1e-12).all()), freq


def _problem(dtype=F64):
    """Parameters of q, p and p(y | z): the ELBO of one step as a function of them."""
    g = torch.Generator().manual_seed(3)
    k = 5
    mask = torch.tensor([True, True, True, False, True])
    q_par = torch.randn(k, generator=g, dtype=dtype).requires_grad_()
    p_par = torch.randn(k, generator=g, dtype=dtype).requires_grad_()
    w = torch.randn(k, generator=g, dtype=dtype).requires_grad_()
    return mask, q_par, p_par, w


def _log_lik(w: torch.Tensor) -> torch.Tensor:
    return -((w - 0.5) ** 2)  # log p(y | z = k), differentiable in w


def test_sampled_gradient_converges_to_the_enumerated_one() -> None:
    mask, q_par, p_par, w = _problem()
    params = (q_par, p_par, w)
    q_log, p_log = masked_log_softmax(q_par, mask), masked_log_softmax(p_par, mask)
    exact = torch.autograd.grad(enumerated_elbo(q_log, p_log, _log_lik(w), mask).elbo, params)
    exact_flat = torch.cat([g[mask] for g in exact])
    torch.manual_seed(0)
    n, chunks = 200_000, 20
    for baseline in (0.0, -1.0):  # any constant baseline keeps it unbiased
        grads = []
        for _ in range(chunks):
            q_log, p_log = masked_log_softmax(q_par, mask), masked_log_softmax(p_par, mask)
            qn, pn, mn = q_log.expand(n // chunks, -1), p_log.expand(n // chunks, -1), mask
            z = sample_latent(qn, mn.expand_as(qn))  # (n,)
            ll = _log_lik(w)[z]  # (n,)
            value = sampled_elbo(qn, pn, mn.expand_as(qn), z, ll, baseline).mean()
            grads.append(torch.cat([g[mask] for g in torch.autograd.grad(value, params)]))
        stack = torch.stack(grads)  # (chunks, P)
        mean, se = stack.mean(0), stack.std(0) / math.sqrt(chunks)
        assert bool(((mean - exact_flat).abs() <= 5 * se + 1e-4).all()), (mean, exact_flat, se)


def test_sampled_value_is_the_one_sample_elbo() -> None:
    _, p_log, log_lik, mask = random_case(1, shape=(4,))
    q_log = random_case(2, shape=(4,))[0]
    mask = mask & random_case(2, shape=(4,))[3]
    q_log, p_log = masked_log_softmax(q_log, mask), masked_log_softmax(p_log, mask)
    torch.manual_seed(0)
    z = sample_latent(q_log, mask)
    ll = log_lik.gather(-1, z[:, None])[:, 0]
    got = sampled_elbo(q_log, p_log, mask, z, ll, baseline=3.0)
    torch.testing.assert_close(got, ll - categorical_kl(q_log, p_log, mask))
