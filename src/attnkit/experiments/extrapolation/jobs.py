"""The training runs of the extrapolation experiment: one vanilla Transformer LM per
position method, the same sizes, text, batches and updates, for each seed."""

from __future__ import annotations

from pathlib import Path

from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from .config import ExtrapolationConfig


def data_config(cfg: ExtrapolationConfig, seed: int) -> DataConfig:
    """The generated text of ``seed`` (data/lm_text.py), cut into segments of L."""
    return DataConfig(task="lm", task_seed=seed, train_size=cfg.train_size,
                      valid_size=cfg.valid_size, test_size=cfg.test_size,
                      segment=cfg.segment)  # fmt: skip


def fit_config(cfg: ExtrapolationConfig, arm: str, seed: int, out: Path) -> FitConfig:
    """``transformer-lm`` with position ``arm`` on seed ``seed``'s text, trained at length L
    (learned positions: max_len L, so no position beyond training exists), ``cfg.epochs``
    epochs, no early stopping, checkpoints in ``out/ARM-sSEED``."""
    sizes = dict(dim=cfg.dim, heads=cfg.heads, layers=cfg.layers, ff=cfg.ff, dropout=0.0,
                 position=arm, max_len=cfg.segment, match_xl=False)  # fmt: skip
    return FitConfig(
        data_config(cfg, seed),
        ModelConfig("transformer-lm", None, sizes),
        TrainConfig(epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, patience=0,
                    seed=seed, valid_decode=0, progress=False),  # fmt: skip
        out=out / f"{arm}-s{seed}",
        overwrite=True,
        threads=cfg.threads,
    )


def make_jobs(cfg: ExtrapolationConfig, out: Path) -> dict[str, FitConfig]:
    """Every (arm, seed) run, named ``ARM-sSEED``."""
    return {f"{arm}-s{seed}": fit_config(cfg, arm, seed, out)
            for seed in cfg.seed_list for arm in cfg.arm_list}  # fmt: skip


__all__ = ["data_config", "fit_config", "make_jobs"]
