"""Hard attention: attend to one key, chosen at random from the attention distribution.

Stochastic hard attention (Xu et al. 2015, "Show, Attend and Tell", §4.1): the weights
α = normaliser(scores) are the parameters of a categorical variable

    z ~ Categorical(α_1..α_Tk),   c = v_z

and the model is trained with the score-function (REINFORCE, Williams 1992) estimator of the
gradient of E_z[log p(y | z)], its variance reduced by a moving-average baseline b and an
entropy bonus (Xu 2015, eq. 12):

    ∂L/∂W ≈ 1/N Σ_n [ ∂log p(y|z̃_n)/∂W + λ_r (log p(y|z̃_n) − b) ∂log p(z̃_n)/∂W
                       + λ_e ∂H[z̃_n]/∂W ]

The pieces slot into ``attend`` as its stages: ``SampleReduce`` is a reduction (weights and
values -> a sampled context, with the sample's log-probability and entropy in ``extras``);
``GumbelSoftmax`` is a normaliser (Jang et al. 2017; Maddison et al. 2017) whose one-hot
sample is trained by the straight-through estimator, no REINFORCE needed.
``reinforce_loss`` and ``MovingAverageBaseline`` build the surrogate loss.

Legend: Tq queries, Tk keys, Dv value width; ``...`` leading (batch, head) dims.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .._checks import check_mask
from ..core import Reduced
from ..stages.normalisers import compute_dtype, masked_softmax


def _categorical_entropy(weights: Tensor) -> Tensor:
    """H(α) = −Σ_j α_j log α_j over the last dim, 0·log 0 = 0 (gradient-safe)."""
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))
    return -(weights * safe.log()).sum(-1)


@dataclass(frozen=True)
class SampleReduce:
    """Hard attention as a reduction: z ~ Categorical(a) for every query, c = v_z.

    weights (..., Tq, Tk) summing to one over allowed keys (a fully masked row sums to zero),
    values (..., Tk, Dv) -> context (..., Tq, Dv); extras:
        index     (..., Tq) long: the chosen key z (0 for a fully masked row),
        sample    (..., Tq, Tk): one_hot(z), zero for a fully masked row,
        log_prob  (..., Tq): log α_z, differentiable in α (0 for a fully masked row),
        entropy   (..., Tq): H(α), differentiable.
    ``greedy=True`` takes z = argmax α instead (deterministic evaluation, Xu 2015 §5.2).
    The context carries no gradient to α: train the weights through ``log_prob``
    (``reinforce_loss``), or use ``GumbelSoftmax`` for a straight-through gradient.
    """

    greedy: bool = False
    name: str = "sample"

    def __call__(self, weights: Tensor, values: Tensor) -> Reduced:
        if weights.shape[-1] != values.shape[-2]:
            raise ValueError(
                f"weights over {weights.shape[-1]} keys but {values.shape[-2]} values; "
                "SampleReduce takes weights (..., Tq, Tk) and values (..., Tk, Dv)"
            )
        tk = weights.shape[-1]
        row_ok = weights.detach().sum(-1) > 0  # (..., Tq) False on fully masked rows
        probs = torch.where(row_ok[..., None], weights.detach(), 1.0 / tk)  # (..., Tq, Tk)
        if self.greedy:
            index = probs.argmax(-1)  # (..., Tq)
        else:
            flat = probs.reshape(-1, tk).clamp_min(0)  # (N, Tk)
            index = torch.multinomial(flat, 1).view(probs.shape[:-1])  # (..., Tq)
        sample = F.one_hot(index, tk).to(weights.dtype) * row_ok[..., None]  # (..., Tq, Tk)
        context = sample @ values.to(weights.dtype)  # (..., Tq, Dv)
        chosen = weights.gather(-1, index[..., None])[..., 0]  # (..., Tq) α_z
        log_prob = torch.where(row_ok, chosen, torch.ones_like(chosen)).log()  # (..., Tq)
        extras = {
            "index": index,
            "sample": sample,
            "log_prob": log_prob,
            "entropy": _categorical_entropy(weights),
        }
        return Reduced(context, extras)


@dataclass(frozen=True)
class GumbelSoftmax:
    """Gumbel-softmax normaliser (Jang et al. 2017, eq. 1; Maddison et al. 2017):

        y_j = exp((e_j + g_j) / τ) / Σ_k exp((e_k + g_k) / τ),   g_j = −log(−log u_j), u ~ U(0,1)

    over the allowed keys. ``hard=True`` (default): the forward value is one_hot(argmax y), a
    sample from softmax(e) (the Gumbel-max trick), and the gradient is that of y
    (straight-through). ``hard=False``: the relaxed sample y itself. In ``eval()`` models
    pass ``sample=False`` for the noise-free argmax (hard) or softmax(e/τ) (soft).
    scores (..., Tq, Tk), mask -> weights (..., Tq, Tk); a fully masked row is all zeros.
    """

    temperature: float = 1.0
    hard: bool = True
    sample: bool = True
    name: str = "gumbel"

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")

    def __call__(self, scores: Tensor, mask: Tensor | None = None) -> Tensor:
        check_mask(mask, tuple(scores.shape), scores.device)
        s = scores.to(compute_dtype(scores.dtype))  # (..., Tq, Tk)
        if self.sample:
            gumbel = -torch.empty_like(s).exponential_().log()  # −log(−log u) = −log(Exp(1))
            s = s + gumbel
        soft = masked_softmax(s, mask, self.temperature)  # (..., Tq, Tk)
        if not self.hard:
            return soft
        row_ok = soft.detach().sum(-1, keepdim=True) > 0  # (..., Tq, 1)
        one_hot = F.one_hot(soft.detach().argmax(-1), s.shape[-1]).to(soft.dtype) * row_ok
        return soft + (one_hot - soft).detach()  # forward one_hot, gradient of soft


def reinforce_loss(
    log_prob: Tensor,
    reward: Tensor,
    baseline: Tensor | float = 0.0,
    *,
    entropy: Tensor | None = None,
    entropy_weight: float = 0.0,
) -> Tensor:
    """Surrogate loss whose gradient is the REINFORCE estimate (Williams 1992; Xu 2015, eq. 12):

        L = −mean_n[(R_n − b) Σ_t log p(z_nt)] − λ_e mean_n[Σ_t H_nt]

    log_prob (N, ...) of the samples (summed over every dim but the first), reward (N,) —
    e.g. log p(y | z̃) or −loss, treated as a constant — baseline b (scalar or (N,), e.g. a
    ``MovingAverageBaseline``), entropy like log_prob. Minimise it together with the task
    loss."""
    if reward.dim() != 1 or reward.shape[0] != log_prob.shape[0]:
        raise ValueError(
            f"reward must be (N,) with N = log_prob.shape[0] = {log_prob.shape[0]}, "
            f"got {tuple(reward.shape)}; reduce it to one number per sample"
        )
    advantage = (reward - baseline).detach()  # (N,)
    loss = -(advantage * log_prob.reshape(log_prob.shape[0], -1).sum(-1)).mean()
    if entropy is not None and entropy_weight:
        loss = loss - entropy_weight * entropy.reshape(entropy.shape[0], -1).sum(-1).mean()
    return loss


@dataclass
class MovingAverageBaseline:
    """b ← β b + (1 − β) mean(R): the variance-reducing baseline of Xu 2015 (§4.1, after
    Weaver & Tao 2001). ``update(reward)`` returns the baseline to use for this batch (the
    value before the update; the batch mean on the first call)."""

    decay: float = 0.9
    value: float | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.decay < 1:
            raise ValueError(f"decay={self.decay}; it must be in [0, 1)")

    def update(self, reward: Tensor) -> float:
        """The baseline for this batch's ``reward`` (any shape): the value before the update,
        or the batch mean on the first call; then b ← β b + (1 − β) mean(reward)."""
        mean = float(reward.detach().float().mean())
        used = mean if self.value is None else self.value
        self.value = (
            mean if self.value is None else self.decay * self.value + (1 - self.decay) * mean
        )
        return used


__all__ = ["GumbelSoftmax", "MovingAverageBaseline", "SampleReduce", "reinforce_loss"]
