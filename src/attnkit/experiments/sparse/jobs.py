"""The training runs of the sparse experiment: one transformer-lm per alignment (dense,
strided, fixed, sliding), the same sizes, parameters, text, batches and updates, per seed."""

from __future__ import annotations

from pathlib import Path

from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from .config import ARMS, SparseConfig


def data_config(cfg: SparseConfig, seed: int) -> DataConfig:
    """The generated text of ``seed`` (data/lm_text.py), cut into segments of n."""
    return DataConfig(task="lm", task_seed=seed, train_size=cfg.train_size,
                      valid_size=cfg.valid_size, test_size=cfg.test_size,
                      segment=cfg.segment)  # fmt: skip


def fit_config(cfg: SparseConfig, arm: str, seed: int, out: Path) -> FitConfig:
    """``transformer-lm`` with the arm's alignment (stride / radius l = round(√n)), sinusoid
    positions, ``cfg.epochs`` epochs, no early stopping, checkpoints in ``out/ARM-sSEED``."""
    sizes = dict(dim=cfg.dim, heads=cfg.heads, layers=cfg.layers, ff=cfg.ff, dropout=0.0,
                 match_xl=False, align=ARMS[arm],
                 window=0 if arm == "dense" else cfg.stride)  # fmt: skip
    return FitConfig(
        data_config(cfg, seed),
        ModelConfig("transformer-lm", None, sizes),
        TrainConfig(epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, patience=0,
                    seed=seed, valid_decode=0, progress=False),  # fmt: skip
        out=out / f"{arm}-s{seed}",
        overwrite=True,
        threads=cfg.threads,
    )


def make_jobs(cfg: SparseConfig, out: Path) -> dict[str, FitConfig]:
    """Every (arm, seed) run, named ``ARM-sSEED``."""
    return {f"{arm}-s{seed}": fit_config(cfg, arm, seed, out)
            for seed in cfg.seed_list for arm in cfg.arm_list}  # fmt: skip


__all__ = ["data_config", "fit_config", "make_jobs"]
