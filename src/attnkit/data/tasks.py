"""Named tasks that generate their own data: ``load_task("toy-ko", seed=0)`` -> Splits.

Each generator module registers its ``Task`` (task.py) where it defines it; importing them
here fills ``TASKS``, in the order ``attnkit train --help`` lists them. A new task is a
module with one ``TASKS.register(Task(...))`` line, and its name in the import below.
"""

from __future__ import annotations

# isort: off
from . import toy_ko, dates, synthetic, coref, series, docs, digit_qa, digit_captions, lm_text  # noqa: F401

# isort: on
from .example import Splits, split
from .task import TASKS, Task, generated


def task_family(name: str) -> str:
    """The family of task ``name``: how it batches, trains, scores and shows."""
    return TASKS[name].family


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
    task = TASKS[name]
    d = task.sizes
    sizes = (
        d[0] if train_size is None else train_size,
        d[1] if valid_size is None else valid_size,
        d[2] if test_size is None else test_size,
    )
    if min(sizes) < 0:
        raise ValueError(f"split sizes {sizes} must not be negative")
    lengths = {k: v for k, v in (("min_len", min_len), ("max_len", max_len)) if v is not None}
    if lengths and not task.lengths:
        *most, last = [t.name for t in TASKS.values() if t.lengths]
        takes = f"{', '.join(most)} and {last}" if most else last
        raise ValueError(f"--min-len/--max-len apply to {takes}, not {name}")
    return task.make(sizes, seed, **lengths)


__all__ = ["TASKS", "Task", "generated", "load_task", "split", "task_family"]
