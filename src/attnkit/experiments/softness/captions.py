"""The softness experiment's second task: ``digit-captions`` with the captioner (Xu et al. 2015,
"Show, Attend and Tell"; models/captioner.py), each row's softness over the image patches.

    caption_options      the captioner's config of a row: the experiment's widths, one softness
    caption_token_scores log p(y_t | x, y<t) per caption token (B, T), and variational's ELBO_t
    caption_entropy      mean entropy (nats) of the teacher-forced attention α_t over the patches
    score_caption        every number of one trained captioner on the test canvases

Which likelihood is reported (``caption_token_scores``), per softness:

    soft, mean     exact: the test-time model is deterministic
    variational    exact: the LSTM reads the soft context, the output one patch, so
                   p(y_t | x, y<t) = Σ_z α_tz p(y_t | a_z, h_t) is enumerated over the L patches
                   (Deng et al. 2018, eq. 2); the bound exp(−mean ELBO_t) under q as well
    hard, gumbel   the LSTM reads the sampled patch, so the history depends on every earlier
                   z and the sequence marginal Σ_{z_1..T} (L^T terms) is not enumerable;
                   ``caption_token_scores`` gives the marginal over the current step's patch,
                   the history along the test-time (argmax) path,
                   Σ_z α_tz p(y_t | a_z, h_{t-1}^argmax), which is not the likelihood:
                   ``caption_scores`` reports no perplexity for these rows

Legend: B batch, T caption steps, L patches, D patch feature width, E embedding width,
n decoder width, V target vocabulary.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor

from ...models.softness import CAPTION_NAMES, REGISTRY, resolve
from ...train.config import DataConfig
from ...train.outputs import write_output
from .config import CAPTION_DEFAULT_ROWS, CAPTION_ROWS, ROWS


class CaptionSettings(Protocol):
    """What the caption part reads of the experiment's settings (softness.SoftnessConfig
    has them all; typed here by shape, so that this module never imports softness.py)."""

    seed: int
    caption_train_size: int
    caption_valid_size: int
    test_size: int
    batch_size: int
    hidden: int
    caption_hidden: int
    emb: int
    tau_start: float
    tau_end: float
    timing_reps: int
    draws: int
    caption_patch: int
    caption_cnn_layers: int
    caption_cnn: str
    caption_reward: str
    caption_reward_scale: float
    caption_entropy: float
    caption_hard_mix: float
    caption_mix_per: str
    caption_baseline_on: str
    caption_gate: str
    caption_dropout: float


# the rows whose test-time likelihood is exact: no sampled context in the recurrence
DETERMINISTIC = tuple(n for n in CAPTION_NAMES if not REGISTRY[n].samples)


def caption_data(cfg: CaptionSettings) -> DataConfig:
    return DataConfig(task="digit-captions", task_seed=cfg.seed,
                      train_size=cfg.caption_train_size, valid_size=cfg.caption_valid_size,
                      test_size=cfg.test_size)  # fmt: skip


def caption_options(cfg: CaptionSettings, row: str, updates: int) -> dict[str, Any]:
    """The captioner's options of ``row``: the same widths for every row (CNN channels =
    ``hidden``, patch features, score and decoder widths = ``caption_hidden``, embeddings =
    ``emb``), the same
    CNN (``caption_cnn``: a file of trained weights, frozen; empty: trained with the rest);
    only the softness differs, with what goes with it: hard attention's recipe (Xu's by
    default; the fields are read by hard alone), the β gate (``caption_gate`` "soft": on the
    deterministic rows only, as Xu 2015 §4.2.1 puts it; "all"; "none"), and Gumbel's τ,
    which reaches tau_end at the last update."""
    softness = ROWS[row]["softness"]
    soft = resolve(softness, CAPTION_NAMES)  # the captioner's softness of the row
    gate = {"soft": not soft.samples, "all": True, "none": False}[cfg.caption_gate]
    cnn_file = "" if cfg.caption_cnn == "scratch" else cfg.caption_cnn
    w = cfg.caption_hidden
    return {"channels": cfg.hidden, "feat": w, "emb": cfg.emb, "dec_hidden": w,
            "attn_hidden": w, "q_hidden": w, "patch": cfg.caption_patch,
            "cnn_layers": cfg.caption_cnn_layers,
            "features": cnn_file, "freeze_cnn": bool(cnn_file),
            "softness": softness, "dropout": cfg.caption_dropout, "tau_start": cfg.tau_start,
            "tau_end": cfg.tau_end, "tau_steps": updates, "gate": gate,
            "reward": cfg.caption_reward, "reward_scale": cfg.caption_reward_scale,
            "entropy_weight": cfg.caption_entropy, "hard_mix": cfg.caption_hard_mix,
            "mix_per": cfg.caption_mix_per, "baseline_on": cfg.caption_baseline_on}  # fmt: skip


def pretrain_features(cfg: CaptionSettings, epochs: int, path: Path) -> dict[str, Any]:
    """Train the captioner's CNN once as a digit classifier of every patch on the training
    canvases (models/caption_features.py), seeded by ``cfg.seed``; save its weights to
    ``path``; returns the classifier's patch accuracies and updates."""
    from ...data.tasks import load_task
    from ...models.caption_features import pretrain_cnn

    d = caption_data(cfg)
    data = load_task("digit-captions", seed=d.task_seed, train_size=cfg.caption_train_size,
                     valid_size=cfg.caption_valid_size, test_size=cfg.test_size)  # fmt: skip
    state, report = pretrain_cnn([e.canvas for e in data.train], [e.canvas for e in data.valid],
                                 channels=cfg.hidden, patch=cfg.caption_patch, seed=cfg.seed,
                                 layers=cfg.caption_cnn_layers, epochs=epochs,
                                 batch_size=cfg.batch_size * 2)  # fmt: skip
    weights = io.BytesIO()
    torch.save(state, weights)
    write_output(path, weights.getvalue())
    return report


def learning_curve(out: Path) -> list[float]:
    """The validation exact match (%) after each epoch of one run (its history.json)."""
    from ..pool import history

    return [100 * row["valid_exact"] for row in history(out)]


def _gold(logp: Tensor, y: Tensor) -> Tensor:
    """log p of the gold ids: logp (..., V), y (...) -> (...)."""
    return logp.gather(-1, y[..., None])[..., 0]


def _step_marginal(model: Any, prev: Tensor, state: tuple[Tensor, Tensor], patches: Any,
                   alpha: Tensor, y: Tensor) -> Tensor:  # fmt: skip
    """log Σ_z α_z p(y | a_z, h): the step of captioner.step with the sampled context a_z for
    every patch z at once. prev, y (B,) ids; state (h, c) (B, n); alpha (B, L) -> (B,)."""
    h, c = state
    feats, mask = patches.features, patches.mask  # (B, L, D), (B, L)
    b, l, _ = feats.shape
    beta = torch.sigmoid(model.beta(h)) if model.config.gate else torch.ones_like(h[:, :1])
    values = beta[:, None] * feats  # (B, L, D) β a_z
    emb = model.tgt_emb(prev)  # (B, E)
    inp = torch.cat([emb[:, None].expand(b, l, -1), values], -1)  # (B, L, E + D)
    hz, _ = model.cell(inp.reshape(b * l, -1), (h.repeat_interleave(l, 0),
                                                 c.repeat_interleave(l, 0)))  # fmt: skip
    hz = hz.view(b, l, -1)  # (B, L, n)
    readouts = model.out(emb[:, None] + model.out_h(hz) + model.out_z(values))  # (B, L, V)
    log_lik = _gold(torch.log_softmax(readouts.float(), -1), y[:, None].expand(b, l))  # (B, L)
    log_alpha = torch.log(alpha.float()).masked_fill(~mask, -torch.inf)  # (B, L)
    return torch.logsumexp(log_alpha + log_lik, -1)  # (B,)


@torch.no_grad()
def caption_token_scores(model: Any, b: Any) -> tuple[Tensor, Tensor | None]:
    """log p(y_t | x, y<t) (B, T) as the module docstring says, per softness, and for
    variational the ELBO_t under q (B, T) (None otherwise). ``b`` a CaptionBatch."""
    was = model.training
    model.eval()
    try:
        soft = model.config.resolved_softness
        if not soft.samples:
            out = model(b.image, b.pixels, b.tgt_in)
            ll = _gold(torch.log_softmax(out.logits.float(), -1), b.tgt_out)  # (B, T)
            return ll, model._elbo(out, b.tgt_out) if soft.posterior else None
        patches = model.encoder(b.image, b.pixels)
        projected = model.score.project_keys(patches.features)  # (B, L, A)
        state = model.start(patches)
        lls = []
        for t in range(b.tgt_in.shape[1]):
            _, nxt, att = model.step(b.tgt_in[:, t], state, patches, projected)  # argmax path
            lls.append(_step_marginal(model, b.tgt_in[:, t], state, patches,
                                      att.weights[:, 0], b.tgt_out[:, t]))  # fmt: skip
            state = nxt
        return torch.stack(lls, 1), None
    finally:
        model.train(was)


@torch.no_grad()
def caption_entropy(model: Any, b: Any) -> tuple[float, int]:
    """Σ over the real caption steps of H(α_t) = −Σ_i α_ti log α_ti (nats) of the
    teacher-forced, test-time attention over the patches, and the number of steps."""
    was = model.training
    model.eval()
    try:
        w = model(b.image, b.pixels, b.tgt_in).weights.double()  # (B, T, L)
    finally:
        model.train(was)
    ent = -torch.where(w > 0, w * w.log(), torch.zeros_like(w)).sum(-1)  # (B, T)
    real = b.tgt_out != 0  # (B, T)
    return float(ent[real].sum()), int(real.sum())


def caption_scores(model: Any, examples: list[Any], tgt_vocab: Any) -> dict[str, Any]:
    """Per-token perplexity exp(−mean log p) where it is exact (soft, mean, variational;
    None for hard and gumbel, whose per-step marginal along the argmax history is not the
    likelihood: see the module docstring), variational's bound exp(−mean ELBO) (None for the
    others) and the mean attention entropy over every caption token of ``examples``."""
    from ...data import digit_captions as dc
    from ...data.vocab import Vocab
    from .measure import TokenNLL

    exact = not model.config.resolved_softness.samples
    sums, ent, steps = TokenNLL(), 0.0, 0
    for b in dc.batches(examples, Vocab.build([]), tgt_vocab, 128, None):
        sums.add(*caption_token_scores(model, b), b.tgt_out)  # log p, ELBO (B, T)
        e, n = caption_entropy(model, b)
        ent, steps = ent + e, steps + n
    return {"ppl": sums.ppl() if exact else None, "ppl_bound": sums.ppl_bound(),
            "entropy": ent / steps, "tokens": sums.tokens}  # fmt: skip


def score_caption(cfg: CaptionSettings, out: Path) -> dict[str, Any]:
    """Every number of one captioner run (checkpoint ``out/last``) on the test canvases."""
    from ...data import digit_captions as dc
    from ...data.example import Example
    from ...data.tasks import load_task
    from ...data.vocab import Vocab
    from ...eval.text import score
    from ...tasks.caption import attention_in_cell, decode
    from ...train import checkpoint
    from ..pool import steps_done
    from . import measure as sm

    d = caption_data(cfg)
    test = list(load_task("digit-captions", seed=d.task_seed, train_size=d.train_size,
                          valid_size=d.valid_size, test_size=d.test_size).test)  # fmt: skip
    ck = checkpoint.load(out / "last")
    m: Any = ck.model
    tv = ck.tgt_vocab
    t0 = time.perf_counter()
    hyps, maps, grid = decode(m, test, tv, batch_size=128)
    decode_s = (time.perf_counter() - t0) / len(test)
    s = score(hyps, [Example([], e.tgt) for e in test])
    items = [100.0 * (list(h) == list(e.tgt)) for h, e in zip(hyps, test, strict=True)]
    fixed = dc.batches(test[: cfg.batch_size], Vocab.build([]), tv, cfg.batch_size, None)[0]

    def loss() -> Tensor:
        return m.training_loss(fixed)[0]

    attention = list(m.score.parameters())  # the additive score: the attention's parameters
    return {
        "quality": 100 * s.exact_match,
        "exact": 100 * s.exact_match,
        "bleu": s.bleu,
        **caption_scores(m, test, tv),
        "aer": None,
        "in_cell": attention_in_cell(hyps, test, maps, grid, int(m.config.patch)),
        "step_seconds": sm.step_seconds(m, fixed, cfg.timing_reps, loss=loss),
        "decode_seconds": decode_s,
        "grad_variance": sm.gradient_variance(m, fixed, cfg.draws, loss=loss, params=attention),
        "parameters": sum(p.numel() for p in m.parameters()),
        "updates": steps_done(out),
        "exact_items": items,  # per test caption: 0 or 100 (the paired bootstrap's input)
        "curve": (curve := learning_curve(out)),  # valid exact match (%) after each epoch
        "valid_exact": curve[-1] if curve else None,
    }


__all__ = [
    "CAPTION_DEFAULT_ROWS",
    "CAPTION_ROWS",
    "DETERMINISTIC",
    "learning_curve",
    "pretrain_features",
    "caption_data",
    "caption_entropy",
    "caption_options",
    "caption_scores",
    "caption_token_scores",
    "score_caption",
]
