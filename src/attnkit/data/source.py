"""Where a run's data comes from, as a JSON-able spec stored in the checkpoint, so that
``attnkit evaluate`` can rebuild the same held-out split.

    {"task": "toy-ko", "task_seed": 0, ...}            a generated task
    {"train_tsv": "kor.txt", "tokenise": "word", ...}  a corpus file, split by seed
    {"train_src": "a.en", "train_tgt": "a.ko", ...}   line-aligned files
"""

from __future__ import annotations

import sys
from typing import Any

from .corpus import corpus_splits, read_parallel, read_tsv
from .example import Splits
from .tasks import JOIN, load_task

CHAR_TASKS = {name for name, j in JOIN.items() if j == ""}


def tokeniser_of(spec: dict[str, Any]) -> str:
    if "task" in spec:
        return "char" if spec["task"] in CHAR_TASKS else "word"
    return str(spec.get("tokenise", "word"))


def load_spec(spec: dict[str, Any], *, quiet: bool = False) -> Splits:
    if spec.get("task"):
        return load_task(
            spec["task"],
            seed=spec.get("task_seed", 0),
            **{
                k: spec.get(k)
                for k in ("train_size", "valid_size", "test_size", "min_len", "max_len")
            },
        )
    common = dict(
        tokeniser=tokeniser_of(spec),
        max_len=spec.get("max_len") or 0,
        strict=bool(spec.get("strict")),
    )
    if spec.get("train_tsv"):
        examples, report = read_tsv(spec["train_tsv"], **common)  # type: ignore[arg-type]
    elif spec.get("train_src") and spec.get("train_tgt"):
        examples, report = read_parallel(spec["train_src"], spec["train_tgt"], **common)  # type: ignore[arg-type]
    else:
        raise ValueError(
            "say what to train on: --task NAME, --train-tsv FILE, or "
            "--train-src FILE --train-tgt FILE"
        )
    if not quiet:
        print(f"corpus: {report.summary()}", file=sys.stderr)
    return corpus_splits(
        examples,
        valid=spec.get("valid_fraction", 0.05),
        test=spec.get("test_fraction", 0.05),
        seed=spec.get("split_seed", 0),
    )


__all__ = ["load_spec", "tokeniser_of"]
