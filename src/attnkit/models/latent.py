"""The softness of a recurrent decoder's attention: soft, mean, hard, gumbel, variational.

RNNsearch and Luong compute, at every step, the attention α_t (B, S) over the annotations
h_s, the soft context c̄_t = Σ_s α_ts h_s, the next decoder state (fed c̄_t, in every
softness), and a ``readout(c) -> logits`` that applies the output layer to a context. The
softness decides only which context the output layer reads:

    soft         c̄_t                                                    (Bahdanau 2015)
    mean         c̄_t with α uniform over the source: mean pooling, the no-attention baseline
    hard         h_z with z ~ Categorical(α_t) in training, trained by REINFORCE with a
                 baseline and an entropy bonus (Xu 2015, §4.1, eq. 12; the reward of z_t is
                 log p(y_t | z_t)); z = argmax α_t at test
    gumbel       Σ_s g_s h_s, g = the straight-through one-hot Gumbel-softmax sample of α_t at
                 temperature τ (Jang 2017), τ annealed from tau_start to tau_end over tau_steps
                 updates; z = argmax α_t at test
    variational  z_t latent with prior α_t:  p(y_t | x, y<t) = Σ_z α_tz p(y_t | h_z, ...);
                 trained on the ELBO with q(z_t | x, y) from ``InferenceNetwork`` (estimator
                 "enumerate" or "sample", attnkit.variational); at test the exact marginal under
                 the prior p (q needs the target), and the ELBO under q is the bound

The baseline b of REINFORCE (hard, variational-sample), ``reward_baseline``: "average", the
moving average of the reward (Xu 2015, §4.1), or "soft", per token the log-likelihood of the
soft context under the prior, log p(y_t | c̄_t) (Deng 2018, §4: "a soft attention baseline",
which they use for hard and variational attention alike).

Because the recurrence is fed c̄_t, the alignment z_t touches only y_t: the marginal
p(y | x) = Π_t Σ_z p(z_t) p(y_t | z_t) is exact by enumeration for hard, gumbel and
variational alike, and a per-position REINFORCE reward is unbiased (Deng et al. 2018 §3 drop
input feeding for the same reason). ``token_scores`` computes that exact log-likelihood (and
the variational bound) for evaluation.

Legend: B batch, S source length, T target length, V target vocabulary, Dv value width.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..hard import GumbelSoftmax, MovingAverageBaseline, reinforce_loss
from ..variational import (
    enumerated_elbo,
    log_marginal,
    log_normalise,
    masked_log_softmax,
    sample_latent,
    sampled_elbo,
)
from .base import Seq2SeqOutput, State
from .encoders import GRUEncoder

SOFTNESS = ("soft", "mean", "hard", "gumbel", "variational")
ESTIMATORS = ("enumerate", "sample")
BASELINES = ("average", "soft")
STOCHASTIC = ("hard", "gumbel", "variational")  # hold an update counter and a baseline
AT_TEST = {
    "soft": "the soft context",
    "mean": "the mean of the annotations",
    "hard": "argmax of the attention (deterministic)",
    "gumbel": "argmax of the attention (deterministic)",
    "variational": "the exact marginal over the prior p (the bound uses q)",
}


def check_softness(cfg: Any) -> None:
    """The softness fields of a model config (RNNSearchConfig, LuongConfig), named on error."""
    cls = type(cfg).__name__
    if cfg.softness not in SOFTNESS:
        raise ValueError(f"{cls}.softness={cfg.softness!r}; choose one of {', '.join(SOFTNESS)}")
    if cfg.estimator not in ESTIMATORS:
        raise ValueError(f"{cls}.estimator={cfg.estimator!r}; choose enumerate or sample")
    for name in ("tau_start", "tau_end"):
        value = getattr(cfg, name)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{cls}.{name}={value}; the Gumbel temperature must be > 0")
    if cfg.tau_steps < 1 or cfg.q_hidden < 1:
        raise ValueError(f"{cls}.tau_steps and q_hidden must be >= 1")
    if not (math.isfinite(cfg.entropy_weight) and cfg.entropy_weight >= 0):
        raise ValueError(f"{cls}.entropy_weight={cfg.entropy_weight}; it must be >= 0")
    if cfg.reward_baseline not in BASELINES:
        raise ValueError(f"{cls}.reward_baseline={cfg.reward_baseline!r}; choose average or soft")
    if not 0 <= cfg.baseline_decay < 1:
        raise ValueError(f"{cls}.baseline_decay={cfg.baseline_decay}; it must be in [0, 1)")


def tau_at(cfg: Any, update: int) -> float:
    """τ after ``update`` training updates: exponential from tau_start to tau_end over
    tau_steps updates, then tau_end (Jang et al. 2017, §4, anneal τ = max(τ_min, e^{−r·step}))."""
    frac = min(max(update, 0), cfg.tau_steps) / cfg.tau_steps
    return float(cfg.tau_start * (cfg.tau_end / cfg.tau_start) ** frac)


def uniform(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean pooling as a normaliser: 1/|allowed| on every allowed key, whatever the scores."""
    allowed = torch.ones_like(scores) if mask is None else mask.expand(scores.shape).to(scores)
    return allowed / allowed.sum(-1, keepdim=True).clamp_min(1)  # (..., Tq, Tk)


@dataclass
class StepParts:
    """What a model's decoder step computed before choosing its output's context."""

    alpha: Tensor  # (B, S) attention weights: the prior p(z_t)
    context: Tensor  # (B, Dv) soft context Σ α h: fed to the recurrence
    values: Tensor  # (B, S, Dv) annotations h_s
    mask: Tensor  # (B, S) True = a real source position
    readout: Callable[[Tensor], Tensor]  # (B, [K,] Dv) context -> (B, [K,] V) logits
    state: State  # the next decoder state


class InferenceNetwork(nn.Module):
    """q(z_t | x, y) (Deng 2018, §4, a smaller version): a bidirectional GRU reads the whole
    target y_1..y_T; its state u_t at step t scores every annotation bilinearly,

        q(z_t = s | x, y) = softmax_s(u_tᵀ W_q h_s)

    forward(tgt_out (B, T), keys (B, S, Dk), mask (B, S)) -> log q (B, T, S), 0 off-mask."""

    def __init__(self, tgt_vocab: int, emb: int, hidden: int, key_dim: int) -> None:
        super().__init__()
        self.encoder = GRUEncoder(tgt_vocab, emb, hidden, bidirectional=True)
        self.bilinear = nn.Linear(key_dim, 2 * hidden, bias=False)  # W_q

    def forward(self, tgt_out: Tensor, keys: Tensor, mask: Tensor) -> Tensor:
        lengths = (tgt_out != 0).sum(1).clamp_min(1)  # (B,)
        u, _, _ = self.encoder(tgt_out, lengths)  # (B, T, 2k)
        logits = u @ self.bilinear(keys).transpose(1, 2)  # (B, T, S)
        return masked_log_softmax(logits, mask[:, None, :].expand_as(logits))


def add_softness(model: nn.Module, cfg: Any, key_dim: int) -> None:
    """Give ``model`` what its softness needs: an update counter and a reward baseline
    (buffers, so that they follow the model into checkpoints) and, for variational, q."""
    model.inference = None  # type: ignore[assignment]
    if cfg.softness in STOCHASTIC:
        model.register_buffer("updates", torch.zeros((), dtype=torch.long))
        model.register_buffer("baseline", torch.zeros(()))
    if cfg.softness == "variational":
        model.inference = InferenceNetwork(cfg.tgt_vocab, cfg.emb, cfg.q_hidden, key_dim)


def _pick(values: Tensor, index: Tensor) -> Tensor:
    """values (B, S, Dv), index (B,) -> values[b, index[b]] (B, Dv)."""
    return values[torch.arange(values.shape[0], device=values.device), index]


def _gold(logits: Tensor, y: Tensor) -> Tensor:
    """log p(y) under logits (B, [K,] V) for gold ids y (B,) -> (B, [K])."""
    logp = torch.log_softmax(logits.float(), -1)  # (B, [K,] V)
    idx = y.view(-1, *([1] * (logits.dim() - 1)))  # (B, [1,] 1)
    return logp.gather(-1, idx.expand(*logp.shape[:-1], 1))[..., 0]


def step_output(model: Any, parts: StepParts) -> tuple[Tensor, Tensor, State]:
    """``step`` of a model with a softness: (logits (B, V), weights α (B, S), next state).
    Variational returns the exact marginal log p(y_t | ...) over the prior as its logits."""
    cfg, alpha, mask = model.config, parts.alpha, parts.mask
    mode = cfg.softness
    if mode in ("soft", "mean"):
        logits = parts.readout(parts.context)
    elif mode == "variational":
        p_log = log_normalise(alpha, mask)  # (B, S)
        logp = torch.log_softmax(parts.readout(parts.values).float(), -1)  # (B, S, V)
        logits = torch.logsumexp((p_log + (~mask) * -1e30)[..., None] + logp, 1)  # (B, V)
    elif model.training and mode == "hard":
        z = sample_latent(log_normalise(alpha, mask), mask)  # (B,)
        logits = parts.readout(_pick(parts.values, z))
    elif model.training:  # gumbel: straight-through one-hot, gradient of the relaxed sample
        gumbel = GumbelSoftmax(tau_at(cfg, int(model.updates)))
        g = gumbel(log_normalise(alpha, mask)[:, None], mask[:, None])  # (B, 1, S)
        logits = parts.readout((g @ parts.values)[:, 0])
    else:  # hard or gumbel at test: argmax
        logits = parts.readout(_pick(parts.values, alpha.argmax(-1)))
    return logits, alpha, parts.state


def training_loss(
    model: Any,
    src: Tensor,
    src_len: Tensor,
    tgt_in: Tensor,
    tgt_out: Tensor,
    label_smoothing: float = 0.0,
) -> tuple[Tensor, Seq2SeqOutput]:
    """The token-mean training loss of ``model``'s softness (see the module docstring) and
    the teacher-forced output. soft, mean, gumbel: cross-entropy; hard: cross-entropy of the
    sampled alignment + the REINFORCE surrogate; variational: −ELBO (label smoothing is not
    applied to it). In training mode it counts the update (the Gumbel schedule and the
    baseline read the count)."""
    cfg = model.config
    mode = cfg.softness
    memory = model.encode(src, src_len)
    state = model.init_state(memory)
    mask = memory["mask"][:, 0]  # (B, S)
    real = tgt_out != 0  # (B, T)
    q_log = model.inference(tgt_out, memory["keys"], mask) if mode == "variational" else None
    logits, weights, terms = [], [], []
    for t in range(tgt_in.shape[1]):
        parts = model.parts(tgt_in[:, t], state, memory)
        state, y = parts.state, tgt_out[:, t]
        weights.append(parts.alpha)  # (B, S)
        if q_log is not None:
            step_logits, term = _variational_step(cfg, parts, q_log[:, t], y)
            terms.append(term)
        elif mode == "hard":
            step_logits, term = _hard_step(parts, y)
            terms.append(term)
        else:
            step_logits = step_output(model, parts)[0]  # (B, V)
        logits.append(step_logits)
    out = Seq2SeqOutput(torch.stack(logits, 1), torch.stack(weights, 1))  # (B, T, V), (B, T, S)
    first = mode in STOCHASTIC and int(model.updates) == 0
    if model.training and mode in STOCHASTIC:
        model.updates += 1
    if q_log is not None:
        return _variational_loss(model, q_log, mask, _stack(terms), real, first), out
    ce = F.cross_entropy(
        out.logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0,
        label_smoothing=label_smoothing,
    )  # fmt: skip
    if mode != "hard":
        return ce, out
    hard = {k: v[real] for k, v in _stack(terms).items()}  # (N,) each
    b = _baseline(model, hard["reward"], hard["soft"], first)
    rl = reinforce_loss(
        hard["log_p_z"], hard["reward"], b,
        entropy=hard["entropy"], entropy_weight=cfg.entropy_weight,
    )  # fmt: skip
    return ce + rl, out


def _stack(terms: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Per-step dicts of (B, ...) tensors -> one dict of (B, T, ...) tensors."""
    return {k: torch.stack([term[k] for term in terms], 1) for k in terms[0]}


def _hard_step(parts: StepParts, y: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """z ~ p = α_t: the logits of h_z (B, V) and REINFORCE's terms, (B,) each: log p(z),
    the reward log p(y_t | z) and the entropy H(α_t)."""
    p_log = log_normalise(parts.alpha, parts.mask)  # (B, S)
    z = sample_latent(p_log, parts.mask)  # (B,)
    logits = parts.readout(_pick(parts.values, z))  # (B, V)
    p = torch.where(parts.mask, p_log.exp(), torch.zeros_like(p_log))  # (B, S)
    return logits, {
        "log_p_z": p_log.gather(-1, z[:, None])[:, 0],
        "reward": _gold(logits, y),
        "entropy": -(p * p_log).sum(-1),
        "soft": _soft_log_lik(parts, y),
    }


def _soft_log_lik(parts: StepParts, y: Tensor) -> Tensor:
    """log p(y_t | c̄_t) (B,), no gradient: the soft attention baseline (Deng 2018, §4)."""
    with torch.no_grad():
        return _gold(parts.readout(parts.context), y)


def _baseline(model: Any, reward: Tensor, soft: Tensor, first: bool) -> Tensor | float:
    """REINFORCE's baseline for the rewards (N,): "soft", the per-token log-likelihood of the
    soft context ``soft`` (N,) (Deng 2018, §4); "average", the moving average of the rewards
    (Xu 2015, §4.1), kept in ``model.baseline`` (the batch mean on the first update)."""
    if model.config.reward_baseline == "soft":
        return soft.detach()
    value = None if first else float(model.baseline)
    avg = MovingAverageBaseline(model.config.baseline_decay, value)
    used = avg.update(reward)
    if model.training and avg.value is not None:
        model.baseline.fill_(avg.value)
    return used


def _variational_step(
    cfg: Any, parts: StepParts, q_log: Tensor, y: Tensor
) -> tuple[Tensor, dict[str, Tensor]]:
    """One step of the variational loss: the logits to return (B, V) and the step's terms.
    enumerate: the ELBO (B,) with S readouts; sample: log p(y | z̃) (B,), the prior log p
    (B, S) and z̃ ~ q (B,), with one readout."""
    mask = parts.mask
    p_log = log_normalise(parts.alpha, mask)  # (B, S)
    if cfg.estimator == "enumerate":
        all_logits = parts.readout(parts.values)  # (B, S, V): one readout per position
        elbo = enumerated_elbo(q_log, p_log, _gold(all_logits, y), mask).elbo  # (B,)
        logp = torch.log_softmax(all_logits.float(), -1)  # (B, S, V)
        logits = torch.logsumexp((q_log + (~mask) * -1e30)[..., None] + logp, 1)  # (B, V)
        return logits, {"elbo": elbo}
    z = sample_latent(q_log, mask)  # (B,)
    logits = parts.readout(_pick(parts.values, z))  # (B, V): one readout
    return logits, {"log_lik": _gold(logits, y), "p_log": p_log, "index": z,
                    "soft": _soft_log_lik(parts, y)}  # fmt: skip


def _variational_loss(
    model: Any, q_log: Tensor, mask: Tensor, terms: dict[str, Tensor], real: Tensor, first: bool
) -> Tensor:
    """−ELBO per real token: enumerated, or ``sampled_elbo`` with b the moving average of
    log p(y | z̃)."""
    if model.config.estimator == "enumerate":
        return -terms["elbo"][real].mean()
    ll = terms["log_lik"][real]  # (N,)
    b = _baseline(model, ll, terms["soft"][real], first)
    support = mask[:, None, :].expand_as(q_log)[real]  # (N, S)
    elbo = sampled_elbo(q_log[real], terms["p_log"][real], support, terms["index"][real], ll, b)
    return -elbo.mean()


@torch.no_grad()
def token_scores(
    model: Any, src: Tensor, src_len: Tensor, tgt_in: Tensor, tgt_out: Tensor
) -> tuple[Tensor, Tensor | None]:
    """Exact per-token log p(y_t | x, y<t) (B, T) under the model's test-time model: soft and
    mean from the soft context; hard, gumbel and variational the marginal Σ_z p(z) p(y_t|z)
    enumerated over the prior. Variational also returns the ELBO under q (B, T), its bound."""
    was = model.training
    model.eval()
    try:
        mode = model.config.softness
        memory = model.encode(src, src_len)
        state = model.init_state(memory)
        mask = memory["mask"][:, 0]  # (B, S)
        variational = mode == "variational"
        q_log = model.inference(tgt_out, memory["keys"], mask) if variational else None
        lls, elbos = [], []
        for t in range(tgt_in.shape[1]):
            parts = model.parts(tgt_in[:, t], state, memory)
            state, y = parts.state, tgt_out[:, t]
            if mode in ("soft", "mean"):
                lls.append(_gold(parts.readout(parts.context), y))  # (B,)
                continue
            p_log = log_normalise(parts.alpha, mask)  # (B, S)
            log_lik = _gold(parts.readout(parts.values), y)  # (B, S)
            lls.append(log_marginal(p_log, log_lik, mask))  # (B,)
            if q_log is not None:
                elbos.append(enumerated_elbo(q_log[:, t], p_log, log_lik, mask).elbo)
        return torch.stack(lls, 1), torch.stack(elbos, 1) if elbos else None
    finally:
        model.train(was)


__all__ = [
    "AT_TEST",
    "ESTIMATORS",
    "SOFTNESS",
    "InferenceNetwork",
    "StepParts",
    "add_softness",
    "check_softness",
    "step_output",
    "tau_at",
    "token_scores",
    "training_loss",
    "uniform",
]
