"""The settings of the inductive-bias experiment (inductive_bias/__init__.py); every field is
a flag of ``attnkit experiment inductive-bias``."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..base import Pooled, Seeds, option, task_names
from .data import CANVAS_CELLS, TASKS, parse_fractions

SMALL = 0.1  # "small data": the fractions <= 10%


@dataclass
class InductiveConfig(Seeds, Pooled):
    tasks: str = option(
        "digits,canvas",
        "tasks, comma-separated: digits (one 8x8 digit) and/or "
        "canvas (one digit in a random cell of a 3x3 canvas)",
    )
    fractions: str = option(
        "0.05,0.1,0.25,0.5,1",
        "fractions of the training images, comma-separated, each in (0, 1]",
    )
    seeds: int = option(8, "seeds per point: --seed, --seed+1, ... (an interval needs 2)")
    steps: int = option(400, "updates per model at every fraction, the shared budget")
    batch_size: int = option(64, "images per update, drawn from the subset")
    lr: float = option(3e-3, "Adam learning rate of every model")
    clip: float = option(1.0, "gradient-norm clipping of every model")
    dim: int = option(32, "attention model width D; sets the parameter budget")
    heads: int = option(2, "attention heads")
    layers: int = option(2, "attention layers")
    patch: int = option(4, "patch side on both tasks (4: 2x2 patches of a digit, 6x6 of a canvas)")
    test_cells: int = option(9, "canvas cells each held-out digit is tested in (1..9)")
    maps: int = option(6, "test images whose attention maps are drawn, per task")
    seed: int = option(0, "image split and first seed")

    def __post_init__(self) -> None:
        _ = (self.task_list, self.fraction_list)  # each raises on a malformed list
        if self.seeds < 2:
            raise ValueError(f"--seeds {self.seeds}; an interval needs at least 2")
        if not any(f <= SMALL for f in self.fraction_list) or len(self.fraction_list) < 2:
            raise ValueError(f"--fractions {self.fractions!r}: give two or more, one <= "
                             f"{SMALL:g} at least (the small-data check)")  # fmt: skip
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "steps", "batch_size", "dim", "heads", "layers", "maps", "jobs", "threads"
        ))  # fmt: skip
        if self.dim % self.heads:
            raise ValueError(f"--dim {self.dim} must be divisible by --heads {self.heads}")
        if self.patch not in (1, 2, 4, 8):
            raise ValueError(f"--patch {self.patch} must divide the 8x8 digit (and so a canvas "
                             "cell): 1, 2, 4 or 8")  # fmt: skip
        if not 1 <= self.test_cells <= CANVAS_CELLS**2:
            raise ValueError(f"--test-cells {self.test_cells}; the canvas has 1..9 cells")
        if not self.lr > 0 or self.clip < 0:
            raise ValueError(f"--lr {self.lr} must be positive and --clip {self.clip} >= 0")

    @property
    def task_list(self) -> list[str]:
        return task_names(self.tasks, TASKS)

    @property
    def fraction_list(self) -> list[float]:
        return parse_fractions(self.fractions)
