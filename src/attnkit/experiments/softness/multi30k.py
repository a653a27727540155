"""The softness experiment's Multi30K setting: Deng et al. (2018)'s direction, De→En, on a
subset of Multi30K task 1 (Elliott et al. 2016) read from ``../shared/data/multi30k``
(``{train,val,test_2016_flickr}.{de,en}.gz``, raw text, line-aligned).

``write_subset`` copies the first ``multi30k · batch_size`` training pairs (one epoch =
``multi30k`` updates), the first ``valid_size`` of val and ``test_size`` of test_2016_flickr
into a folder as plain text; ``multi30k_data`` is the ``attnkit.fit`` data of that folder,
SentencePiece subwords (``multi30k_spm`` a language, 2,000 by default) learnt from the
training subset. Every seed
reads the same sentences: the seed only initialises. Absent data: ``write_subset`` raises
FileNotFoundError and the experiment skips the task with that message.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from ...train.config import DataConfig

SOURCE = Path("../shared/data/multi30k")  # from the project root, as the tests read it
SPLITS = (("train", "train"), ("val", "val"), ("test_2016_flickr", "test"))


def sizes(cfg: Any) -> dict[str, int]:
    """Lines per split: training pairs = updates x batch size."""
    return {"train": cfg.multi30k * cfg.batch_size, "val": cfg.valid_size,
            "test": cfg.test_size}  # fmt: skip


def write_subset(cfg: Any, source: Path = SOURCE) -> Path:
    """Write the subset that ``multi30k_data`` reads into ``cfg.multi30k_dir`` and return it;
    FileNotFoundError when ``source`` is absent, ValueError when it is shorter than asked."""
    if not source.is_dir():
        raise FileNotFoundError(
            f"{source} not found: the Multi30K setting reads the shared data beside the "
            "project root (scripts/multi30k.sh fetches it); run from the root of a checkout "
            "that has it, or leave --multi30k at 0"
        )
    folder = Path(cfg.multi30k_dir)
    folder.mkdir(parents=True, exist_ok=True)
    n = sizes(cfg)
    for split, name in SPLITS:
        for lang in ("de", "en"):
            with gzip.open(source / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                lines = [line for _, line in zip(range(n[name]), f, strict=False)]
            if len(lines) < n[name]:
                raise ValueError(
                    f"{source / f'{split}.{lang}.gz'} has {len(lines)} lines, fewer than the "
                    f"{n[name]} asked for; lower --multi30k (updates x --batch-size pairs), "
                    "--valid-size or --test-size"
                )
            (folder / f"{name}.{lang}").write_text("".join(lines), encoding="utf-8")
    return folder


def multi30k_data(cfg: Any) -> DataConfig:
    """De→En from the subset in ``cfg.multi30k_dir`` (written by ``write_subset``)."""
    f = {f"{name}.{lang}": str(Path(cfg.multi30k_dir) / f"{name}.{lang}")
         for _, name in SPLITS for lang in ("de", "en")}  # fmt: skip
    return DataConfig(train_src=f["train.de"], train_tgt=f["train.en"],
                      valid_src=f["val.de"], valid_tgt=f["val.en"],
                      test_src=f["test.de"], test_tgt=f["test.en"],
                      tokenise="spm", spm_vocab=cfg.multi30k_spm, task_seed=cfg.seed)  # fmt: skip


__all__ = ["SOURCE", "multi30k_data", "sizes", "write_subset"]
