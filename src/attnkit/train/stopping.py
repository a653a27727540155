"""Stopping rules: each looks at the run so far and names the reason to stop, or says None.

    within_step(cfg, elapsed)         after every update: the time budget
    after_epoch(cfg, progress)        after validation: epochs done, early stopping (no better
                                      valid loss for ``patience`` epochs), target exact match

The reasons are the strings reported in ``TrainResult.stopped`` and the demo's summary.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import TrainConfig

EPOCHS = "epochs"
TIME_LIMIT = "time limit"
EARLY_STOPPING = "early stopping"
TARGET_EXACT = "target exact match"
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class EpochProgress:
    """epochs_done: completed epochs; bad_epochs: epochs in a row without a better valid loss;
    exact: valid exact match of this epoch, or None when nothing was decoded."""

    epochs_done: int
    bad_epochs: int
    exact: float | None


def within_step(cfg: TrainConfig, elapsed: float) -> str | None:
    """Stop after the update that crosses ``time_limit`` seconds (0 = no limit)."""
    return TIME_LIMIT if cfg.time_limit and elapsed > cfg.time_limit else None


def after_epoch(cfg: TrainConfig, p: EpochProgress) -> str | None:
    """The first rule that fires, in this order: early stopping, target exact match, epochs."""
    if cfg.patience and p.bad_epochs >= cfg.patience:
        return EARLY_STOPPING
    if cfg.target_exact and p.exact is not None and p.exact >= cfg.target_exact:
        return TARGET_EXACT
    if p.epochs_done >= cfg.epochs:
        return EPOCHS
    return None


__all__ = [
    "EARLY_STOPPING",
    "EPOCHS",
    "INTERRUPTED",
    "TARGET_EXACT",
    "TIME_LIMIT",
    "EpochProgress",
    "after_epoch",
    "within_step",
]
