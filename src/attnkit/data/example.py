"""One parallel example: source tokens, target tokens, and (optionally) gold word alignments."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar


@dataclass(frozen=True)
class Example:
    """src / tgt: tokens (words, characters or subwords). links: gold alignment pairs
    (src_idx, tgt_idx), 0-based; empty when the task has none. ref: the target as raw text
    (corpora), the reference that BLEU on detokenised output is scored against."""

    src: list[str]
    tgt: list[str]
    links: list[tuple[int, int]] = field(default_factory=list)
    ref: str = ""


T = TypeVar("T")


@dataclass(frozen=True)
class Splits(Generic[T]):
    """train / valid / test; of Examples, or of raw text pairs before tokenisation."""

    train: list[T]
    valid: list[T]
    test: list[T]

    def get(self, name: str) -> list[T]:
        if name not in ("train", "valid", "test"):
            raise ValueError(f"unknown split {name!r}; choose train, valid or test")
        return getattr(self, name)


def split(examples: list[T], sizes: tuple[int, int, int], seed: int) -> Splits[T]:
    """Shuffle distinct examples with ``seed`` and cut them into train/valid/test."""
    xs = list(examples)
    random.Random(seed).shuffle(xs)
    a, b, c = sizes
    return Splits(xs[:a], xs[a : a + b], xs[a + b : a + b + c])


def distinct(n: int, draw: Callable[[], tuple[str, T]], tries: int, error: str) -> list[T]:
    """``n`` examples of ``draw`` (a key and an example), the first of each key, in the order
    drawn; a ValueError ``error`` when ``tries`` draws were not enough."""
    seen: set[str] = set()
    out: list[T] = []
    drawn = 0
    while len(out) < n:
        drawn += 1
        if drawn > tries:
            raise ValueError(error)
        key, example = draw()
        if key not in seen:
            seen.add(key)
            out.append(example)
    return out


__all__ = ["Example", "Splits", "distinct", "split"]
