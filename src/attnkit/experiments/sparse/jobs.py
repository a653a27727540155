"""The training runs of the sparse experiment: one transformer-lm per alignment (dense,
strided, fixed, sliding), the same sizes, parameters, text and batches, per seed, each
trained to a validation plateau by the same rule (early stopping, the same patience and cap
of epochs for every arm)."""

from __future__ import annotations

from pathlib import Path

from ...registry import STRIDED
from ...train.config import FitConfig
from ..pool import lm_run
from .config import ARMS, SparseConfig


def fit_config(cfg: SparseConfig, arm: str, seed: int, out: Path) -> FitConfig:
    """``transformer-lm`` with the arm's alignment (stride / radius l = round(√n)),
    ``cfg.position`` (the same for every arm), early stopping after ``cfg.patience`` epochs
    without a lower valid loss, at most ``cfg.epochs`` epochs, checkpoints in
    ``out/ARM-sSEED`` (``best``: the lowest valid loss, what is measured)."""
    size = "stride" if ARMS[arm] in STRIDED else "window"  # a pattern's l, a window's radius
    return lm_run(cfg, "transformer-lm", seed, out / f"{arm}-s{seed}", patience=cfg.patience,
                  asks=cfg.asks, match_xl=False, align=ARMS[arm], position=cfg.position,
                  **{size: 0 if arm == "dense" else cfg.stride},
                  **({"summary": cfg.summary} if arm == "fixed" else {}))  # fmt: skip


def make_jobs(cfg: SparseConfig, out: Path) -> dict[str, FitConfig]:
    """Every (arm, seed) run, named ``ARM-sSEED``."""
    return {f"{arm}-s{seed}": fit_config(cfg, arm, seed, out)
            for seed in cfg.seed_list for arm in cfg.arm_list}  # fmt: skip


__all__ = ["fit_config", "make_jobs"]
