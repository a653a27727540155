"""The settings of the heads experiment (heads.py): every field a flag of ``attnkit
experiment heads``; apart so that the jobs (jobs.py) read them without a loop."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..base import option


@dataclass
class HeadsConfig:
    heads: str = option("1,2,4,8,16", "head counts compared, comma-separated")
    dim: int = option(64, "d_model of every model, divisible by every head count")
    layers: int = option(2, "encoder layers, and as many decoder layers")
    ff: int = option(128, "feed-forward width d_ff")
    dropout: float = option(0.0, "dropout P_drop")
    steps: int = option(300, "updates per model, the shared budget")
    batch_size: int = option(32, "sentences per update")
    lr: float = option(1e-3, "Adam learning rate")
    valid_size: int = option(100, "validation sentences")
    test_size: int = option(500, "test sentences scored")
    seeds: int = option(3, "seeds seed, seed+1, ...: data and initialisation")
    seed: int = option(0, "first seed")
    multi30k: int = option(
        0,
        "also train every model for N updates on the first N x batch-size Multi30K En-De "
        "pairs from ../shared/data/multi30k, e.g. 600 (0: toy-ko only)",
    )
    jobs: int = option(2, "models trained at once, in a process pool")
    threads: int = option(1, "torch threads per training process")

    def __post_init__(self) -> None:
        counts = self.head_counts  # raises on a malformed list
        if 1 not in counts or len(counts) < 2 or len(set(counts)) != len(counts):
            raise ValueError(
                f"--heads {self.heads!r}: list distinct counts, 1 and at least "
                "one more, e.g. 1,2,4,8,16"
            )
        bad = [h for h in counts if h < 1 or self.dim % h]
        if bad or self.dim % 2:
            raise ValueError(
                f"--dim {self.dim} must be even and divisible by every head "
                f"count (not by {bad}); e.g. --dim 64 for 1,2,4,8,16"
            )
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "layers", "ff", "steps", "batch_size", "valid_size", "test_size", "seeds", "jobs",
            "threads"
        ))  # fmt: skip
        if self.multi30k < 0:
            raise ValueError(f"--multi30k {self.multi30k}: a number of updates, or 0 for none")
        if not self.lr > 0 or not 0 <= self.dropout < 1:
            raise ValueError(f"--lr {self.lr} must be positive, --dropout {self.dropout} in [0, 1)")

    @property
    def head_counts(self) -> list[int]:
        try:
            return [int(x) for x in self.heads.split(",")]
        except ValueError:
            msg = f"--heads {self.heads!r}: comma-separated integers, e.g. 1,2,4,8,16"
            raise ValueError(msg) from None

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seed, self.seed + self.seeds))


__all__ = ["HeadsConfig"]
