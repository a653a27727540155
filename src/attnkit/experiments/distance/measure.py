"""What one arm of the distance experiment measures: updates to the criterion (early-stopped
training of one model at one Δ), its held-out accuracy where training stopped, and the
gradient probe ‖∂ℓ/∂e_{t−Δ}‖.

Updates-to-criterion. Every update's batch is fresh (a pure function of seed, task, Δ,
step), so its accuracy *before* the update is a held-out score of the model after the
updates so far. With acc_n the accuracy of batch n (n = 0, 1, ...), the criterion is met at
the first n whose window of the last w batches averages at least c:

    u = min { n + 1 : (1/w) Σ_{i=n−w+1..n} acc_i >= c }          (w batches, c = 90%)

u is the number of updates run when training stops (so u >= w). A run that has not met it
after ``cap`` updates is *censored*: it counts as u = cap, a lower bound of its true value.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...models.sequence_classifiers import Sizes, build, input_gradient_norms, parameters
from ...train.classify import History, accuracy, fit_classifier
from ..pool import generator
from .data import TASKS, length_for, task_batch, vocab_size

CRITERION = 0.90  # accuracy of the window that counts as learnt (the measure: updates to 90%)


def updates_to_criterion(acc: Sequence[float], window: int, criterion: float = CRITERION
                         ) -> int | None:  # fmt: skip
    """u of the module docstring for the per-batch accuracies ``acc`` (scored before each
    update): the first n + 1 whose last ``window`` batches average >= ``criterion``; None
    when no window does (censored)."""
    if window < 1:
        raise ValueError(f"window={window}; it must be at least 1 batch")
    total = 0.0
    for n, a in enumerate(acc):
        total += a
        if n >= window:
            total -= acc[n - window]
        if n + 1 >= window and total / window >= criterion - 1e-12:
            return n + 1
    return None


@dataclass(frozen=True)
class Arm:
    """One training run: ``model`` on ``task`` at distance ``delta`` from scratch, ``seed``."""

    task: str
    model: str
    delta: int
    seed: int


@dataclass(frozen=True)
class Setting:
    """What every arm shares (from the experiment's config)."""

    deltas: tuple[int, ...]  # the grid, shortest first
    symbols: int
    dim: int
    heads: int
    layers: int
    cap: int  # updates at most
    window: int  # batches in the criterion's window
    batch_size: int
    lr: float
    clip: float
    eval_size: int
    grad_size: int
    threads: int

    @property
    def length(self) -> int:
        """T = LEAD + Δmax + 1 for every Δ: only the distance changes between arms."""
        return length_for(self.deltas[-1])

    @property
    def sizes(self) -> Sizes:
        """The same models at every Δ (same T: the CNN's depth, the position table)."""
        return Sizes(vocab_size(self.symbols), self.symbols, self.dim, self.length)


def train_batch(arm: Arm, setting: Setting, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Update ``step``'s batch, identical for every model at (task, Δ, seed)."""
    gen = generator(arm.seed, TASKS.index(arm.task), arm.delta, step)
    return task_batch(arm.task, arm.delta, setting.length, setting.batch_size, setting.symbols,
                      gen)  # fmt: skip


def eval_batch(task: str, delta: int, seed: int, size: int, setting: Setting
               ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """``size`` test sequences of ``task`` at ``delta`` (their own random stream)."""
    gen = generator(seed, 100 + TASKS.index(task), delta)
    return task_batch(task, delta, setting.length, size, setting.symbols, gen)


def probe(model: Any, task: str, delta: int, seed: int, setting: Setting) -> float:
    """Mean over ``grad_size`` test sequences of ‖∂ℓ/∂e_{t−Δ}‖ at distance ``delta`` (the
    answer), on a float64 copy of ``model`` (a recurrent gradient 200 steps back underflows
    float32 to exactly 0)."""
    double = copy.deepcopy(model).double()
    gen = generator(seed, 200 + TASKS.index(task), delta)
    x, y = task_batch(task, delta, setting.length, setting.grad_size, setting.symbols, gen)
    at = torch.full((len(x),), setting.length - 1 - delta)  # (G,)
    return float(input_gradient_norms(double, x, y, at).mean())  # x (G, T), y (G,)


def gradient_by_delta(model: Any, seed: int, setting: Setting) -> list[float]:
    """``probe`` on the marked task at every Δ of the grid: the gradient half of the claim."""
    return [probe(model, "marked", d, seed, setting) for d in setting.deltas]


def train_arm(arm: Arm, setting: Setting, init_probe: bool) -> dict[str, Any]:
    """Build ``arm.model`` (seeded: the same initial weights at every Δ and task, whether or
    not this process has fitted the widths before: ``width_of`` draws random numbers the
    first time, so it runs before the seed), optionally
    probe its gradients at initialisation, train it until the criterion or the cap, then
    score it on held-out sequences and probe the gradient at its own Δ."""
    torch.set_num_threads(setting.threads)
    width = width_of(arm.model, setting)  # before the seed: a cold cache builds models
    torch.manual_seed(arm.seed)
    model = build(arm.model, setting.sizes, width, setting.heads, setting.layers)
    out: dict[str, Any] = {"parameters": parameters(model)}
    if init_probe:
        out["grad_init"] = gradient_by_delta(model, arm.seed, setting)

    def met(h: History) -> bool:  # the latest window meets the criterion: stop
        w = setting.window
        return len(h.accuracy) >= w and updates_to_criterion(h.accuracy[-w:], w) is not None

    cpu = time.process_time()
    flush = torch.set_flush_denormal(True)  # subnormal floats cost 10x on CPU (RNN backward)
    try:
        hist = fit_classifier(model, lambda s: train_batch(arm, setting, s), setting.cap,
                              setting.lr, arm.seed, clip=setting.clip, until=met)  # fmt: skip
    finally:
        if flush:
            torch.set_flush_denormal(False)
    u = updates_to_criterion(hist.accuracy, setting.window)
    x, y = eval_batch(arm.task, arm.delta, arm.seed, setting.eval_size, setting)
    w = setting.window
    out.update({
        "updates": u if u is not None else setting.cap,
        "censored": u is None,
        "steps_run": hist.steps,
        "accuracy_end": accuracy(model, x, y),
        "curve": [round(sum(hist.accuracy[i : i + w]) / len(hist.accuracy[i : i + w]), 4)
                  for i in range(0, hist.steps, w)],
        "grad_trained": probe(model, arm.task, arm.delta, arm.seed, setting),
        "train_seconds": round(hist.seconds, 2),
        "cpu_seconds": round(time.process_time() - cpu, 2),  # training and scoring
    })  # fmt: skip
    return out


_WIDTHS: dict[tuple, dict[str, int]] = {}


def width_of(model: str, setting: Setting) -> int:
    """The model's width at the attention model's parameter count (cached per setting)."""
    from ...models.sequence_classifiers import budget_widths

    key = (setting.sizes, setting.heads, setting.layers)
    if key not in _WIDTHS:
        _WIDTHS[key] = budget_widths(setting.sizes, setting.heads, setting.layers)
    return _WIDTHS[key][model]


__all__ = [
    "CRITERION",
    "Arm",
    "Setting",
    "eval_batch",
    "gradient_by_delta",
    "probe",
    "train_arm",
    "train_batch",
    "updates_to_criterion",
    "width_of",
]
