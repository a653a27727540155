"""The record of a generated task and the registry they are found by (``TASKS``).

A generator module registers its task where it defines it, e.g. at the foot of dates.py:

    TASKS.register(Task("dates", generated(generate), sizes=(10000, 500, 500), join=""))

tasks.py imports every generator module (which fills ``TASKS``) and loads a task by name;
this module imports none of them, so that each can import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._registry import Registry
from .example import Splits, split


@dataclass(frozen=True)
class Task:
    """One generated task.

    make(sizes, seed, **lengths) -> Splits: the train/valid/test splits of ``sizes`` examples
        (``lengths``: ``min_len``/``max_len``, for the tasks with ``lengths``).
    sizes: the default (train, valid, test) sizes.
    family: its task family (``attnkit.tasks``): how it batches, trains, scores and shows.
    join: how its tokens join into text ("" = characters: its corpus files tokenise by char).
    lengths: whether it takes ``min_len``/``max_len`` (the sequence lengths it draws).
    """

    name: str
    make: Callable[..., Splits]
    sizes: tuple[int, int, int]
    family: str = "translate"
    join: str = " "
    lengths: bool = False


TASKS: Registry[Task] = Registry("task")
"""Task name -> its ``Task``, filled by the generator modules that tasks.py imports."""


def generated(generate: Callable[..., list[Any]]) -> Callable[..., Splits]:
    """The task of ``generate(n, seed)``'s distinct examples, split with ``seed + 1``."""

    def make(sizes: tuple[int, int, int], seed: int, **_: int) -> Splits:
        return split(generate(sum(sizes), seed), sizes, seed + 1)

    return make


__all__ = ["TASKS", "Task", "generated"]
