"""The softness of a recurrent decoder's attention: soft, mean, exact, hard, gumbel,
variational.

RNNsearch and Luong compute, at every step, the attention α_t (B, S) over the annotations
h_s, the soft context c̄_t = Σ_s α_ts h_s, the next decoder state (fed c̄_t, in every
softness, unless ``decoder="deng"``: below), and a ``readout(c) -> logits`` that applies
the output layer to a context. The softness decides only which context the output layer
reads:

    soft         c̄_t                                                    (Bahdanau 2015)
    mean         c̄_t with α uniform over the source: mean pooling, the no-attention baseline
    exact        z_t latent with prior α_t, trained on the exact marginal likelihood by
                 enumeration, −log p(y_t | x, y<t) = −log Σ_z α_tz p(y_t | h_z, ...)
                 (Deng 2018, Table 1, "Exact Marginal Likelihood"); the same marginal at test
    hard         h_z with z ~ Categorical(α_t) in training, trained by REINFORCE with a
                 baseline and an entropy bonus (Xu 2015, §4.1, eq. 12; the reward of z_t is
                 log p(y_t | z_t)); z = argmax α_t at test
    gumbel       Σ_s g_s h_s, g = the straight-through one-hot Gumbel-softmax sample of α_t at
                 temperature τ (Jang 2017), τ annealed from tau_start to tau_end over tau_steps
                 updates; z = argmax α_t at test
    variational  z_t latent with prior α_t:  p(y_t | x, y<t) = Σ_z α_tz p(y_t | h_z, ...);
                 trained on the ELBO with q(z_t | x, y) from ``InferenceNetwork`` (estimator
                 "enumerate" or "sample", attnkit.mechanisms.variational); at test the exact
                 marginal under the prior p (q needs the target), and the ELBO under q is the bound

The baseline b of REINFORCE (hard, variational-sample), ``reward_baseline``: "average", the
moving average of the reward (Xu 2015, §4.1), or "soft", per token the log-likelihood of the
soft context under the prior, log p(y_t | c̄_t) (Deng 2018, §4: "a soft attention baseline",
which they use for hard and variational attention alike).

``decoder="deng"`` is the decoder of Deng et al. (2018, §5): no context enters the
recurrence (RNNsearch: s_t = GRU(s_{t-1}, E y_{t-1}), then α_t from s_t; Luong: no input
feeding), so that in the hard, gumbel and variational rows only the alignment variable carries
source information to y_t; with the default, their recurrence also reads the soft context, a
soft-attention path beside the latent one.

Because the recurrence is fed c̄_t (or no context), the alignment z_t touches only y_t: the
marginal
p(y | x) = Π_t Σ_z p(z_t) p(y_t | z_t) is exact by enumeration for hard, gumbel and
variational alike, and a per-position REINFORCE reward is unbiased (Deng et al. 2018 §3 drop
input feeding for the same reason). ``token_scores`` computes that exact log-likelihood (and
the variational bound) for evaluation.

The teacher-forced passes (``teacher_forced`` = the models' forward, ``training_loss``,
``token_scores``) run the recurrence first (``unroll``) and the output layer once over all
positions; decoding steps with ``step_output``. Samples (hard, gumbel, variational-sample)
are drawn inside the loop in the per-step order, so with one seed both paths give the same
logits; only a dropout inside the output layer (Luong's, on h̃) draws its masks after the
loop: the same distribution, other draws than a per-step pass.

Legend: B batch, S source length, T target length, V target vocabulary, Dv value width.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..mechanisms.hard import GumbelSoftmax, MovingAverageBaseline, reinforce_loss
from ..mechanisms.variational import (
    enumerated_elbo,
    log_marginal,
    log_normalise,
    masked_log_softmax,
    sample_latent,
    sampled_elbo,
)
from .base import Memory, Seq2Seq, Seq2SeqOutput, State
from .encoders import GRUEncoder
from .packed import packed_cross_entropy, rejoined

SOFTNESS = ("soft", "mean", "exact", "hard", "gumbel", "variational")
ESTIMATORS = ("enumerate", "sample")
BASELINES = ("average", "soft")
DECODERS = ("context", "deng")  # what the recurrence reads besides y_{t-1} (SoftnessFields)
STOCHASTIC = ("hard", "gumbel", "variational")  # hold an update counter and a baseline
MARGINAL = ("exact", "variational")  # the output reads every annotation: Σ_z p(z) p(y | z)
PACKABLE = ("soft", "mean")  # plain cross-entropy: packed targets give the same loss
AT_TEST = {
    "soft": "the soft context",
    "mean": "the mean of the annotations",
    "exact": "the exact marginal over the prior p (as in training)",
    "hard": "argmax of the attention (deterministic)",
    "gumbel": "argmax of the attention (deterministic)",
    "variational": "the exact marginal over the prior p (the bound uses q)",
}


@dataclass(kw_only=True)
class SoftnessFields:
    """The softness fields of RNNSearchConfig and LuongConfig (checked by ``check_softness``;
    keyword-only, after each model's own fields)."""

    softness: str = "soft"  # soft | mean | exact | hard | gumbel | variational
    estimator: str = "enumerate"  # variational: enumerate | sample
    tau_start: float = 1.0  # gumbel: temperature at the first update ...
    tau_end: float = 0.5  # ... annealed to this one ...
    tau_steps: int = 1000  # ... over this many updates
    entropy_weight: float = 0.01  # hard: λ_e of the entropy bonus (Xu 2015, eq. 12)
    reward_baseline: str = "average"  # hard, variational-sample: average | soft (latent.py)
    baseline_decay: float = 0.9  # ... the moving average's decay
    q_hidden: int = 32  # variational: inference network width (per direction)
    # "context": the soft context feeds the recurrence (RNNsearch's GRU input, Luong's input
    # feeding); "deng": Deng et al. (2018)'s decoder, no attention context in the recurrence
    # (RNNsearch updates its state from y_{t-1} alone, then attends with it; Luong needs
    # input_feeding off), so the alignment variable alone carries the source to the output
    decoder: str = "context"


def check_softness_and_tau(cfg: Any, softness: Sequence[str]) -> None:
    """``cfg.softness`` one of ``softness``, and the Gumbel temperatures ``tau_start`` and
    ``tau_end`` finite and > 0: the fields every softness config has, named on error."""
    cls = type(cfg).__name__
    if cfg.softness not in softness:
        raise ValueError(f"{cls}.softness={cfg.softness!r}; choose one of {', '.join(softness)}")
    for name in ("tau_start", "tau_end"):
        value = getattr(cfg, name)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{cls}.{name}={value}; the Gumbel temperature must be > 0")


def check_softness(cfg: Any) -> None:
    """The softness fields of a model config (RNNSearchConfig, LuongConfig), named on error."""
    cls = type(cfg).__name__
    check_softness_and_tau(cfg, SOFTNESS)
    if cfg.estimator not in ESTIMATORS:
        raise ValueError(f"{cls}.estimator={cfg.estimator!r}; choose enumerate or sample")
    if cfg.tau_steps < 1 or cfg.q_hidden < 1:
        raise ValueError(f"{cls}.tau_steps and q_hidden must be >= 1")
    if not (math.isfinite(cfg.entropy_weight) and cfg.entropy_weight >= 0):
        raise ValueError(f"{cls}.entropy_weight={cfg.entropy_weight}; it must be >= 0")
    if cfg.reward_baseline not in BASELINES:
        raise ValueError(f"{cls}.reward_baseline={cfg.reward_baseline!r}; choose average or soft")
    if not 0 <= cfg.baseline_decay < 1:
        raise ValueError(f"{cls}.baseline_decay={cfg.baseline_decay}; it must be in [0, 1)")
    if cfg.decoder not in DECODERS:
        raise ValueError(f"{cls}.decoder={cfg.decoder!r}; choose {' or '.join(DECODERS)}")


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
    features: tuple[Tensor, ...]  # (B, ·) each: the output layer's inputs besides the context
    output: Callable[[tuple[Tensor, ...], Tensor], Tensor]  # (features, context) -> logits
    state: State  # the next decoder state

    def readout(self, ctx: Tensor) -> Tensor:
        """The output layer on context(s) ctx (B, [K,] Dv) -> logits (B, [K,] V)."""
        return self.output(self.features, ctx)


def broadcast_feature(feature: Tensor, ctx: Tensor) -> Tensor:
    """A feature (B, [T,] F) spread over the extra dims of ctx (B, [T,] [K,] Dv) ->
    (B, [T,] [K,] F): K contexts (hard, variational: every annotation) per position."""
    extra = ctx.dim() - feature.dim()
    if extra == 0 and feature.shape[:-1] == ctx.shape[:-1]:  # one context per position
        return feature  # as it is: no view and expand nodes for autograd to walk back
    lead = (*feature.shape[:-1], *([1] * extra), feature.shape[-1])
    return feature.view(lead).expand(*ctx.shape[:-1], feature.shape[-1])


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


def _enumerated(run: Unrolled, y: Tensor, log_w: Tensor) -> tuple[MixtureOutput, Tensor]:
    """The output layer once per annotation, for the enumerated losses (exact, variational):
    -> (the output to return, its mixture log Σ_z w_z p(· | z) read lazily (MixtureOutput);
    log p(y_t | z) (B, T, S), with gradient). One log-softmax over the (B, T, S, V) readouts
    serves both."""
    logp = torch.log_softmax(_wide(run.readout(run.every_value())), -1)  # (B, T, S, V)
    return MixtureOutput(log_w, run.mask, logp.detach(), run.alpha), _gold_of(logp, y)


# (parts of step t, t) -> (the context the output layer reads (B, Dv), sampled index (B,) | None)
Chooser = Callable[[StepParts, int], tuple[Tensor, Tensor | None]]


def chooser(model: Any, sample_hard: bool, q_log: Tensor | None = None) -> Chooser | None:
    """The context the output layer reads at a step when it is not the soft context: hard,
    z ~ α_t (in training, or always with ``sample_hard``: the training loss samples) else the
    argmax; gumbel, the straight-through sample in training else the argmax; variational
    with ``q_log`` (B, T, S) and the "sample" estimator, z̃ ~ q. It runs inside the recurrent
    loop so that samples are drawn in the order of the per-step path. None: the output reads
    the soft context (soft, mean) or every annotation (exact, variational)."""
    cfg = model.config
    mode = cfg.softness
    if mode in ("soft", "mean", "exact") or (mode == "variational" and q_log is None):
        return None
    if mode == "variational":
        if cfg.estimator == "enumerate":
            return None
        assert q_log is not None
        q = q_log

        def from_q(parts: StepParts, t: int) -> tuple[Tensor, Tensor | None]:
            z = sample_latent(q[:, t], parts.mask)  # (B,)
            return _pick(parts.values, z), z

        return from_q
    if mode == "hard" and (sample_hard or model.training):

        def from_alpha(parts: StepParts, t: int) -> tuple[Tensor, Tensor | None]:
            z = sample_latent(log_normalise(parts.alpha, parts.mask), parts.mask)  # (B,)
            return _pick(parts.values, z), z

        return from_alpha
    if mode == "gumbel" and model.training:  # straight-through one-hot, relaxed gradient
        gumbel = GumbelSoftmax(tau_at(cfg, int(model.updates)))

        def relaxed(parts: StepParts, t: int) -> tuple[Tensor, Tensor | None]:
            g = gumbel(log_normalise(parts.alpha, parts.mask)[:, None], parts.mask[:, None])
            return (g @ parts.values)[:, 0], None  # (B, 1, S) @ (B, S, Dv) -> (B, Dv)

        return relaxed

    def argmax(parts: StepParts, t: int) -> tuple[Tensor, Tensor | None]:
        return _pick(parts.values, parts.alpha.argmax(-1)), None

    return argmax  # hard or gumbel at test


def step_output(model: Any, parts: StepParts) -> tuple[Tensor, Tensor, State]:
    """``step`` of a model with a softness: (logits (B, V), weights α (B, S), next state).
    Exact and variational return the exact marginal log p(y_t | ...) over the prior as their
    logits."""
    alpha, mask = parts.alpha, parts.mask
    if model.config.softness in MARGINAL:
        logits = _mixture(log_normalise(alpha, mask), mask, parts.readout(parts.values))  # (B, V)
        return logits, alpha, parts.state
    choose = chooser(model, sample_hard=False)
    ctx = parts.context if choose is None else choose(parts, 0)[0]  # (B, Dv)
    return parts.readout(ctx), alpha, parts.state


@dataclass
class Unrolled:
    """The teacher-forced recurrence over all T target positions, before the output layer."""

    alpha: Tensor  # (B, T, S) attention weights
    context: Tensor  # (B, T, Dv) soft contexts
    values: Tensor  # (B, S, Dv) annotations
    mask: Tensor  # (B, T, S) True = a real source position
    features: tuple[Tensor, ...]  # (B, T, ·) each: the output layer's other inputs
    output: Callable[[tuple[Tensor, ...], Tensor], Tensor]  # (features, context) -> logits
    chosen: Tensor | None  # (B, T, Dv) the context the chooser picked at each position
    index: Tensor | None  # (B, T) the positions it sampled

    def readout(self, ctx: Tensor) -> Tensor:
        """The output layer once over all positions: ctx (B, T, [K,] Dv) -> (B, T, [K,] V)."""
        return self.output(self.features, ctx)

    def every_value(self) -> Tensor:
        """Every annotation at every position (B, T, S, Dv), a view."""
        return self.values[:, None].expand(-1, self.alpha.shape[1], -1, -1)


def _stacked(feature: tuple[Tensor, ...], inputs: tuple[Tensor, ...], embedded: Tensor) -> Tensor:
    """A feature's T per-step values (B, F) each -> (B, T, F); the target embeddings
    themselves (the step read ``inputs[t]`` as it is) are ``embedded`` already
    (``packed.rejoined``)."""
    return rejoined(feature, inputs, embedded, lambda x: torch.stack(list(x), 1))  # (B, T, F)


def unroll(
    model: Any, memory: dict[str, Tensor], tgt_in: Tensor, choose: Chooser | None
) -> Unrolled:
    """Run the decoder's recurrence (``model.parts``, given the target embeddings looked up
    once) over tgt_in (B, T), keeping what the output layer needs, which then runs once over
    all positions (one large matrix product in place of T small ones; ``step_output`` is
    the per-step path, which decoding uses)."""
    state = model.init_state(memory)
    embedded = model.tgt_emb(tgt_in)  # (B, T, E): one lookup, one gradient of the table
    # unbind, not embedded[:, t]: one backward node stacks the T gradients, where T selects
    # would each add a zero-filled (B, T, E) gradient
    prevs, inputs = tgt_in.unbind(1), embedded.unbind(1)  # T x (B,), T x (B, E)
    steps, chosen, index = [], [], []
    for t in range(tgt_in.shape[1]):
        parts = model.parts(prevs[t], state, memory, inputs[t])
        state = parts.state
        steps.append(parts)
        if choose is not None:
            ctx, z = choose(parts, t)  # (B, Dv), (B,) | None
            chosen.append(ctx)
            if z is not None:
                index.append(z)
    first = steps[0]
    alpha = torch.stack([p.alpha for p in steps], 1)  # (B, T, S)
    features = [p.features for p in steps]
    return Unrolled(
        alpha,
        torch.stack([p.context for p in steps], 1),  # (B, T, Dv)
        first.values,
        first.mask[:, None].expand_as(alpha),  # (B, T, S)
        tuple(_stacked(f, inputs, embedded) for f in zip(*features, strict=True)),
        first.output,
        torch.stack(chosen, 1) if chosen else None,  # (B, T, Dv)
        torch.stack(index, 1) if index else None,  # (B, T)
    )


def teacher_forced(model: Any, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Seq2SeqOutput:
    """``forward`` of a model with a softness: at every position the logits ``step_output``
    gives (Seq2Seq.forward, the per-step path, computes the same), with the recurrence run
    first and the output layer once over all positions. logits (B, T, V), weights (B, T, S)."""
    memory = model.encode(src, src_len)
    run = unroll(model, memory, tgt_in, chooser(model, sample_hard=False))
    if model.config.softness in MARGINAL:  # the exact marginal over the prior
        p_log = log_normalise(run.alpha, run.mask)  # (B, T, S)
        logits = _mixture(p_log, run.mask, run.readout(run.every_value()))  # (B, T, V)
    else:
        logits = run.readout(run.context if run.chosen is None else run.chosen)  # (B, T, V)
    return Seq2SeqOutput(logits, run.alpha)


def training_loss(
    model: Any,
    src: Tensor,
    src_len: Tensor,
    tgt_in: Tensor,
    tgt_out: Tensor,
    label_smoothing: float = 0.0,
    packed: bool | None = None,
) -> tuple[Tensor, Seq2SeqOutput]:
    """The token-mean training loss of ``model``'s softness (see the module docstring) and
    the teacher-forced output. soft, mean, gumbel: cross-entropy; hard: cross-entropy of the
    sampled alignment + the REINFORCE surrogate; exact: −log Σ_z p(z_t) p(y_t | z_t), the
    exact marginal by enumeration; variational: −ELBO (label smoothing is applied to
    neither; the logits of these two, the mixture, carry no gradient). In training mode it
    counts the update (the Gumbel schedule and the baseline read the count). The recurrence
    runs first, then the output layer once over all positions (``unroll``). ``packed``
    (soft and mean; default: when the targets are on the CPU): the recurrence and the
    output layer skip the positions after each target's end (``packed.packed_cross_entropy``;
    the same loss and gradients, the output zero there). Not on a GPU by default: the batch
    sizes of a packed loop are read by the host."""
    cfg = model.config
    mode = cfg.softness
    if packed and mode not in PACKABLE:
        raise ValueError(
            f"packed=True: packed targets are for the soft and mean softness; {mode} reads the "
            "padded (B, T) layout (its REINFORCE/ELBO terms). Leave packed at None or False"
        )
    memory = model.encode(src, src_len)
    if mode in PACKABLE and (tgt_out.device.type == "cpu" if packed is None else packed):
        return packed_cross_entropy(model, memory, tgt_in, tgt_out, label_smoothing)
    mask = memory["mask"][:, 0]  # (B, S)
    real = tgt_out != 0  # (B, T)
    q_log = model.inference(tgt_out, memory["keys"], mask) if mode == "variational" else None
    run = unroll(model, memory, tgt_in, chooser(model, sample_hard=True, q_log=q_log))
    first = mode in STOCHASTIC and int(model.updates) == 0
    if model.training and mode in STOCHASTIC:
        model.updates += 1
    if q_log is not None:
        out, loss = _variational_loss(model, run, q_log, tgt_out, real, first)
        return loss, out
    if mode == "exact":
        out, nll = exact_marginal_loss(run, tgt_out)
        return nll[real].mean(), out
    logits = run.readout(run.context if run.chosen is None else run.chosen)  # (B, T, V)
    ce = F.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0,
        label_smoothing=label_smoothing,
    )  # fmt: skip
    out = Seq2SeqOutput(logits, run.alpha)
    if mode != "hard":
        return ce, out
    assert run.index is not None
    p_log = log_normalise(run.alpha, run.mask)  # (B, T, S)
    p = torch.where(run.mask, p_log.exp(), torch.zeros_like(p_log))  # (B, T, S)
    reward = _gold(logits, tgt_out)[real]  # (N,) log p(y_t | z_t)
    b = _baseline(model, reward, lambda: _soft_log_lik(run, tgt_out)[real], first)
    rl = reinforce_loss(
        p_log.gather(-1, run.index[..., None])[..., 0][real], reward, b,  # log p(z_t) (N,)
        entropy=-(p * p_log).sum(-1)[real], entropy_weight=cfg.entropy_weight,
    )  # fmt: skip
    return ce + rl, out


def exact_marginal_loss(run: Unrolled, y: Tensor) -> tuple[Seq2SeqOutput, Tensor]:
    """The exact-marginal row (Deng 2018, Table 1): per position the negative log of
    p(y_t | x, y<t) = Σ_z p(z_t = z) p(y_t | h_z, ...), enumerated over the S annotations,

        nll_t = −logsumexp_z (log α_tz + log p(y_t | z))

    with its gradient exact (no sampling). -> (the output: its logits the marginal's
    log-probabilities over the vocabulary (B, T, V), without gradient, computed when read:
    no loss reads them; nll (B, T); padded positions are the caller's to drop)."""
    p_log = log_normalise(run.alpha, run.mask)  # (B, T, S)
    out, gold = _enumerated(run, y, p_log)  # lazy (B, T, V) mixture, (B, T, S)
    return out, -log_marginal(p_log, gold, run.mask)  # nll (B, T)


def _soft_log_lik(run: Unrolled, y: Tensor) -> Tensor:
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
    model: Any, run: Unrolled, q_log: Tensor, tgt_out: Tensor, real: Tensor, first: bool
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


@torch.no_grad()
def token_scores(
    model: Any, src: Tensor, src_len: Tensor, tgt_in: Tensor, tgt_out: Tensor
) -> tuple[Tensor, Tensor | None]:
    """Exact per-token log p(y_t | x, y<t) (B, T) under the model's test-time model: soft and
    mean from the soft context; exact, hard, gumbel and variational the marginal Σ_z p(z) p(y_t|z)
    enumerated over the prior. Variational also returns the ELBO under q (B, T), its bound."""
    was = model.training
    model.eval()
    try:
        mode = model.config.softness
        memory = model.encode(src, src_len)
        mask = memory["mask"][:, 0]  # (B, S)
        variational = mode == "variational"
        q_log = model.inference(tgt_out, memory["keys"], mask) if variational else None
        run = unroll(model, memory, tgt_in, None)
        if mode in ("soft", "mean"):
            return _gold(run.readout(run.context), tgt_out), None  # (B, T)
        p_log = log_normalise(run.alpha, run.mask)  # (B, T, S)
        log_lik = _gold(run.readout(run.every_value()), tgt_out)  # (B, T, S)
        ll = log_marginal(p_log, log_lik, run.mask)  # (B, T)
        if q_log is None:
            return ll, None
        return ll, enumerated_elbo(q_log, p_log, log_lik, run.mask).elbo
    finally:
        model.train(was)


class LatentSeq2Seq(Seq2Seq):
    """A recurrent attention decoder whose steps are ``parts`` (a StepParts) and whose output
    layer is ``readout``: teacher forcing, incremental steps and the softness's training loss
    come from this module's functions (RNNsearch and Luong share them)."""

    def parts(self, prev: Tensor, state: State, memory: Memory) -> StepParts:
        raise NotImplementedError

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Seq2SeqOutput:
        """Teacher forcing: the recurrence over tgt_in (B, T), then the output layer once over
        all positions (``teacher_forced``); the logits of ``step`` at every position."""
        return teacher_forced(self, src, src_len, tgt_in)

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, Tensor, State]:
        return step_output(self, self.parts(prev, state, memory))  # weights (B, S)

    def training_loss(
        self, src: Tensor, src_len: Tensor, tgt_in: Tensor, tgt_out: Tensor,
        label_smoothing: float = 0.0, packed: bool | None = None,
    ) -> tuple[Tensor, Seq2SeqOutput]:  # fmt: skip
        """The loss of the model's softness (``training_loss``; plain cross-entropy for
        soft, over packed targets on the CPU)."""
        return training_loss(self, src, src_len, tgt_in, tgt_out, label_smoothing, packed)


__all__ = [
    "AT_TEST",
    "DECODERS",
    "ESTIMATORS",
    "SOFTNESS",
    "SoftnessFields",
    "InferenceNetwork",
    "LatentSeq2Seq",
    "StepParts",
    "Unrolled",
    "broadcast_feature",
    "check_softness_and_tau",
    "chooser",
    "add_softness",
    "MixtureOutput",
    "exact_marginal_loss",
    "check_softness",
    "step_output",
    "tau_at",
    "teacher_forced",
    "token_scores",
    "training_loss",
    "uniform",
    "unroll",
]
