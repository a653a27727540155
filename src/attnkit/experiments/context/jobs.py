"""The training runs of the context experiment: Transformer-XL and the vanilla Transformer
LM, at equal parameters, on the same generated text, batches and updates, for each seed."""

from __future__ import annotations

from pathlib import Path

from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from .config import ContextConfig

ARMS = ("transformer-xl", "transformer-lm")


def data_config(cfg: ContextConfig, seed: int) -> DataConfig:
    """The generated text of ``seed`` (data/lm_text.py), cut into segments of L."""
    return DataConfig(task="lm", task_seed=seed, train_size=cfg.train_size,
                      valid_size=cfg.valid_size, test_size=cfg.test_size,
                      segment=cfg.segment)  # fmt: skip


def fit_config(cfg: ContextConfig, arm: str, seed: int, out: Path) -> FitConfig:
    """One run: ``arm`` on seed ``seed``'s text, ``cfg.epochs`` epochs of ``cfg.batch_size``
    streams, no early stopping, checkpoints in ``out/ARM-sSEED``."""
    sizes = dict(dim=cfg.dim, heads=cfg.heads, layers=cfg.layers, ff=cfg.ff, dropout=0.0)
    if arm == "transformer-xl":
        sizes["memory"] = cfg.memory
    return FitConfig(
        data_config(cfg, seed),
        ModelConfig(arm, None, sizes),
        TrainConfig(epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, patience=0,
                    seed=seed, valid_decode=0, progress=False),  # fmt: skip
        out=out / f"{arm}-s{seed}",
        overwrite=True,
        threads=cfg.threads,
    )


def make_jobs(cfg: ContextConfig, out: Path) -> dict[str, FitConfig]:
    """Every (arm, seed) run, named ``ARM-sSEED``."""
    return {f"{arm}-s{seed}": fit_config(cfg, arm, seed, out)
            for seed in cfg.seed_list for arm in ARMS}  # fmt: skip


__all__ = ["ARMS", "data_config", "fit_config", "make_jobs"]
