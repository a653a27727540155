"""The linear experiment's training runs: one ``transformer-lm`` per (arm, seed)."""

from __future__ import annotations

from pathlib import Path

from ...train.config import FitConfig
from ..pool import lm_run
from .config import LinearConfig


def fit_config(cfg: LinearConfig, arm: str, seed: int, out: Path) -> FitConfig:
    """``transformer-lm`` with ``attention=arm`` (softmax, linear or performer; sinusoid
    positions, the causal alignment), early stopping after ``cfg.patience`` epochs without a
    lower valid loss, at most ``cfg.epochs`` epochs, checkpoints in ``out/ARM-sSEED``
    (``best``: the lowest valid loss, what is measured)."""
    return lm_run(cfg, "transformer-lm", seed, out / f"{arm}-s{seed}", patience=cfg.patience,
                  match_xl=False, attention=arm)  # fmt: skip


def make_jobs(cfg: LinearConfig, out: Path) -> dict[str, FitConfig]:
    """Every (arm, seed) run, named ``ARM-sSEED``."""
    return {f"{arm}-s{seed}": fit_config(cfg, arm, seed, out)
            for seed in cfg.seed_list for arm in cfg.arm_list}  # fmt: skip


__all__ = ["fit_config", "make_jobs"]
