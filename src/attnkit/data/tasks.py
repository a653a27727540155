"""Named tasks that generate their own data: ``load_task("toy-ko", seed=0)`` -> Splits."""

from __future__ import annotations

import random
from collections.abc import Callable

from . import toy_ko
from .example import Example, Splits

DEFAULT_SIZES = {"toy-ko": (8000, 400, 500)}


def split(examples: list[Example], sizes: tuple[int, int, int], seed: int) -> Splits:
    """Shuffle distinct examples with ``seed`` and cut them into train/valid/test."""
    xs = list(examples)
    random.Random(seed).shuffle(xs)
    a, b, c = sizes
    return Splits(xs[:a], xs[a : a + b], xs[a + b : a + b + c])


def toy_ko_task(sizes: tuple[int, int, int], seed: int) -> Splits:
    return split(toy_ko.generate(sum(sizes), seed), sizes, seed + 1)


TASKS: dict[str, Callable[[tuple[int, int, int], int], Splits]] = {"toy-ko": toy_ko_task}


def load_task(
    name: str,
    *,
    seed: int = 0,
    train_size: int | None = None,
    valid_size: int | None = None,
    test_size: int | None = None,
) -> Splits:
    """The train/valid/test splits of task ``name``; the same seed gives the same splits."""
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
    return TASKS[name](sizes, seed)


__all__ = ["TASKS", "load_task", "split"]
