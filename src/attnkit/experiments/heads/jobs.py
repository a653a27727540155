"""The models of the heads experiment (heads.py): one ``attnkit.fit`` config per (task, seed,
h), and the data of each task (toy-ko generated here; a subset of Multi30K read from
``../shared/data/multi30k``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from ..base import Say
from .config import HeadsConfig

MULTI30K = Path("../shared/data/multi30k")  # from the project root, as the tests read it


def fit_config(
    cfg: HeadsConfig, heads: int, seed: int, data: DataConfig, steps: int, out: Path
) -> FitConfig:
    """The ``attnkit.fit`` config of one model; only ``heads`` differs between the models of
    one seed. One epoch of ``steps · batch_size`` pairs = exactly ``steps`` updates."""
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
            epochs=1,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            patience=0,
            seed=seed,
            save_every=max(steps // 10, 1),
            valid_decode=0,
            progress=False,
        ),
        out=out,
        overwrite=True,  # the experiment's own folder: a re-run replaces its models
        threads=cfg.threads,
    )


def toy_ko_data(cfg: HeadsConfig, seed: int) -> DataConfig:
    return DataConfig(
        task="toy-ko",
        task_seed=seed,
        train_size=cfg.steps * cfg.batch_size,
        valid_size=cfg.valid_size,
        test_size=cfg.test_size,
    )


def multi30k_data(cfg: HeadsConfig, seed: int, folder: Path) -> DataConfig:
    """The first ``multi30k · batch_size`` training pairs (one epoch = ``multi30k`` updates),
    the first ``valid_size`` of val and ``test_size`` of test_2016_flickr (written to
    ``folder`` by ``multi30k_subset``); SentencePiece subwords (2,000 a language) learnt from
    the training subset. The seed only initialises: every seed reads the same sentences."""
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
        spm_vocab=2000,
        task_seed=seed,
    )


def multi30k_subset(cfg: HeadsConfig, folder: Path, source: Path = MULTI30K) -> Path:
    """Write the subset of Multi30K that ``multi30k_data`` reads (plain text, one sentence a
    line) into ``folder``; FileNotFoundError when ``source`` is absent, ValueError when it
    has fewer lines than asked for."""
    import gzip

    if not source.is_dir():
        raise FileNotFoundError(
            f"{source} not found (the shared data sits beside the project "
            "root; run from the root of a checkout that has it)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    for split, name, n in (
        ("train", "train", cfg.multi30k * cfg.batch_size),
        ("val", "val", cfg.valid_size),
        ("test_2016_flickr", "test", cfg.test_size),
    ):
        for lang in ("en", "de"):
            with gzip.open(source / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                lines = [line for _, line in zip(range(n), f, strict=False)]
            if len(lines) < n:
                raise ValueError(
                    f"{source / f'{split}.{lang}.gz'} has {len(lines)} lines, fewer than the "
                    f"{n} asked for; lower --multi30k (updates x --batch-size pairs), "
                    "--valid-size or --test-size"
                )
            (folder / f"{name}.{lang}").write_text("".join(lines), encoding="utf-8")
    return folder


@dataclass(frozen=True)
class Job:
    """One model to train and score."""

    task: str
    heads: int
    seed: int
    steps: int  # updates
    config: FitConfig


def make_jobs(cfg: HeadsConfig, out: Path, say: Say) -> dict[str, Job]:
    """Every (task, seed, heads) model, named ``TASK-hH-sSEED`` (also its folder in ``out``)."""
    tasks: dict[str, tuple[int, Any]] = {"toy-ko": (cfg.steps, lambda s: toy_ko_data(cfg, s))}
    if cfg.multi30k:
        try:
            folder = multi30k_subset(cfg, out / "multi30k-data")
            tasks["multi30k"] = (cfg.multi30k, lambda s: multi30k_data(cfg, s, folder))
        except FileNotFoundError as err:
            say(f"skipping Multi30K: {err}")
    named = {}
    for task, (steps, data) in tasks.items():
        for seed in cfg.seed_list:
            for h in cfg.head_counts:
                name = f"{task}-h{h}-s{seed}"
                config = fit_config(cfg, h, seed, data(seed), steps, out / name)
                named[name] = Job(task, h, seed, steps, config)
    return named


__all__ = [
    "MULTI30K",
    "Job",
    "fit_config",
    "make_jobs",
    "multi30k_data",
    "multi30k_subset",
    "toy_ko_data",
]
