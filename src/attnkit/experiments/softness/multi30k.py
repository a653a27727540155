"""The softness experiment's Multi30K setting: Deng et al. (2018)'s direction, De→En, on a
subset of Multi30K task 1 (Elliott et al. 2016) read from ``../shared/data/multi30k``
(``pool.write_multi30k``).

``write_subset`` copies the first ``multi30k · batch_size`` training pairs with at most
``multi30k_max_words`` words a side (one epoch = ``multi30k`` updates), and the first
``multi30k_valid`` of val and ``multi30k_test`` of test_2016_flickr under the same limit, into a
folder as plain text; ``multi30k_data`` is the ``attnkit.fit`` data of that folder,
SentencePiece subwords (``multi30k_spm`` a language, 2,000 by default) learnt from the training
subset. The length limit is Deng's too (IWSLT sentences of at most 50 words) at this CPU's
scale: the exact and variational rows enumerate every source position at every target step, so
an update costs in proportion to source × target length. Every seed reads the same sentences:
the seed only initialises. Absent data: ``write_subset`` raises FileNotFoundError and the
experiment skips the task with that message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...train.config import DataConfig
from ..pool import MULTI30K, MULTI30K_SPLITS, write_multi30k

SOURCE = MULTI30K
"""Where the shared data sits, from the project root."""


def sizes(cfg: Any) -> dict[str, int]:
    """Pairs per split: training pairs = updates per epoch x batch size."""
    return {"train": cfg.multi30k * cfg.batch_size, "val": cfg.multi30k_valid,
            "test": cfg.multi30k_test}  # fmt: skip


def write_subset(cfg: Any, source: Path = SOURCE) -> dict[str, int]:
    """Write the subset that ``multi30k_data`` reads into ``cfg.multi30k_dir``; returns the
    pairs kept and read per split. FileNotFoundError when ``source`` is absent, ValueError
    when it has fewer pairs within the length limit than asked."""
    flags = ("--multi30k (updates x --batch-size pairs), --multi30k-valid, --multi30k-test "
             "or raise --multi30k-max-words")
    return write_multi30k(Path(cfg.multi30k_dir), sizes(cfg), source=source, flags=flags,
                             max_words=cfg.multi30k_max_words)  # fmt: skip


def multi30k_data(cfg: Any) -> DataConfig:
    """De→En from the subset in ``cfg.multi30k_dir`` (written by ``write_subset``)."""
    f = {f"{name}.{lang}": str(Path(cfg.multi30k_dir) / f"{name}.{lang}")
         for name in MULTI30K_SPLITS for lang in ("de", "en")}  # fmt: skip
    return DataConfig(train_src=f["train.de"], train_tgt=f["train.en"],
                      valid_src=f["val.de"], valid_tgt=f["val.en"],
                      test_src=f["test.de"], test_tgt=f["test.en"],
                      tokenise="spm", spm_vocab=cfg.multi30k_spm, task_seed=cfg.seed)  # fmt: skip


__all__ = ["SOURCE", "multi30k_data", "sizes", "write_subset"]
