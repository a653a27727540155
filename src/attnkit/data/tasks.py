"""Named tasks that generate their own data: ``load_task("toy-ko", seed=0)`` -> Splits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import coref, dates, digit_captions, digit_qa, docs, series, synthetic, toy_ko
from .example import Splits, split
from .lm_text import GENERATED_SIZES, lm_task

DEFAULT_SIZES = {
    "toy-ko": (8000, 400, 500),
    "dates": (10000, 500, 500),
    "copy": (5000, 300, 300),
    "reverse": (5000, 300, 300),
    "sort": (5000, 300, 300),
    "coref": (6000, 300, 1000),  # test: held-out (frame, nouns, adjective) combinations
    "series": (8000, 500, 1000),
    "docs": (4000, 400, 400),
    "digit-qa": (6000, 500, 500),  # valid/test: held-out (template, digit count) combinations
    "digit-captions": (6000, 300, 500),
    "digit-captions-pos": (6000, 300, 500),
    "lm": GENERATED_SIZES,  # characters of generated text (or --train-text FILE, lm_text.py)
}
# how a task's tokens join into text ("" = characters)
JOIN = {"dates": ""}


def generated(generate: Callable[..., list[Any]]) -> Callable[..., Splits]:
    """The task of ``generate(n, seed)``'s distinct examples, split with ``seed + 1``."""

    def make(sizes: tuple[int, int, int], seed: int, **_: int) -> Splits:
        return split(generate(sum(sizes), seed), sizes, seed + 1)

    return make


def coref_task(sizes: tuple[int, int, int], seed: int, **_: int) -> Splits:
    return coref.splits(sizes, seed)


def algorithmic(name: str) -> Callable[..., Splits]:
    def make(sizes: tuple[int, int, int], seed: int, **lengths: int) -> Splits:
        return split(synthetic.generate(name, sum(sizes), seed, **lengths), sizes, seed + 1)

    return make


TASKS: dict[str, Callable[..., Splits]] = {
    "toy-ko": generated(toy_ko.generate),
    "dates": generated(dates.generate),
    **{name: algorithmic(name) for name in ("copy", "reverse", "sort")},
    "coref": coref_task,
    "series": series.series_task,
    "docs": generated(docs.generate),
    "digit-qa": digit_qa.digit_qa_task,
    "digit-captions": digit_captions.captions_task,
    "digit-captions-pos": digit_captions.positions_task,
    "lm": lm_task,
}

# the family of each task (see attnkit/tasks/family.py); a task not listed translates
TASK_FAMILY: dict[str, str] = {
    "series": "forecast",
    "docs": "docs",
    "digit-qa": "qa",
    "digit-captions": "caption",
    "digit-captions-pos": "caption",
    "lm": "lm",
}


def task_family(name: str) -> str:
    """The family of task ``name``: how it batches, trains, scores and shows."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASK_FAMILY.get(name, "translate")


def load_task(
    name: str,
    *,
    seed: int = 0,
    train_size: int | None = None,
    valid_size: int | None = None,
    test_size: int | None = None,
    min_len: int | None = None,
    max_len: int | None = None,
) -> Splits:
    """The train/valid/test splits of task ``name``; the same seed gives the same splits.
    ``min_len``/``max_len``: sequence lengths of copy/reverse/sort."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    d = DEFAULT_SIZES[name]
    sizes = (
        d[0] if train_size is None else train_size,
        d[1] if valid_size is None else valid_size,
        d[2] if test_size is None else test_size,
    )
    if min(sizes) < 0:
        raise ValueError(f"split sizes {sizes} must not be negative")
    lengths = {k: v for k, v in (("min_len", min_len), ("max_len", max_len)) if v is not None}
    if lengths and name not in ("copy", "reverse", "sort"):
        raise ValueError(f"--min-len/--max-len apply to copy, reverse and sort, not {name}")
    return TASKS[name](sizes, seed, **lengths)


__all__ = ["TASKS", "TASK_FAMILY", "load_task", "split", "task_family"]
