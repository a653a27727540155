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
    deltas: str = option("10,15,20,40,80", "distances Δ, comma-separated; each is trained "
                         "separately, from scratch; every Δ in sequences of 10 + Δmax + 1 "
                         "tokens")
    tasks: str = option("marked", "tasks, comma-separated: marked (the answer is a "
                        "flagged symbol), plain (the token exactly Δ back) and/or assoc "
                        "(associative recall: the value after the query's key, Δ back)")
    symbols: int = option(8, "symbols K to recall (chance 1/K)")
    dim: int = option(32, "embedding width of every model and the attention width")
    heads: int = option(2, "attention heads")
    layers: int = option(2, "attention layers; sets the shared parameter budget")
    cap: int = option(0, "updates at most per run, the same for every arm; 0: each arm's own "
                      "cap, calibrated on --calibration-seed (10 x 1.5 x its u(Δmin), within "
                      "--budget). A run that has not met the criterion by its cap is censored")
    calibration_seed: int = option(1000, "seed of the calibration runs (one per task and "
                                   "model at Δmin), outside --seed .. --seed+seeds-1")
    calibration_cap: int = option(3000, "updates at most of a calibration run")
    budget: float = option(25.0, "wall-clock minutes the verdict's runs may take with --jobs "
                           "in the worst case (every run beyond Δmin censored): the "
                           "calibrated caps are scaled down to fit it")
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
            "dim", "heads", "layers", "window", "batch_size", "eval_size", "grad_size",
            "jobs", "threads", "calibration_cap", "budget"), non_negative=("cap",))  # fmt: skip
        flag, cap = ("cap", self.cap) if self.cap else ("calibration-cap", self.calibration_cap)
        if self.window > cap:
            raise ValueError(f"--window {self.window} > --{flag} {cap}: the criterion could "
                             f"never be met; lower --window or raise --{flag}")
        if self.seed <= self.calibration_seed < self.seed + self.seeds:
            raise ValueError(f"--calibration-seed {self.calibration_seed} is one of the "
                             f"verdict's seeds {self.seed}..{self.seed + self.seeds - 1}; "
                             "choose one outside them")  # fmt: skip
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
        """What every arm shares; its cap is --cap, or --calibration-cap until the calibration
        gives each arm its own (``calibrate.py``)."""
        return Setting(tuple(self.grid), self.symbols, self.dim, self.heads, self.layers,
                       self.cap or self.calibration_cap, self.window, self.batch_size,
                       self.lr, self.clip, self.eval_size, self.grad_size,
                       self.threads)  # fmt: skip
