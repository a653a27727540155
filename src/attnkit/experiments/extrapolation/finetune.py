"""The RoPE part's short fine-tune: a plain-RoPE language model trained at L, its rotation
stretched to s·L (``attnkit.stages.rope_scaling``), then trained a few more updates on windows
of s·L characters, as Chen et al. 2023 (§3.1) and Peng et al. 2023 (§4.1) extend LLaMA.

``attnkit.fit`` starts every run from a fresh initialisation, so the fine-tune has its own
small loop on the training loops' shared core (train/updates.py): Adam, the same learning
rate and gradient clipping as the pre-training, and

    loss = −(1/(R·W)) Σ_r Σ_t log p(x_{t+1} | x_{≤t})      (R windows of W = s·L characters)

over a batch of R = max(1, batch_size // s) windows, so that every update reads the same
number of characters as a pre-training update (batch_size · L). The windows are consecutive
pieces of the seed's training text, shuffled each pass by a generator keyed on (seed, s): every
scaling at the same s sees the same batches, so their gaps are paired.

The learning rate rises linearly over the first ``WARMUP`` updates from 10% of the
pre-training rate, then stays there (Chen 2023, §3.1: "20 steps starting from 10% of the
maximum learning rate"; the pre-training here ends at its constant rate, so that rate is the
one it continues from).

Legend: R windows per update, W window length s·L, V vocabulary.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...train.runtime import set_threads
from ...train.updates import run_updates, update
from ..pool import generator
from .config import ExtrapolationConfig

WARMUP = 20  # Chen 2023, §3.1: 20 warm-up updates from 10% of the learning rate
CLIP = 1.0  # the pre-training's gradient-norm bound (TrainConfig.clip's default)


def scaled(model: nn.Module, scaling: str, factor: int) -> nn.Module:
    """A copy of a ``transformer-lm`` with RoPE positions, its rotation stretched by
    ``factor`` with ``scaling`` ("none": plain RoPE, the weights alone copied). RoPE has no
    parameters, so the weights carry over unchanged; the trained length L is the model's
    ``max_len``."""
    from ...models import build_model

    config: Any = model.config  # a TransformerLMConfig
    config = replace(config, rope_scaling=scaling,
                     rope_factor=float(factor if scaling != "none" else 1))  # fmt: skip
    copy = build_model("transformer-lm", config)
    copy.load_state_dict(model.state_dict())
    return copy.eval()


def windows(ids: Tensor, width: int) -> tuple[Tensor, Tensor]:
    """ids (N,) -> the consecutive windows of ``width`` inputs and their next characters,
    (n, W) each, n = (N − 1) // W (whole windows only)."""
    n = (ids.shape[0] - 1) // width
    if n < 1:
        raise ValueError(f"{ids.shape[0]} characters hold no window of {width} + 1; "
                         "give more --train-size or a shorter longest factor")  # fmt: skip
    return ids[: n * width].view(n, width), ids[1 : n * width + 1].view(n, width)


def batch_rows(n: int, rows: int, step: int, key: tuple[int, ...]) -> Tensor:
    """The window indices of update ``step`` (0-based): ``rows`` at a time through a
    permutation of the n windows, a new permutation each pass, keyed on ``key`` + the pass."""
    per_pass = max(1, n // rows)
    order = torch.randperm(n, generator=generator(*key, step // per_pass))  # (n,)
    at = (step % per_pass) * rows
    return order[at : at + rows]  # (R,)


def lr_of(lr: float, step: int) -> float:
    """The fine-tune's learning rate at update ``step`` (1-based): from 0.1·lr rising
    linearly to lr over ``WARMUP`` updates, then lr."""
    return lr * (0.1 + 0.9 * min(step, WARMUP) / WARMUP)


def fine_tune(model: nn.Module, ids: Tensor, width: int, rows: int, steps: int, lr: float,
              seed: int, key: tuple[int, ...],
              at: dict[int, Any] | None = None) -> list[float]:  # fmt: skip
    """Train ``model`` in place for ``steps`` Adam updates on batches of ``rows`` windows of
    ``width`` characters of ``ids`` (N,); ``at[k](model)`` runs after update k (k = 0: before
    the first). Returns each update's loss (nats per character)."""
    inputs, targets = windows(ids, width)  # (n, W) each
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses: list[float] = []
    hooks = at or {}
    if 0 in hooks:
        hooks[0](model)
    model.train()

    def batch_at(step: int) -> Tensor:
        return batch_rows(inputs.shape[0], rows, step, key)  # (R,)

    def update_on(step: int, pick: Tensor) -> float:
        for group in opt.param_groups:
            group["lr"] = lr_of(lr, step + 1)
        logits = model(inputs[pick]).logits  # (R, W, V)
        loss = F.cross_entropy(logits.transpose(1, 2), targets[pick])
        update(model, opt, loss, CLIP)
        return float(loss.detach())

    def after(step: int, loss: float, pick: Tensor) -> str | None:
        losses.append(loss)
        if step + 1 in hooks:
            model.eval()
            hooks[step + 1](model)
            model.train()
        return None

    run_updates(0, steps, batch_at, update_on, after)
    model.eval()
    return losses


@dataclass(frozen=True)
class Job:
    """One fine-tune of one seed's base model: ``scaling`` ("none", "linear", "ntk",
    "yarn") at ``factor`` s (the model then read at s·L), measured after each of ``steps``."""

    cfg: ExtrapolationConfig
    seed: int
    scaling: str
    factor: int
    steps: tuple[int, ...]  # updates after which the test text is scored (0: before any)
    base: Path  # the base model's run folder (its best checkpoint)

    @property
    def name(self) -> str:
        return f"{self.scaling}-x{self.factor}-s{self.seed}"


def run_job(job: Job) -> dict[str, Any]:
    """Fine-tune ``job``'s model and score the test text at s·L after each of its steps (in
    windows of s·L, ``tasks.lm.window_bits``, blocks of k_max·L) -> {"bits": {step: [block]},
    "loss": [update], "seconds"}. Module-level: the process pool pickles it."""
    from ...data.lm_text import lm_texts
    from ...tasks.lm import window_bits
    from ...train import checkpoint
    from ..pool import lm_data

    cfg = job.cfg
    set_threads(cfg.threads)
    t0 = time.perf_counter()
    loaded = checkpoint.load(job.base)
    train, _, test = lm_texts(lm_data(cfg, job.seed).spec())
    encode = loaded.tgt_vocab.encode
    train_ids = torch.tensor(encode(list(train), eos=False))  # (N,)
    test_ids = torch.tensor(encode(list(test), eos=False))  # (N_test,)
    width = job.factor * cfg.segment
    bits: dict[str, list[float]] = {}

    def score(step: int) -> Any:
        def at(model: nn.Module) -> None:
            bits[str(step)] = window_bits(model, test_ids, width, cfg.block)

        return at

    model = scaled(loaded.model, job.scaling, job.factor)
    losses = fine_tune(model, train_ids, width, max(1, cfg.batch_size // job.factor),
                       max(job.steps), cfg.lr, job.seed, (job.seed, job.factor),
                       {k: score(k) for k in job.steps})  # fmt: skip
    return {"bits": bits, "loss": [round(x, 4) for x in losses],
            "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip


def small_budget(steps: int) -> int:
    """Peng et al. 2023's budget beside Chen et al. 2023's: YaRN fine-tuned for 400 steps
    where PI took 1,000 (Peng §4, "2.5x reduction in training steps"), so 0.4 x ``steps``,
    at least 1."""
    return max(1, math.floor(steps * 400 / 1000 + 0.5))


__all__ = ["CLIP", "WARMUP", "Job", "batch_rows", "fine_tune", "lr_of", "run_job", "scaled",
           "small_budget", "windows"]
