"""The training runs of the context experiment: Transformer-XL and the vanilla Transformer
LM, at equal parameters, on the same generated text and batches, each trained to a validation
plateau by the same rule (early stopping, the same patience and cap), for each seed."""

from __future__ import annotations

from pathlib import Path

from ...train.config import FitConfig
from ..pool import lm_run
from .config import ContextConfig

ARMS = ("transformer-xl", "transformer-lm")


def fit_config(cfg: ContextConfig, arm: str, seed: int, out: Path) -> FitConfig:
    """One run: ``arm`` on seed ``seed``'s text in batches of ``cfg.batch_size`` streams,
    stopped after ``cfg.patience`` epochs without a lower valid loss, at most ``cfg.epochs``;
    checkpoints in ``out/ARM-sSEED`` (``best/``: the lowest valid loss)."""
    memory = {"memory": cfg.memory} if arm == "transformer-xl" else {}
    return lm_run(cfg, arm, seed, out / f"{arm}-s{seed}", patience=cfg.patience, **memory)


def make_jobs(cfg: ContextConfig, out: Path) -> dict[str, FitConfig]:
    """Every (arm, seed) run, named ``ARM-sSEED``."""
    return {f"{arm}-s{seed}": fit_config(cfg, arm, seed, out)
            for seed in cfg.seed_list for arm in ARMS}  # fmt: skip


__all__ = ["ARMS", "fit_config", "make_jobs"]
