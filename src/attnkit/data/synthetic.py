"""Algorithmic tasks with adjustable lengths: copy, reverse, sort. Tokens are the symbols
``s0 .. s{V-1}``; alignments are exact (copy: i->i, reverse: i->n-1-i, sort: a stable
permutation)."""

from __future__ import annotations

import random
from collections.abc import Callable

from .._checks import FieldError
from .example import Example, Splits, split
from .task import TASKS, Task

MAX_LEN = 1000  # longest sequence generated: an RNN trained on 100,000 tokens needs ~20 GB a step


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


def check_max_len(max_len: int) -> None:
    """Refuse a sequence length no training could use, before any work (or folder) is made."""
    if max_len > MAX_LEN:
        raise FieldError(
            f"{{max_len=}}: generated copy/reverse/sort sequences go up to {MAX_LEN} tokens "
            f"(training on longer ones takes gigabytes a step); pass {{max_len}} {MAX_LEN} or "
            "less", {"max_len": max_len},
        )  # fmt: skip


def generate(
    task: str, n: int, seed: int, *, min_len: int = 3, max_len: int = 10, symbols: int = 10
) -> list[Example]:
    """``n`` distinct sequences of ``min_len..max_len`` symbols for ``task`` (a ValueError when
    fewer exist, or when ``max_len`` is over ``MAX_LEN``)."""
    if task not in RULES:
        raise ValueError(f"unknown algorithmic task {task!r}; choose one of {sorted(RULES)}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"lengths {min_len}..{max_len}: need 1 <= min_len <= max_len")
    check_max_len(max_len)
    if symbols < 2:
        raise ValueError(f"symbols={symbols}; need at least 2")
    possible = 0  # how many sequences exist, counted only as far as n (symbols**100000 is huge)
    for k in range(min_len, max_len + 1):
        possible += symbols**k
        if possible >= n:
            break
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



def algorithmic(task: str) -> Callable[..., Splits]:
    """The splits of ``task``'s distinct sequences (``generate``), split with ``seed + 1``."""

    def make(sizes: tuple[int, int, int], seed: int, **lengths: int) -> Splits:
        return split(generate(task, sum(sizes), seed, **lengths), sizes, seed + 1)

    return make


for _name in ("copy", "reverse", "sort"):
    TASKS.register(Task(_name, algorithmic(_name), (5000, 300, 300), lengths=True))


__all__ = ["MAX_LEN", "RULES", "algorithmic", "check_max_len", "generate"]
