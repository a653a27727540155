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

Each softness is one object of models/softness.py, which these functions ask what to do
(``Softness.choose``, ``Softness.loss``, and its capabilities ``latent``, ``marginal``, ...).

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..mechanisms.variational import (
    enumerated_elbo,
    log_marginal,
    log_normalise,
    masked_log_softmax,
)
from .base import Memory, Seq2Seq, Seq2SeqOutput, State
from .encoders import GRUEncoder
from .packed import packed_cross_entropy, rejoined
from .softness import (
    NAMES,
    Chooser,
    MixtureOutput,
    Softness,
    _gold,
    _mixture,
    check_softness_and_tau,
    exact_marginal_loss,
    resolve,
    tau_at,
    uniform,
)

SOFTNESS = NAMES  # soft, mean, exact, hard, gumbel, variational (models/softness.py)
ESTIMATORS = ("enumerate", "sample")
BASELINES = ("average", "soft")
DECODERS = ("context", "deng")  # what the recurrence reads besides y_{t-1} (SoftnessFields)


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

    @property
    def resolved_softness(self) -> Softness:
        """The object of ``softness`` (models/softness.py), which the model asks what to do."""
        return resolve(self.softness)


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
    soft = cfg.resolved_softness
    if soft.stochastic:
        model.register_buffer("updates", torch.zeros((), dtype=torch.long))
        model.register_buffer("baseline", torch.zeros(()))
    if soft.posterior:
        model.inference = InferenceNetwork(cfg.tgt_vocab, cfg.emb, cfg.q_hidden, key_dim)


def chooser(model: Any, sample_hard: bool, q_log: Tensor | None = None) -> Chooser | None:
    """The context the output layer reads at a step when it is not the soft context: hard,
    z ~ α_t (in training, or always with ``sample_hard``: the training loss samples) else the
    argmax; gumbel, the straight-through sample in training else the argmax; variational
    with ``q_log`` (B, T, S) and the "sample" estimator, z̃ ~ q. It runs inside the recurrent
    loop so that samples are drawn in the order of the per-step path. None: the output reads
    the soft context (soft, mean) or every annotation (exact, variational). Each softness
    object says which (``Softness.choose``, models/softness.py)."""
    return model.config.resolved_softness.choose(model, sample_hard, q_log)


def step_output(model: Any, parts: StepParts) -> tuple[Tensor, Tensor, State]:
    """``step`` of a model with a softness: (logits (B, V), weights α (B, S), next state).
    Exact and variational return the exact marginal log p(y_t | ...) over the prior as their
    logits."""
    alpha, mask = parts.alpha, parts.mask
    if model.config.resolved_softness.marginal:
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
    if model.config.resolved_softness.marginal:  # the exact marginal over the prior
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
    soft = model.config.resolved_softness
    if packed and soft.latent:
        raise ValueError(
            f"packed=True: packed targets are for the soft and mean softness; {soft.name} reads "
            "the padded (B, T) layout (its REINFORCE/ELBO terms). Leave packed at None or False"
        )
    memory = model.encode(src, src_len)
    if not soft.latent and (tgt_out.device.type == "cpu" if packed is None else packed):
        return packed_cross_entropy(model, memory, tgt_in, tgt_out, label_smoothing)
    mask = memory["mask"][:, 0]  # (B, S)
    q_log = model.inference(tgt_out, memory["keys"], mask) if soft.posterior else None
    run = unroll(model, memory, tgt_in, soft.choose(model, True, q_log))
    first = soft.stochastic and int(model.updates) == 0
    if model.training and soft.stochastic:
        model.updates += 1
    return soft.loss(model, run, tgt_out, label_smoothing, first, q_log)


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
        soft = model.config.resolved_softness
        memory = model.encode(src, src_len)
        mask = memory["mask"][:, 0]  # (B, S)
        q_log = model.inference(tgt_out, memory["keys"], mask) if soft.posterior else None
        run = unroll(model, memory, tgt_in, None)
        if not soft.latent:
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
