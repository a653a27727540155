"""The settings of ``attnkit experiment explanation``: one flag per field."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..base import Pooled, Seeds, names_of, option
from .data import TASKS
from .jobs import Setting
from .measure import Adversary


@dataclass
class ExplanationConfig(Seeds, Pooled):
    tasks: str = option("marked,docs", "tasks, comma-separated: marked, docs")
    seeds: int = option(5, "seeds per task: --seed, --seed + 1, ... (each an initialisation "
                        "and batch order; an interval needs 2)")
    seed: int = option(0, "first seed; also the seed of the generated examples")
    marked_train: int = option(500, "training examples of the marked task (the same for "
                               "every seed)")
    docs_train: int = option(2000, "training examples of the docs task (fixed for every seed)")
    valid_size: int = option(500, "validation examples (early stopping)")
    test_size: int = option(500, "test examples (accuracy and every measure)")
    emb: int = option(32, "embedding width")
    hidden: int = option(32, "BiRNN width per direction (the MLP's width is twice this)")
    attn: int = option(32, "width of the additive attention's score")
    cell: str = option("lstm", "BiRNN cell: lstm (Jain & Wallace's) or gru")
    batch_size: int = option(32, "examples per update")
    lr: float = option(1e-3, "Adam learning rate (Jain & Wallace's)")
    clip: float = option(1.0, "gradient-norm clipping (0 = none)")
    every: int = option(50, "updates between two validation scores")
    patience: int = option(5, "validation scores without a lower loss before stopping")
    cap: int = option(15000, "updates at most per model (at least 3x every compared arm's "
                      "median stop on the committed runs; no run there reached 6,000)")
    epsilon: float = option(0.01, "the adversary's bound on |change of the output probability| "
                            "(Jain & Wallace's)")  # fmt: skip
    adversaries: int = option(5, "attention distributions sought per example (Jain & "
                              "Wallace: 5)")
    adv_steps: int = option(500, "Adam steps of the adversarial search (Jain & Wallace: 500)")

    def __post_init__(self) -> None:
        _ = self.task_list
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "seeds", "marked_train", "docs_train", "valid_size", "test_size", "emb", "hidden",
            "attn",
            "batch_size", "every", "patience", "cap", "adversaries", "adv_steps", "jobs",
            "threads"))  # fmt: skip
        if self.seeds < 2:
            raise ValueError(f"--seeds {self.seeds}; an interval needs at least 2")
        if self.seed < 0:
            raise ValueError(f"--seed {self.seed}; it must not be negative")
        if self.cell not in ("lstm", "gru"):
            raise ValueError(f"--cell {self.cell!r}; choose lstm or gru")
        if not self.lr > 0 or self.clip < 0:
            raise ValueError(f"--lr {self.lr} must be positive and --clip {self.clip} >= 0")
        if not 0 < self.epsilon < 1:
            raise ValueError(f"--epsilon {self.epsilon}; pass a probability change in (0, 1)")
        if self.every > self.cap:
            raise ValueError(f"--every {self.every} > --cap {self.cap}: a run needs one "
                             "validation score at least")  # fmt: skip

    @property
    def task_list(self) -> list[str]:
        return names_of("--tasks", self.tasks, TASKS)

    @property
    def setting(self) -> Setting:
        return Setting(
            (("marked", self.marked_train), ("docs", self.docs_train)),
            (self.valid_size, self.test_size), self.seed, self.emb,
            self.hidden, self.attn, self.cell, self.batch_size, self.lr, self.clip, self.every,
            self.patience, self.cap,
            Adversary(self.epsilon, self.adversaries, self.adv_steps), self.threads,
        )  # fmt: skip


QUICK = dict(seeds=2, marked_train=64, docs_train=64, valid_size=32, test_size=16, emb=8,
             hidden=8, attn=8,
             every=5, patience=1, cap=10, adv_steps=5, jobs=1)  # fmt: skip


__all__ = ["ExplanationConfig", "QUICK"]
