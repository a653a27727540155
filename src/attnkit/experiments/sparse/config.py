"""The settings of the sparse experiment (sparse/__init__.py); every field is a flag of
``attnkit experiment sparse``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..._checks import check_ranges
from ..._flags import str_list
from ..base import option, parse_ints
from ..pool import LMFlags

ARMS = {"dense": "causal", "strided": "strided-causal", "fixed": "fixed-causal",
        "sliding": "sliding-causal"}  # fmt: skip
"""Arm -> the transformer-lm alignment it trains with (models/lm.py ``align=``)."""
POSITIONS = ("sinusoidal", "rope")  # how every arm sees positions (one choice for all arms)
CLAIMED = ("dense", "fixed")  # the arms the quality claim compares on text (Child 2019, §7.2)


def parse_arms(text: str) -> list[str]:
    """ "dense,strided" -> the arms, each one of ``ARMS``, the claimed ones required."""
    xs = str_list(text)
    unknown = [x for x in xs if x not in ARMS]
    if unknown or len(set(xs)) != len(xs):
        raise ValueError(f"--arms {text!r}: give distinct names from {', '.join(ARMS)}")
    missing = [a for a in CLAIMED if a not in xs]
    if missing:
        raise ValueError(f"--arms {text!r} lacks {', '.join(missing)}: the claim compares the "
                         "fixed pattern with dense attention on text")  # fmt: skip
    return xs


def stride_of(n: int) -> int:
    """The stride l = round(√n) (Child 2019, §4.2: l ≈ √n)."""
    return max(1, round(math.sqrt(n)))


@dataclass
class SparseConfig(LMFlags):
    """The generated text, the arms (one transformer-lm per alignment, equal sizes and
    parameters), their training at length n to a validation plateau (early stopping after
    ``patience`` epochs without a lower valid bpc, at most ``epochs``), and the cost grid of
    one attention layer."""

    train_size: int = option(140_000, "characters of generated training text")
    valid_size: int = option(8_193, "characters of validation text (32 segments of 256: "
                             "early stopping and the learning curves read it)")  # fmt: skip
    test_size: int = option(16_385, "characters of test text (bpc is measured on it)")
    segment: int = option(256, "training and evaluation length n (characters per segment; "
                          "calibrate.py: every dense seed learns the long-range structure)")
    arms: str = option("dense,strided,fixed,sliding",
                       "alignments: dense (causal), strided, fixed, sliding (causal window); "
                       "dense and fixed are required (the claim), strided and sliding are "
                       "reported beside them")  # fmt: skip
    ff: int = option(128, "feed-forward width")
    summary: int = option(1, "the fixed pattern's summary columns c, 1 .. l (Child 2019 "
                          "§4.2; enwik8: c = 32 of l = 128, c/l = 1/4)")
    asks: float = option(0.3, "the generated text: the chance that a sentence of a record "
                         "asks its name back (more: the copied names a larger share of it)")
    position: str = option("sinusoidal", "positions, every arm: sinusoidal (the sinusoid PE "
                           "added to the embeddings) or rope (rotary, inside every attention)")
    batch_size: int = option(12, "segments per update (12 of 256: 3,072 characters)")
    epochs: int = option(60, "cap: at most this many passes over the training text, the same "
                         "for every arm (early stopping ends a run before it)")  # fmt: skip
    patience: int = option(10, "early stopping, every arm: validations (one per epoch) "
                           "without a lower valid bpc before a run stops")  # fmt: skip
    seeds: int = option(5, "seeds seed, seed+1, ...: each a new text and initialisation (5 "
                        "for the t-interval over the seeds' paired gaps)")  # fmt: skip
    cost_n: str = option("1024,2048,4096,8192", "lengths n of the one-layer cost grid")
    repeats: int = option(3, "timed forward+backward passes per (arm, n)")

    def __post_init__(self) -> None:
        check_ranges(self, positive=(
            "train_size", "valid_size", "test_size", "segment", "dim", "heads", "layers", "ff",
            "epochs", "batch_size", "patience", "seeds", "repeats", "jobs", "threads"),
            fractions=(), as_flags=True)  # fmt: skip
        parse_arms(self.arms)
        if not 1 <= self.summary <= self.stride:
            raise ValueError(f"--summary {self.summary}: the fixed pattern's summary columns "
                             f"c are 1 .. l = {self.stride} at --segment {self.segment}")
        if not 0 < self.asks < 1:
            raise ValueError(f"--asks {self.asks}: a chance; give it in (0, 1)")
        if self.position not in POSITIONS:
            raise ValueError(f"--position {self.position!r}: choose {' or '.join(POSITIONS)}")
        parse_ints(self.cost_n, "cost-n", 2, "1024,2048,4096,8192")
        if self.dim % self.heads or (self.dim // self.heads) % 2:
            raise ValueError(f"--dim {self.dim} --heads {self.heads}: give a dim divisible by "
                             "heads with an even head width")  # fmt: skip
        if self.segment + 1 > self.test_size:
            raise ValueError(f"--test-size {self.test_size}: the evaluation at n = "
                             f"{self.segment} needs at least {self.segment + 1} characters "
                             "(aim for 16 segments)")  # fmt: skip

    @property
    def arm_list(self) -> list[str]:
        """The arms, in the order given."""
        return parse_arms(self.arms)

    @property
    def n_list(self) -> list[int]:
        """The lengths of the cost grid."""
        return parse_ints(self.cost_n, "cost-n", 2, "1024,2048,4096,8192")

    @property
    def stride(self) -> int:
        """The stride l (and the sliding window's radius) at the training length."""
        return stride_of(self.segment)


__all__ = ["ARMS", "CLAIMED", "POSITIONS", "SparseConfig", "parse_arms", "stride_of"]
