"""Algorithmic tasks with adjustable lengths: copy, reverse, sort. Tokens are the symbols
``s0 .. s{V-1}``; alignments are exact (copy: i->i, reverse: i->n-1-i, sort: a stable
permutation)."""

from __future__ import annotations

import random
from collections.abc import Callable

from .example import Example


def _draw(rng: random.Random, min_len: int, max_len: int, symbols: int) -> list[int]:
    return [rng.randrange(symbols) for _ in range(rng.randint(min_len, max_len))]


def copy_links(xs: list[int]) -> list[tuple[int, int]]:
    return [(i, i) for i in range(len(xs))]


def reverse_links(xs: list[int]) -> list[tuple[int, int]]:
    return sorted((len(xs) - 1 - j, j) for j in range(len(xs)))


def sort_links(xs: list[int]) -> list[tuple[int, int]]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])  # stable
    return sorted((i, j) for j, i in enumerate(order))


RULES: dict[str, tuple[Callable[[list[int]], list[int]], Callable[..., list[tuple[int, int]]]]] = {
    "copy": (lambda xs: list(xs), copy_links),
    "reverse": (lambda xs: xs[::-1], reverse_links),
    "sort": (sorted, sort_links),
}


def generate(
    task: str, n: int, seed: int, *, min_len: int = 3, max_len: int = 10, symbols: int = 10
) -> list[Example]:
    """``n`` distinct sequences (as many as exist if fewer) for ``task``."""
    if task not in RULES:
        raise ValueError(f"unknown algorithmic task {task!r}; choose one of {sorted(RULES)}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"lengths {min_len}..{max_len}: need 1 <= min_len <= max_len")
    if symbols < 2:
        raise ValueError(f"symbols={symbols}; need at least 2")
    possible = sum(symbols**k for k in range(min_len, max_len + 1))
    if n > possible:
        raise ValueError(
            f"only {possible} distinct sequences of length {min_len}..{max_len} "
            f"over {symbols} symbols; ask for fewer than {n} or widen the range"
        )
    rule, links = RULES[task]
    rng = random.Random(seed)
    seen: set[tuple[int, ...]] = set()
    out: list[Example] = []
    while len(out) < n:
        xs = _draw(rng, min_len, max_len, symbols)
        if tuple(xs) in seen:
            continue
        seen.add(tuple(xs))
        out.append(Example([f"s{x}" for x in xs], [f"s{y}" for y in rule(xs)], links(xs)))
    return out


__all__ = ["RULES", "generate"]
