"""The core both training loops share (loop.py for task families, classify.py for the
experiments' classifiers): they differ in their batches and their loss, not in this.

    update(model, opt, loss, clip)      one update: zero the gradients, backward, clip, step
    run_updates(first, last, ...)       updates first .. last - 1: a batch, an update on it,
                                        then what the caller does after each (progress,
                                        checkpoints, a reason to stop early)

    g ← ∇loss;  g ← g · min(1, clip / ‖g‖₂) (clip > 0);  θ ← opt(θ, g)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from torch import Tensor, nn
from torch.optim import Optimizer

B = TypeVar("B")


def update(model: nn.Module, opt: Optimizer, loss: Tensor, clip: float) -> None:
    """One optimiser update on ``loss``: gradients from zero (``set_to_none``), backward, the
    global gradient norm of ``model``'s parameters clipped to ``clip`` (0 = no clipping), then
    ``opt.step()``."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if clip > 0:
        nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()


def run_updates(
    first: int,
    last: int,
    batch_at: Callable[[int], B],
    update_on: Callable[[int, B], float],
    after: Callable[[int, float, B], str | None],
) -> str | None:
    """Updates ``first`` .. ``last - 1``: for each index i, ``batch_at(i)``, then
    ``update_on(i, batch)`` (one update; returns the batch's loss, a float on the host), then
    ``after(i, loss, batch)``, which returns a reason to stop early or None. Returns the
    reason, or None when the updates ran to ``last``."""
    for i in range(first, last):
        batch = batch_at(i)
        loss = update_on(i, batch)
        reason = after(i, loss, batch)
        if reason is not None:
            return reason
    return None


__all__ = ["run_updates", "update"]
