"""The training runs of the extrapolation experiment: one vanilla Transformer LM per
position method, the same sizes, text, batches and updates, for each seed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ...train.config import FitConfig
from ..pool import lm_run
from .config import ExtrapolationConfig


def fit_config(cfg: ExtrapolationConfig, arm: str, seed: int, out: Path, *,
               plateau: bool = False) -> FitConfig:  # fmt: skip
    """``transformer-lm`` with position ``arm`` on seed ``seed``'s text, trained at length L
    (learned positions: max_len L, so no position beyond training exists), checkpoints in
    ``out/ARM-sSEED``: with ``plateau`` (the positions part) to a validation plateau (early
    stopping after ``cfg.patience`` epochs without a lower valid loss, at most ``cfg.cap``
    epochs); without (the RoPE part's base model), ``cfg.epochs`` epochs, no early stopping."""
    run_cfg, patience = (replace(cfg, epochs=cfg.cap), cfg.patience) if plateau else (cfg, 0)
    return lm_run(run_cfg, "transformer-lm", seed, out / f"{arm}-s{seed}", patience=patience,
                  position=arm, max_len=cfg.segment, match_xl=False)  # fmt: skip


def make_jobs(cfg: ExtrapolationConfig, out: Path) -> dict[str, FitConfig]:
    """Every (arm, seed) run, named ``ARM-sSEED``."""
    return {f"{arm}-s{seed}": fit_config(cfg, arm, seed, out, plateau=True)
            for seed in cfg.seed_list for arm in cfg.arm_list}  # fmt: skip


__all__ = ["fit_config", "make_jobs"]
