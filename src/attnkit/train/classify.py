"""One small trainer for classifiers: ``fit_classifier(model, make_batch, steps, lr, seed)``.

``attnkit.fit`` trains seq2seq models from a data config (loop.py); experiments whose models
map a batch of inputs to class logits (long-range recall, inductive bias on digits, documents)
train here instead, so that models compared in one experiment share *the same updates*: the
same batches (``make_batch(step)`` is a pure function of the step), the same optimiser
(Adam, Kingma & Ba 2015), the same learning rate, the same gradient clipping and the same
number of steps. Both loops share their core (updates.py): the update and the loop over
updates; they differ in their batches and loss.

    loss = (1/B) Σ_b −log softmax(model(x))_{b, y_b}          (cross-entropy)
    g ← clip(∇loss, ‖g‖₂ ≤ clip);  θ ← Adam(θ, g, lr)

Legend: B batch, C classes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .updates import run_updates, update

Batch = tuple[Tensor, Tensor]  # inputs (B, ...), integer labels (B,)


@dataclass
class History:
    """What one ``fit_classifier`` call did: the loss and accuracy of every update's batch
    (measured before that update), the number of steps and the wall-clock seconds."""

    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0


def fit_classifier(
    model: nn.Module,
    make_batch: Callable[[int], Batch],
    steps: int,
    lr: float,
    seed: int,
    clip: float = 1.0,
    log: Callable[[str], None] | None = None,
    log_every: int = 50,
) -> History:
    """Train ``model`` (inputs (B, ...) -> logits (B, C)) for ``steps`` Adam updates on
    ``make_batch(0), make_batch(1), ...``; returns the per-step history.

    Deterministic: ``seed`` seeds torch before the first update (dropout and anything else
    random inside the model), so the same model weights, batches and seed give the same
    trained weights. ``clip`` bounds the global gradient norm (0 turns clipping off).
    """
    if steps < 0:
        raise ValueError(f"steps={steps}; pass 0 or more updates")
    if not lr > 0:
        raise ValueError(f"lr={lr}; the learning rate must be positive")
    if clip < 0:
        raise ValueError(f"clip={clip}; pass a positive gradient-norm bound, or 0 for none")
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history = History()
    t0 = time.perf_counter()
    model.train()

    def update_on(step: int, batch: Batch) -> float:
        x, y = batch  # (B, ...), (B,)
        logits = model(x)  # (B, C)
        loss = F.cross_entropy(logits, y)
        update(model, opt, loss, clip)
        history.accuracy.append(float((logits.argmax(-1) == y).float().mean()))
        return float(loss.detach())

    def after(step: int, loss: float, batch: Batch) -> None:
        history.loss.append(loss)
        if log is not None and (step + 1) % log_every == 0:
            recent = history.loss[-log_every:]
            log(f"step {step + 1}/{steps}  loss {sum(recent) / len(recent):.4f}")

    run_updates(0, steps, make_batch, update_on, after)
    model.eval()
    history.steps = steps
    history.seconds = time.perf_counter() - t0
    return history


@torch.no_grad()
def accuracy(model: nn.Module, x: Tensor, y: Tensor) -> float:
    """Fraction of ``x`` (B, ...) whose arg-max logit is the label ``y`` (B,), in eval mode."""
    was = model.training
    model.eval()
    hit = float((model(x).argmax(-1) == y).float().mean())  # model(x): (B, C)
    model.train(was)
    return hit


__all__ = ["Batch", "History", "accuracy", "fit_classifier"]
