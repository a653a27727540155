"""The models of the heads experiment: one ``attnkit.fit`` config per (setting, seed, h), and
the data of each setting (toy-ko generated; a subset of Multi30K read from
``../shared/data/multi30k``). Every model is trained to a validation plateau: early stopping
on the validation loss with the same patience and the same cap of epochs for every arm.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from ..base import Say
from ..pool import MULTI30K, write_multi30k
from .config import HeadsConfig


def fit_config(cfg: HeadsConfig, heads: int, seed: int, data: DataConfig, out: Path) -> FitConfig:
    """The ``attnkit.fit`` config of one model; only ``heads`` (and so d_k = dim / heads)
    differs between the models of one (setting, seed). Early stopping after ``patience``
    epochs without a lower valid loss, at most ``max_epochs``; only the valid loss is
    computed each epoch (no decoding)."""
    options = dict(
        dim=cfg.dim,
        heads=heads,
        enc_layers=cfg.layers,
        dec_layers=cfg.layers,
        ff=cfg.ff,
        dropout=cfg.dropout,
    )
    return FitConfig(
        data=data,
        model=ModelConfig("transformer", "small", options),
        train=TrainConfig(
            epochs=cfg.max_epochs,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            patience=cfg.patience,
            seed=seed,
            label_smoothing=cfg.label_smoothing,
            valid_decode=0,
            progress=False,
        ),
        out=out,
        overwrite=True,  # the experiment's own folder: a re-run replaces its models
        threads=cfg.threads,
    )


def toy_ko_data(cfg: HeadsConfig, seed: int, pairs: int | None = None) -> DataConfig:
    """``pairs`` generated training pairs (default: the first of ``toy_train``; each seed
    draws other sentences), ``valid_size`` and ``test_size`` held out."""
    return DataConfig(
        task="toy-ko",
        task_seed=seed,
        train_size=cfg.toy_sizes[0] if pairs is None else pairs,
        valid_size=cfg.valid_size,
        test_size=cfg.test_size,
    )


def multi30k_data(cfg: HeadsConfig, seed: int, folder: Path) -> DataConfig:
    """The subset written to ``folder`` by ``multi30k_subset``; SentencePiece subwords
    (``spm_vocab`` a language) learnt from the training subset. The seed only initialises and
    orders the batches: every seed reads the same sentences."""
    f = {
        k: str(folder / k)
        for k in ("train.en", "train.de", "val.en", "val.de", "test.en", "test.de")
    }
    return DataConfig(
        train_src=f["train.en"],
        train_tgt=f["train.de"],
        valid_src=f["val.en"],
        valid_tgt=f["val.de"],
        test_src=f["test.en"],
        test_tgt=f["test.de"],
        tokenise="spm",
        spm_vocab=cfg.spm_vocab,
        task_seed=seed,
    )


def multi30k_subset(cfg: HeadsConfig, folder: Path, source: Path = MULTI30K) -> Path:
    """Write the first ``multi30k`` training pairs, ``valid_size`` of val and ``test_size`` of
    test_2016_flickr (plain text, one sentence a line) into ``folder``; FileNotFoundError
    when ``source`` is absent, ValueError when it has fewer lines than asked for."""
    counts = {"train": cfg.multi30k, "val": cfg.valid_size, "test": cfg.test_size}
    write_multi30k(folder, counts, source=source, flags="--multi30k, --valid-size or --test-size")
    return folder


@dataclass(frozen=True)
class Job:
    """One model to train and score."""

    task: str  # the setting: toy-ko or multi30k
    heads: int
    seed: int
    cap: int  # updates at the cap of epochs (for the progress lines)
    config: FitConfig


def settings(
    cfg: HeadsConfig, out: Path, say: Say
) -> dict[str, tuple[int, Callable[[int], DataConfig]]]:
    """Each setting of ``cfg.tasks``: its training pairs and its data config per seed; one
    toy-ko setting per size of ``toy_train`` and ``toy_report`` (``toy-ko``, or ``toy-ko-N``
    when there are several); Multi30K only when asked for and present (else said, and skipped)."""
    tasks: dict[str, tuple[int, Callable[[int], DataConfig]]] = {}
    if "toy-ko" in cfg.task_list:
        sizes = cfg.toy_sizes + cfg.report_sizes
        for n in sorted(sizes):
            name = "toy-ko" if len(sizes) == 1 else f"toy-ko-{n}"
            tasks[name] = (n, partial(toy_ko_data, cfg, pairs=n))
    if cfg.multi30k and "multi30k" in cfg.task_list:
        try:
            folder = multi30k_subset(cfg, out / "multi30k-data", MULTI30K)
            tasks["multi30k"] = (cfg.multi30k, lambda s: multi30k_data(cfg, s, folder))
        except FileNotFoundError as err:
            say(f"skipping Multi30K: {err}")
    if not tasks:
        raise ValueError("nothing to run: Multi30K is absent and --tasks names nothing else")
    return tasks


def make_jobs(cfg: HeadsConfig, out: Path, say: Say) -> dict[str, Job]:
    """Every (setting, seed, heads) model, named ``TASK-hH-sSEED`` (also its folder in
    ``out``)."""
    named = {}
    for task, (pairs, data) in settings(cfg, out, say).items():
        cap = cfg.max_epochs * math.ceil(pairs / cfg.batch_size)
        for seed in cfg.seed_list:
            for h in cfg.head_counts:
                name = f"{task}-h{h}-s{seed}"
                named[name] = Job(
                    task, h, seed, cap, fit_config(cfg, h, seed, data(seed), out / name)
                )
    return named


__all__ = [
    "MULTI30K",
    "Job",
    "fit_config",
    "make_jobs",
    "multi30k_data",
    "multi30k_subset",
    "settings",
    "toy_ko_data",
]
