"""How soft the captioner's attention over image patches is: the stages each softness picks,
the Gumbel temperature schedule, and the doubly stochastic penalty (Xu et al. 2015).

    soft      α = softmax(e), ẑ = Σ_i α_i a_i                      (Xu 2015, §4.2, eq. 13)
    mean      α = 1/L on every allowed patch: mean pooling, the no-attention baseline
    hard      z ~ Categorical(α) in training, ẑ = a_z, trained by REINFORCE (Xu 2015, §4.1),
              each image with probability hard_mix on the expected context Σ α a instead;
              at test z = argmax α ("argmax") or ẑ = Σ α a ("expectation", the soft context)
    gumbel    ẑ = Σ_i g_i a_i, g the straight-through one-hot Gumbel-softmax sample of α at
              temperature τ (Jang et al. 2017), τ annealed from tau_start to tau_end;
              at test as hard
    variational  z_t latent with prior α_t (Deng et al. 2018): the LSTM reads Σ α a as in
              soft, the output layer reads a_z; trained on the exact (enumerated) ELBO with
              q(z_t | x, y) from ``InferenceNetwork`` (models/latent.py); at test the exact
              marginal p(y_t) = Σ_z α_tz p(y_t | a_z, ...)

The stages of each softness are its object's ``caption_stages`` (models/softness.py).

Legend: B batch, T caption steps, L patches, ``...`` leading dims.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core import NormaliseFn
from ..stages.reduction import ReduceFn
from .softness import (
    CAPTION_NAMES,
    ExpectationMix,
    check_softness_and_tau,
    resolve,
    tau_at,
    uniform,
)

SOFTNESS = CAPTION_NAMES  # soft, mean, hard, gumbel, variational (models/softness.py)
AT_TEST = ("argmax", "expectation")


def stages(softness: str, training: bool, at_test: str, tau: float) -> tuple[NormaliseFn, ReduceFn]:
    """The (normaliser, reduction) pair of ``attend`` for a softness named by its string, in
    training or at test (``Softness.caption_stages``; variational's recurrence reads Σ α a)."""
    return resolve(softness, SOFTNESS).caption_stages(training, at_test, tau, None)


REWARDS = ("sum", "mean")
MIX_PER = ("image", "batch")
BASELINE_ON = ("all", "sampled")


def caption_reward(nll: Tensor, real: Tensor, how: str, scale: float) -> Tensor:
    """Hard attention's reward R per caption (Xu 2015, §4.1, eq. 12: R = log p(y | s̃, a)).

    nll (B, T) −log p(y_t | z̃, x) per step, real (B, T) bool the caption's tokens (eos
    included) -> (B,):

        "sum"    R = scale · Σ_t log p(y_t)
        "mean"   R = scale · (1/T_b) Σ_t log p(y_t), T_b the caption's real tokens; Xu's
                 code (arctic-captions, capgen.py) takes masked_cost.mean(0) / 10 over
                 minibatches of captions of one length (homogeneous_data.py), which is this
                 with scale = 0.1."""
    ll = -(nll * real).sum(1)  # (B,) Σ_t log p(y_t)
    if how == "mean":
        ll = ll / real.sum(1).clamp_min(1)
    elif how != "sum":
        raise ValueError(f"reward={how!r}; choose one of {', '.join(REWARDS)}")
    return scale * ll


def expected_context(batch: int, p: float, per: str, device: torch.device | str = "cpu") -> Tensor:
    """Which captions read the expected context Σ α a instead of a sample (B,) bool: each
    image with probability ``p`` (``per="image"``), or the whole minibatch at once
    (``per="batch"``, Xu's code: one h_sampling_mask ~ Bernoulli(p) per minibatch)."""
    if per == "image":
        return torch.rand(batch, device=device) < p
    if per == "batch":
        return (torch.rand((), device=device) < p).expand(batch)
    raise ValueError(f"mix_per={per!r}; choose one of {', '.join(MIX_PER)}")


def doubly_stochastic_penalty(weights: Tensor, steps: Tensor, patches: Tensor) -> Tensor:
    """Xu et al. 2015, eq. 14: the penalty Σ_i (1 − Σ_t α_ti)² that asks every patch to be
    attended to about once over the caption (Σ_i α_ti = 1 already holds at each step).

    weights α (B, T, L); steps (B, T) bool, the real (non-padding) caption steps the inner sum
    runs over; patches (B, L) bool, the allowed patches the outer sum runs over -> (B,)."""
    total = (weights * steps[..., None].to(weights)).sum(1)  # (B, L) Σ_t α_ti
    return (((1.0 - total) ** 2) * patches.to(weights)).sum(-1)  # (B,)


def check_softness(cfg: Any) -> None:
    """The softness fields of a CaptionerConfig, the first wrong one named."""
    cls = type(cfg).__name__
    check_softness_and_tau(cfg, SOFTNESS)
    if cfg.at_test not in AT_TEST:
        raise ValueError(f"{cls}.at_test={cfg.at_test!r}; choose argmax or expectation")
    for name in ("doubly_stochastic", "entropy_weight"):
        value = getattr(cfg, name)
        if not 0 <= value < float("inf"):
            raise ValueError(f"{cls}.{name}={value}; it must be >= 0")
    if not 0 <= cfg.hard_mix <= 1:
        raise ValueError(f"{cls}.hard_mix={cfg.hard_mix}; it is a probability, in [0, 1]")
    for name, known in (("reward", REWARDS), ("mix_per", MIX_PER), ("baseline_on", BASELINE_ON)):
        if getattr(cfg, name) not in known:
            raise ValueError(f"{cls}.{name}={getattr(cfg, name)!r}; choose one of "
                             f"{', '.join(known)}")  # fmt: skip
    if not 0 < cfg.reward_scale < float("inf"):
        raise ValueError(f"{cls}.reward_scale={cfg.reward_scale}; it must be > 0")
    if cfg.freeze_cnn and not cfg.features:
        raise ValueError(f"{cls}.freeze_cnn=True with no features: a frozen CNN of random "
                         "weights; give features= (a file of trained CNN weights)")  # fmt: skip
    if not 0 <= cfg.baseline_decay < 1:
        raise ValueError(f"{cls}.baseline_decay={cfg.baseline_decay}; it must be in [0, 1)")


__all__ = [
    "AT_TEST",
    "BASELINE_ON",
    "MIX_PER",
    "REWARDS",
    "ExpectationMix",
    "SOFTNESS",
    "caption_reward",
    "check_softness",
    "doubly_stochastic_penalty",
    "expected_context",
    "stages",
    "tau_at",
    "uniform",
]
