"""The settings of the distance experiment (distance/__init__.py); every field is a flag of
``attnkit experiment distance``."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..._flags import int_list
from ..base import Pooled, Seeds, option, task_names
from .data import TASKS
from .measure import Setting


@dataclass
class DistanceConfig(Seeds, Pooled):
    deltas: str = option("10,25,50,100,200", "distances Δ, comma-separated; each is trained "
                         "separately, from scratch; every Δ in sequences of 10 + Δmax + 1 "
                         "tokens")
    tasks: str = option("marked", "tasks, comma-separated: marked (the answer is a "
                        "flagged symbol), plain (the token exactly Δ back) and/or assoc "
                        "(associative recall: the value after the query's key, Δ back)")
    symbols: int = option(8, "symbols K to recall (chance 1/K)")
    dim: int = option(32, "embedding width of every model and the attention width")
    heads: int = option(2, "attention heads")
    layers: int = option(2, "attention layers; sets the shared parameter budget")
    cap: int = option(600, "updates at most per run; a run that has not met the criterion "
                      "by then is censored (counts as the cap)")
    window: int = option(10, "batches whose mean accuracy must reach 90%")
    batch_size: int = option(32, "sequences per update")
    lr: float = option(3e-3, "Adam learning rate of every model")
    clip: float = option(1.0, "gradient-norm clipping of every model")
    seeds: int = option(5, "seeds: --seed, --seed+1, ... (an interval needs 2; 5 advised)")
    eval_size: int = option(256, "held-out sequences scored where training stopped")
    grad_size: int = option(32, "sequences per Δ for the gradient norms")
    seed: int = option(0, "first seed")

    def __post_init__(self) -> None:
        grid, _ = self.grid, self.task_list  # each raises on a malformed list
        if grid[0] < 1:
            raise ValueError(f"--deltas {self.deltas}: every Δ must be at least 1")
        if self.symbols < 2:
            raise ValueError(f"--symbols {self.symbols}: need at least 2")
        if self.seeds < 2:
            raise ValueError(f"--seeds {self.seeds}: an interval needs at least 2")
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "dim", "heads", "layers", "cap", "window", "batch_size", "eval_size", "grad_size",
            "jobs", "threads"))  # fmt: skip
        if self.window > self.cap:
            raise ValueError(f"--window {self.window} > --cap {self.cap}: the criterion "
                             "could never be met; lower --window or raise --cap")  # fmt: skip
        if self.dim % self.heads or self.dim % 2:
            raise ValueError(f"--dim {self.dim} must be even and divisible by --heads {self.heads}")
        if not self.lr > 0 or self.clip < 0:
            raise ValueError(f"--lr {self.lr} must be positive and --clip {self.clip} >= 0")

    @property
    def grid(self) -> list[int]:
        grid = sorted(set(int_list(self.deltas, "deltas", "10,100,400")))
        if len(grid) < 2:
            raise ValueError(f"--deltas {self.deltas!r}: need at least two distances")
        return grid

    @property
    def task_list(self) -> list[str]:
        return task_names(self.tasks, TASKS)

    @property
    def setting(self) -> Setting:
        return Setting(tuple(self.grid), self.symbols, self.dim, self.heads, self.layers,
                       self.cap, self.window, self.batch_size, self.lr, self.clip,
                       self.eval_size, self.grad_size, self.threads)  # fmt: skip
