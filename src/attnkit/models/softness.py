"""The softness of a recurrent decoder's attention, one object per kind, in a registry keyed by
the name a config, the CLI and a checkpoint carry: soft, mean, exact, hard, gumbel,
variational. The models ask an object what it does (models/latent.py for RNNsearch and Luong,
models/captioner.py for the captioner); only ``resolve`` here turns a name into an object.

Each object says how the output layer's context is chosen in training and at test, what the
training loss adds, and what the model must hold for it:

    name         latent  stochastic  marginal  posterior  reinforce  samples  tempered
    soft           .         .          .          .          .         .        .
    mean           .         .          .          .          .         .        .
    exact          x         .          x          .          .         .        .
    hard           x         x          .          .          x         x        .
    gumbel         x         x          .          .          .         x        x
    variational    x         x          x          x          .         .        .

    latent      the alignment z_t is a latent variable with prior α_t: the exact test-time
                likelihood is the marginal Σ_z α_tz p(y_t | z) (``latent.token_scores``); not
                latent: the output reads the soft context, and the loss is plain
                cross-entropy (packed targets give the same loss)
    stochastic  the model holds an update counter (the Gumbel schedule) and a REINFORCE
                baseline (buffers, so they follow checkpoints)
    marginal    the output reads every annotation: its logits are log Σ_z p(z) p(· | z)
    posterior   q(z_t | x, y) from an ``InferenceNetwork`` (Deng et al. 2018, §4)
    reinforce   the sampled alignment is trained by REINFORCE (Xu et al. 2015, §4.1, eq. 12)
    samples     the chosen context is a sample of α in training (in the captioner the
                recurrence reads it, so the test-time history depends on earlier choices)
    tempered    reads the Gumbel temperature τ, annealed with the update count (Jang 2017)

The math of each row: models/latent.py (RNNsearch, Luong) and models/caption_softness.py
(the captioner). Legend: B batch, S source length (the captioner's L patches), T target
length, V target vocabulary, Dv value width, N real target tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core import NormaliseFn
from ..mechanisms.hard import GumbelSoftmax, MovingAverageBaseline, SampleReduce, reinforce_loss
from ..mechanisms.variational import (
    enumerated_elbo,
    log_marginal,
    log_normalise,
    sample_latent,
    sampled_elbo,
)
from ..stages.normalisers import softmax
from ..stages.reduction import Reduced, ReduceFn, weighted_sum
from .base import Seq2SeqOutput

# (parts of step t (latent.StepParts), t) -> (the context the output layer reads (B, Dv),
# the sampled index (B,) | None)
Chooser = Callable[[Any, int], tuple[Tensor, Tensor | None]]


def tau_at(cfg: Any, update: int) -> float:
    """τ after ``update`` training updates: exponential from tau_start to tau_end over
    tau_steps updates, then tau_end (Jang et al. 2017, §4, anneal τ = max(τ_min, e^{−r·step}))."""
    frac = min(max(update, 0), cfg.tau_steps) / cfg.tau_steps
    return float(cfg.tau_start * (cfg.tau_end / cfg.tau_start) ** frac)


def uniform(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean pooling as a normaliser: 1/|allowed| on every allowed key, whatever the scores."""
    allowed = torch.ones_like(scores) if mask is None else mask.expand(scores.shape).to(scores)
    return allowed / allowed.sum(-1, keepdim=True).clamp_min(1)  # (..., Tq, Tk)


def _pick(values: Tensor, index: Tensor) -> Tensor:
    """values (B, S, Dv), index (B,) -> values[b, index[b]] (B, Dv)."""
    return values[torch.arange(values.shape[0], device=values.device), index]


def _wide(x: Tensor) -> Tensor:
    """x in float32 at least: half and bfloat16 logits are widened, float64 kept (gradcheck)."""
    return x if x.dtype == torch.float64 else x.float()


def _gold(logits: Tensor, y: Tensor) -> Tensor:
    """log p(y) under logits (B, [T,] [K,] V) for gold ids y (B, [T]) -> (B, [T,] [K])."""
    return _gold_of(torch.log_softmax(_wide(logits), -1), y)


def _gold_of(logp: Tensor, y: Tensor) -> Tensor:
    """log p(y) from log-probabilities logp (B, [T,] [K,] V), gold ids y (B, [T]) ->
    (B, [T,] [K])."""
    idx = y.view(*y.shape, *([1] * (logp.dim() - y.dim())))  # (B, [T,] [1,] 1)
    return logp.gather(-1, idx.expand(*logp.shape[:-1], 1))[..., 0]


def _mixture(log_w: Tensor, mask: Tensor, logits: Tensor) -> Tensor:
    """log Σ_z w_z softmax(logits_z): log_w, mask (..., S), logits (..., S, V) -> (..., V)."""
    return _mixture_of(log_w, mask, torch.log_softmax(_wide(logits), -1))


def _mixture_of(log_w: Tensor, mask: Tensor, logp: Tensor) -> Tensor:
    """log Σ_z w_z p_z from log-probabilities logp (..., S, V) -> (..., V)."""
    return torch.logsumexp((log_w + (~mask) * -1e30)[..., None] + logp, -2)


class MixtureOutput(Seq2SeqOutput):
    """The teacher-forced output of the enumerated losses (exact, variational-enumerate):
    ``logits`` is the mixture log Σ_z w_z p(· | z) (B, T, V), without gradient, computed from
    the (B, T, S, V) log-probabilities the loss already holds when it is first read. No loss
    reads it, and its logsumexp over the readouts was most of an update's time on Multi30K
    when it was computed eagerly, so a training step that never reads it never pays for it."""

    def __init__(self, log_w: Tensor, mask: Tensor, logp: Tensor, weights: Tensor) -> None:
        self.weights = weights  # (B, T, S)
        self._parts: tuple[Tensor, Tensor, Tensor] | None = (log_w, mask, logp)
        self._logits: Tensor | None = None

    @property
    def logits(self) -> Tensor:
        """The mixture (B, T, V), computed on the first read and then kept."""
        if self._logits is None:
            assert self._parts is not None
            with torch.no_grad():
                self._logits = _mixture_of(*self._parts)
            self._parts = None
        return self._logits

    @logits.setter
    def logits(self, value: Tensor) -> None:
        self._logits, self._parts = value, None


def _enumerated(run: Any, y: Tensor, log_w: Tensor) -> tuple[MixtureOutput, Tensor]:
    """The output layer once per annotation, for the enumerated losses (exact, variational):
    -> (the output to return, its mixture log Σ_z w_z p(· | z) read lazily (MixtureOutput);
    log p(y_t | z) (B, T, S), with gradient). One log-softmax over the (B, T, S, V) readouts
    serves both."""
    logp = torch.log_softmax(_wide(run.readout(run.every_value())), -1)  # (B, T, S, V)
    return MixtureOutput(log_w, run.mask, logp.detach(), run.alpha), _gold_of(logp, y)


def exact_marginal_loss(run: Any, y: Tensor) -> tuple[Seq2SeqOutput, Tensor]:
    """The exact-marginal row (Deng 2018, Table 1): per position the negative log of
    p(y_t | x, y<t) = Σ_z p(z_t = z) p(y_t | h_z, ...), enumerated over the S annotations,

        nll_t = −logsumexp_z (log α_tz + log p(y_t | z))

    with its gradient exact (no sampling). -> (the output: its logits the marginal's
    log-probabilities over the vocabulary (B, T, V), without gradient, computed when read:
    no loss reads them; nll (B, T); padded positions are the caller's to drop)."""
    p_log = log_normalise(run.alpha, run.mask)  # (B, T, S)
    out, gold = _enumerated(run, y, p_log)  # lazy (B, T, V) mixture, (B, T, S)
    return out, -log_marginal(p_log, gold, run.mask)  # nll (B, T)


def _soft_log_lik(run: Any, y: Tensor) -> Tensor:
    """log p(y_t | c̄_t) (B, T), no gradient: the soft attention baseline (Deng 2018, §4)."""
    with torch.no_grad():
        return _gold(run.readout(run.context), y)


def _baseline(
    model: Any, reward: Tensor, soft: Callable[[], Tensor], first: bool
) -> Tensor | float:
    """REINFORCE's baseline for the rewards (N,): "soft", the per-token log-likelihood of the
    soft context ``soft()`` (N,) (Deng 2018, §4); "average", the moving average of the
    rewards (Xu 2015, §4.1), kept in ``model.baseline`` (the batch mean on the first update)."""
    if model.config.reward_baseline == "soft":
        return soft().detach()
    value = None if first else float(model.baseline)
    avg = MovingAverageBaseline(model.config.baseline_decay, value)
    used = avg.update(reward)
    if model.training and avg.value is not None:
        model.baseline.fill_(avg.value)
    return used


def _variational_loss(
    model: Any, run: Any, q_log: Tensor, tgt_out: Tensor, real: Tensor, first: bool
) -> tuple[Seq2SeqOutput, Tensor]:
    """The output to return (logits (B, T, V)) and −ELBO per real token. enumerate: exact, S
    readouts per position, the logits the mixture under q (computed when read); sample: one
    readout of z̃ ~ q, ``sampled_elbo`` with b the baseline of log p(y | z̃)."""
    p_log = log_normalise(run.alpha, run.mask)  # (B, T, S)
    if model.config.estimator == "enumerate":
        out, gold = _enumerated(run, tgt_out, q_log)  # lazy (B, T, V) mixture, (B, T, S)
        elbo = enumerated_elbo(q_log, p_log, gold, run.mask).elbo  # (B, T)
        return out, -elbo[real].mean()
    assert run.chosen is not None and run.index is not None
    logits = run.readout(run.chosen)  # (B, T, V)
    ll = _gold(logits, tgt_out)[real]  # (N,) log p(y | z̃)
    b = _baseline(model, ll, lambda: _soft_log_lik(run, tgt_out)[real], first)
    support = run.mask[real]  # (N, S)
    elbo = sampled_elbo(q_log[real], p_log[real], support, run.index[real], ll, b)
    return Seq2SeqOutput(logits, run.alpha), -elbo.mean()


@dataclass(frozen=True)
class ExpectationMix:
    """Hard attention's reduction in training with Xu 2015's variance trick (§4.1: "with
    probability 0.5 for a given image, we set the sampled attention location s̃ to its
    expected value α"): ``expected`` (B,) bool picks, per image, the expected context
    Σ_i α_i v_i; the others get ``SampleReduce``'s sample, whose extras come along.
    weights (B, Tq, Tk), values (B, Tk, Dv) -> Reduced(context (B, Tq, Dv), extras)."""

    expected: Tensor

    def __call__(self, weights: Tensor, values: Tensor) -> Reduced:
        sampled = SampleReduce()(weights, values)
        soft = weighted_sum(weights, values).context  # (B, Tq, Dv)
        pick = self.expected.view(-1, *([1] * (soft.dim() - 1)))  # (B, 1, 1)
        return Reduced(torch.where(pick, soft, sampled.context), sampled.extras)


def _cross_entropy(run: Any, tgt_out: Tensor, label_smoothing: float) -> tuple[Tensor, Tensor]:
    """Cross-entropy of the context each position chose (the soft one where none was chosen):
    -> (token-mean loss, logits (B, T, V))."""
    logits = run.readout(run.context if run.chosen is None else run.chosen)  # (B, T, V)
    ce = F.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0,
        label_smoothing=label_smoothing,
    )  # fmt: skip
    return ce, logits


def _argmax(parts: Any, t: int) -> tuple[Tensor, Tensor | None]:
    """The annotation of the largest weight, h_{argmax α_t} (B, Dv): hard and gumbel at test."""
    return _pick(parts.values, parts.alpha.argmax(-1)), None


def _hard_at_test(at_test: str) -> tuple[NormaliseFn, ReduceFn]:
    """The captioner's hard and gumbel attention at test: deterministic, the argmax patch or
    the expected context Σ α a."""
    return softmax, (SampleReduce(greedy=True) if at_test == "argmax" else weighted_sum)


class Softness:
    """One softness: its capabilities (the module docstring's table) and how it chooses the
    output's context and adds to the loss. The defaults are soft attention's; each kind
    overrides what differs.

    ``choose`` (RNNsearch, Luong): the context the output layer reads at a step when it is not
    the soft one, or None (then the soft context, or every annotation when ``marginal``).
    ``loss`` (RNNsearch, Luong): the token-mean training loss of the unrolled recurrence.
    ``caption_stages`` (the captioner): the (normaliser, reduction) of its ``attend``."""

    name = "soft"
    latent = False
    stochastic = False
    marginal = False
    posterior = False
    reinforce = False
    samples = False
    tempered = False
    captions = True  # the captioner offers it
    data_parallel = False  # torchrun's loss (train/distributed.py) is its training loss
    normaliser: NormaliseFn = staticmethod(softmax)
    at_test: str | None = None  # what the output reads at test, where it is worth a line

    def __repr__(self) -> str:
        return f"Softness({self.name!r})"

    def choose(self, model: Any, sample_hard: bool, q_log: Tensor | None) -> Chooser | None:
        """None: the output reads the soft context (or every annotation when ``marginal``).
        ``sample_hard``: sample even at test (the training loss does); ``q_log`` (B, T, S)
        the posterior where the model has one."""
        return None

    def loss(
        self, model: Any, run: Any, tgt_out: Tensor, label_smoothing: float, first: bool,
        q_log: Tensor | None,
    ) -> tuple[Tensor, Seq2SeqOutput]:  # fmt: skip
        """The token-mean loss of ``run`` (latent.Unrolled) for targets tgt_out (B, T), and the
        output to return; ``first``: the model's first update (the baseline starts there)."""
        ce, logits = _cross_entropy(run, tgt_out, label_smoothing)
        return ce, Seq2SeqOutput(logits, run.alpha)

    def caption_stages(
        self, training: bool, at_test: str, tau: float, expected: Tensor | None
    ) -> tuple[NormaliseFn, ReduceFn]:
        """The captioner's (normaliser, reduction); ``expected`` (B,) bool: the captions that
        read the expected context in training (hard attention's variance trick)."""
        return self.normaliser, weighted_sum


class Soft(Softness):
    """c̄_t = Σ_s α_ts h_s (Bahdanau 2015; Xu 2015, §4.2, eq. 13)."""

    data_parallel = True


class Mean(Softness):
    """α uniform over the source: mean pooling, the no-attention baseline."""

    name = "mean"
    normaliser = staticmethod(uniform)
    at_test = "the mean of the annotations"


class Exact(Softness):
    """z_t latent with prior α_t, trained and scored on the exact marginal by enumeration
    (Deng 2018, Table 1, "Exact Marginal Likelihood")."""

    name = "exact"
    latent = marginal = True
    captions = False
    at_test = "the exact marginal over the prior p (as in training)"

    def loss(
        self, model: Any, run: Any, tgt_out: Tensor, label_smoothing: float, first: bool,
        q_log: Tensor | None,
    ) -> tuple[Tensor, Seq2SeqOutput]:  # fmt: skip
        out, nll = exact_marginal_loss(run, tgt_out)
        return nll[tgt_out != 0].mean(), out


class Hard(Softness):
    """h_z, z ~ Categorical(α_t) in training, trained by REINFORCE with a baseline and an
    entropy bonus (Xu 2015, §4.1, eq. 12); z = argmax α_t at test."""

    name = "hard"
    latent = stochastic = reinforce = samples = True
    at_test = "argmax of the attention (deterministic)"

    def choose(self, model: Any, sample_hard: bool, q_log: Tensor | None) -> Chooser | None:
        if not (sample_hard or model.training):
            return _argmax

        def from_alpha(parts: Any, t: int) -> tuple[Tensor, Tensor | None]:
            z = sample_latent(log_normalise(parts.alpha, parts.mask), parts.mask)  # (B,)
            return _pick(parts.values, z), z

        return from_alpha

    def loss(
        self, model: Any, run: Any, tgt_out: Tensor, label_smoothing: float, first: bool,
        q_log: Tensor | None,
    ) -> tuple[Tensor, Seq2SeqOutput]:  # fmt: skip
        """Cross-entropy of the sampled alignment + the REINFORCE surrogate, the reward of z_t
        log p(y_t | z_t)."""
        ce, logits = _cross_entropy(run, tgt_out, label_smoothing)
        assert run.index is not None
        real = tgt_out != 0  # (B, T)
        p_log = log_normalise(run.alpha, run.mask)  # (B, T, S)
        p = torch.where(run.mask, p_log.exp(), torch.zeros_like(p_log))  # (B, T, S)
        reward = _gold(logits, tgt_out)[real]  # (N,) log p(y_t | z_t)
        b = _baseline(model, reward, lambda: _soft_log_lik(run, tgt_out)[real], first)
        rl = reinforce_loss(
            p_log.gather(-1, run.index[..., None])[..., 0][real], reward, b,  # log p(z_t) (N,)
            entropy=-(p * p_log).sum(-1)[real], entropy_weight=model.config.entropy_weight,
        )  # fmt: skip
        return ce + rl, Seq2SeqOutput(logits, run.alpha)

    def caption_stages(
        self, training: bool, at_test: str, tau: float, expected: Tensor | None
    ) -> tuple[NormaliseFn, ReduceFn]:
        if not training:
            return _hard_at_test(at_test)
        return softmax, (SampleReduce() if expected is None else ExpectationMix(expected))


class Gumbel(Softness):
    """Σ_s g_s h_s, g the straight-through one-hot Gumbel-softmax sample of α_t at temperature
    τ (Jang 2017), τ annealed from tau_start to tau_end; z = argmax α_t at test."""

    name = "gumbel"
    latent = stochastic = samples = tempered = True
    at_test = "argmax of the attention (deterministic)"

    def choose(self, model: Any, sample_hard: bool, q_log: Tensor | None) -> Chooser | None:
        if not model.training:
            return _argmax
        gumbel = GumbelSoftmax(tau_at(model.config, int(model.updates)))

        def relaxed(parts: Any, t: int) -> tuple[Tensor, Tensor | None]:
            g = gumbel(log_normalise(parts.alpha, parts.mask)[:, None], parts.mask[:, None])
            return (g @ parts.values)[:, 0], None  # (B, 1, S) @ (B, S, Dv) -> (B, Dv)

        return relaxed

    def caption_stages(
        self, training: bool, at_test: str, tau: float, expected: Tensor | None
    ) -> tuple[NormaliseFn, ReduceFn]:
        if not training:
            return _hard_at_test(at_test)
        return GumbelSoftmax(tau, hard=True), weighted_sum


class Variational(Softness):
    """z_t latent with prior α_t, trained on the ELBO with q(z_t | x, y) (estimator "enumerate"
    or "sample"; Deng 2018); at test the exact marginal under the prior."""

    name = "variational"
    latent = stochastic = marginal = posterior = True
    at_test = "the exact marginal over the prior p (the bound uses q)"

    def choose(self, model: Any, sample_hard: bool, q_log: Tensor | None) -> Chooser | None:
        if q_log is None or model.config.estimator == "enumerate":
            return None
        q = q_log

        def from_q(parts: Any, t: int) -> tuple[Tensor, Tensor | None]:
            z = sample_latent(q[:, t], parts.mask)  # (B,)
            return _pick(parts.values, z), z

        return from_q

    def loss(
        self, model: Any, run: Any, tgt_out: Tensor, label_smoothing: float, first: bool,
        q_log: Tensor | None,
    ) -> tuple[Tensor, Seq2SeqOutput]:  # fmt: skip
        assert q_log is not None
        out, loss = _variational_loss(model, run, q_log, tgt_out, tgt_out != 0, first)
        return loss, out


REGISTRY: dict[str, Softness] = {
    s.name: s for s in (Soft(), Mean(), Exact(), Hard(), Gumbel(), Variational())
}
NAMES = tuple(REGISTRY)  # soft, mean, exact, hard, gumbel, variational
CAPTION_NAMES = tuple(n for n, s in REGISTRY.items() if s.captions)


def resolve(name: str, choices: tuple[str, ...] = NAMES, owner: str = "") -> Softness:
    """The object of softness ``name``, one of ``choices``; ``owner`` (a config's class name)
    leads the error, which names the choices."""
    if name not in choices:
        field = f"{owner}.softness" if owner else "softness"
        raise ValueError(f"{field}={name!r}; choose one of {', '.join(choices)}")
    return REGISTRY[name]


def softness_of(model: Any) -> Softness:
    """The softness of any model: its config's, soft where the config has none."""
    return resolve(getattr(getattr(model, "config", None), "softness", "soft"))


def check_softness_and_tau(cfg: Any, choices: tuple[str, ...]) -> None:
    """``cfg.softness`` one of ``choices``, and the Gumbel temperatures ``tau_start`` and
    ``tau_end`` finite and > 0: the fields every softness config has, named on error."""
    cls = type(cfg).__name__
    resolve(cfg.softness, choices, cls)
    for name in ("tau_start", "tau_end"):
        value = getattr(cfg, name)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{cls}.{name}={value}; the Gumbel temperature must be > 0")


__all__ = [
    "CAPTION_NAMES",
    "NAMES",
    "REGISTRY",
    "Chooser",
    "Exact",
    "ExpectationMix",
    "Gumbel",
    "Hard",
    "Mean",
    "MixtureOutput",
    "Soft",
    "Softness",
    "Variational",
    "check_softness_and_tau",
    "exact_marginal_loss",
    "resolve",
    "softness_of",
    "tau_at",
    "uniform",
]
