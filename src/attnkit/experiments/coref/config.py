"""The settings of ``attnkit experiment coref``: one flag per field."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ...data.coref import FILLERS, OPENERS
from ..base import Pooled, Seeds, option


@dataclass
class CorefConfig(Seeds, Pooled):
    seeds: int = option(16, "models trained: seeds --seed, --seed + 1, ... (an interval needs 2; "
                        "16 settle a margin with the spread of earlier seed sets, sd up to "
                        "0.13, to about ±0.07)")  # fmt: skip
    dim: int = option(16, "Transformer width")
    heads: int = option(2, "heads per encoder layer (2 at least: the ablation compares heads)")
    layers: int = option(6, "encoder layers")
    ff: int = option(32, "feed-forward width")
    steps: int = option(20000, "the cap: at most this many Adam updates per model")
    eval_every: int = option(200, "updates between validations (early stopping)")
    patience: int = option(8, "stop after this many validations without a lower valid loss")
    min_delta: float = option(1e-3, "a validation loss counts as lower when it is lower by "
                              "more than this (nats)")
    batch_size: int = option(64, "sentences per update")
    lr: float = option(1e-3, "Adam learning rate")
    clip: float = option(1.0, "gradient-norm clipping")
    valid_fraction: float = option(0.1, "share of noun pairs held out to choose the head")
    test_fraction: float = option(0.2, "share of noun pairs held out for the test")
    openers: int = option(5, "openers each sentence comes after (1-5: '', 'yesterday ,', ...)")
    fillers: int = option(2, "at most this many filler words before each noun (0 = fixed "
                          "positions)")
    seed: int = option(0, "split seed and first model seed")

    def __post_init__(self) -> None:
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "seeds", "dim", "heads", "layers", "ff", "steps", "eval_every", "patience",
            "batch_size", "jobs", "threads",
        ))  # fmt: skip
        if not 1 <= self.openers <= len(OPENERS):
            raise ValueError(f"--openers {self.openers}; pass 1 to {len(OPENERS)}")
        if not 0 <= self.fillers <= len(FILLERS):
            raise ValueError(f"--fillers {self.fillers}; pass 0 to {len(FILLERS)}")
        if self.seeds < 2:
            raise ValueError(f"--seeds {self.seeds}; an interval needs at least 2")
        if self.heads < 2:
            raise ValueError(f"--heads {self.heads}; the ablation compares a head with the "
                             "others of its layer: pass 2 or more")
        if self.dim % self.heads or self.dim % 2:
            raise ValueError(f"--dim {self.dim} must be even and divisible by --heads {self.heads}")
        if not self.min_delta >= 0:
            raise ValueError(f"--min-delta {self.min_delta}; pass 0 or more")
        if not self.lr > 0 or self.clip < 0:
            raise ValueError(f"--lr {self.lr} must be positive and --clip {self.clip} >= 0")
        for name in ("valid_fraction", "test_fraction"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)}: pass a "
                                 "fraction in (0, 1)")  # fmt: skip
        if self.valid_fraction + self.test_fraction >= 1:
            raise ValueError(f"--valid-fraction + --test-fraction = "
                             f"{self.valid_fraction + self.test_fraction}: leave some noun "
                             "pairs for training")  # fmt: skip


__all__ = ["CorefConfig"]
