"""Variational attention: the alignment as a latent variable, trained on the ELBO.

Deng, Kim, Chiu, Guo & Rush 2018, "Latent Alignment and Variational Attention" (§3-4). At
target step t the alignment z ∈ {1..K} (a source position) is a categorical latent variable
whose prior is the attention, p(z | x, y<t) = α_t; given z the model predicts
p(y_t | x, y<t, z) from the one value v_z. An inference network q(z | x, y), which also sees
the target, gives the variational posterior. Per step:

    log p(y_t) = log Σ_z p(z) p(y_t | z)                       exact marginal (enumeration)
    ELBO_t = E_q[log p(y_t | z)] − KL(q ‖ p)                   (Deng 2018, eq. 3)
           = log p(y_t) − KL(q ‖ p(z | y_t))  ≤  log p(y_t)    equal iff q = the posterior

Two estimators of ∇ELBO (Deng 2018, §4):
    enumerate   Σ_z q(z) log p(y_t | z) exactly: K readouts of the output layer
    sample      z̃ ~ q:  ∇log p(y_t | z̃) + (log p(y_t | z̃) − b) ∇log q(z̃) − ∇KL(q ‖ p)
                (REINFORCE with a baseline b for q's parameters; KL in closed form)

Everything here is a pure function of log-probabilities over the K positions with a mask
(True = a position z may take; the log-probabilities of other positions are ignored, never
read as −inf, so no NaN reaches a gradient). Legend: ``...`` leading dims (batch, steps),
K the latent's support (source positions).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

_TINY = 1e-30


def log_normalise(weights: Tensor, mask: Tensor) -> Tensor:
    """log(w_k / Σ_j w_j) over the allowed k: the prior p(z) from attention weights that need
    not sum to one (local-p). weights (..., K) >= 0, mask (..., K) -> (..., K), 0 off-mask."""
    w = torch.where(mask, weights, torch.zeros_like(weights))  # (..., K)
    total = w.sum(-1, keepdim=True).clamp_min(_TINY)  # (..., 1)
    return torch.where(mask, (w.clamp_min(_TINY) / total).log(), torch.zeros_like(w))


def masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """log softmax over the allowed positions; 0 off-mask. logits, mask (..., K)."""
    filled = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)  # (..., K)
    return torch.where(mask, torch.log_softmax(filled, -1), torch.zeros_like(logits))


def categorical_kl(q_log: Tensor, p_log: Tensor, mask: Tensor) -> Tensor:
    """KL(q ‖ p) = Σ_k q_k (log q_k − log p_k) over the allowed k. (..., K) -> (...)."""
    q = torch.where(mask, q_log.exp(), torch.zeros_like(q_log))  # (..., K)
    return (q * torch.where(mask, q_log - p_log, torch.zeros_like(q_log))).sum(-1)


def expected_log_lik(q_log: Tensor, log_lik: Tensor, mask: Tensor) -> Tensor:
    """E_q[log p(y | z)] = Σ_k q_k log p(y | z = k), enumerated. (..., K) -> (...)."""
    q = torch.where(mask, q_log.exp(), torch.zeros_like(q_log))  # (..., K)
    return (q * torch.where(mask, log_lik, torch.zeros_like(log_lik))).sum(-1)


def log_marginal(p_log: Tensor, log_lik: Tensor, mask: Tensor) -> Tensor:
    """log p(y) = log Σ_k p(z = k) p(y | z = k), exactly. (..., K) -> (...)."""
    joint = (p_log + log_lik).masked_fill(~mask, -torch.inf)  # (..., K)
    return torch.logsumexp(joint, -1)


def posterior_log(p_log: Tensor, log_lik: Tensor, mask: Tensor) -> Tensor:
    """log p(z | y) = log p(z) + log p(y | z) − log p(y): the exact posterior that the
    inference network approximates. (..., K) -> (..., K), 0 off-mask."""
    post = p_log + log_lik - log_marginal(p_log, log_lik, mask)[..., None]  # (..., K)
    return torch.where(mask, post, torch.zeros_like(post))


@dataclass
class Elbo:
    """The ELBO of each step and its two terms, (...) each."""

    elbo: Tensor
    reconstruction: Tensor  # E_q[log p(y | z)]
    kl: Tensor  # KL(q ‖ p)


def enumerated_elbo(q_log: Tensor, p_log: Tensor, log_lik: Tensor, mask: Tensor) -> Elbo:
    """ELBO = E_q[log p(y | z)] − KL(q ‖ p), both terms exact (Deng 2018, eq. 3, the
    "enumerate" estimator). q_log, p_log, log_lik (..., K), mask (..., K) -> (...)."""
    rec = expected_log_lik(q_log, log_lik, mask)
    kl = categorical_kl(q_log, p_log, mask)
    return Elbo(rec - kl, rec, kl)


def sample_latent(q_log: Tensor, mask: Tensor) -> Tensor:
    """z̃ ~ q over the allowed positions. (..., K) -> index (...) long."""
    probs = torch.where(mask, q_log.exp(), torch.zeros_like(q_log)).detach()  # (..., K)
    flat = probs.reshape(-1, probs.shape[-1])  # (N, K)
    return torch.multinomial(flat, 1).view(probs.shape[:-1])


def sampled_elbo(
    q_log: Tensor,
    p_log: Tensor,
    mask: Tensor,
    index: Tensor,
    log_lik_sample: Tensor,
    baseline: Tensor | float = 0.0,
) -> Tensor:
    """A surrogate whose value is the one-sample ELBO estimate log p(y | z̃) − KL(q ‖ p) and
    whose gradient is the score-function estimate of ∇ELBO (Deng 2018, §4; Williams 1992):

        ∇log p(y | z̃) + (log p(y | z̃) − b) ∇log q(z̃) − ∇KL(q ‖ p)

    q_log, p_log, mask (..., K); index (...) the sample z̃ ~ q (``sample_latent``);
    log_lik_sample (...) = log p(y | z̃), differentiable in the model; baseline b (scalar or
    (...)), a constant. Maximise it (minimise its negative)."""
    log_q = q_log.gather(-1, index[..., None])[..., 0]  # (...) log q(z̃)
    advantage = (log_lik_sample - baseline).detach()  # (...)
    score = advantage * (log_q - log_q.detach())  # value 0, gradient (R − b) ∇log q
    return log_lik_sample + score - categorical_kl(q_log, p_log, mask)


__all__ = [
    "Elbo",
    "categorical_kl",
    "enumerated_elbo",
    "expected_log_lik",
    "log_marginal",
    "log_normalise",
    "masked_log_softmax",
    "posterior_log",
    "sample_latent",
    "sampled_elbo",
]
