"""The settings of the linear experiment (linear/__init__.py); every field is a flag of
``attnkit experiment linear``."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..._flags import str_list
from ..base import option, parse_ints
from ..pool import LMFlags

ARMS = ("softmax", "linear", "performer")
"""Arm -> transformer-lm's ``attention=``: softmax, linear (φ = elu + 1, Katharopoulos 2020,
eq. 7) or performer (FAVOR+, Choromanski 2021)."""
COMPARED = ("softmax", "linear")  # the quality claim: linear against softmax at equal parameters


def parse_arms(text: str) -> list[str]:
    """ "softmax,linear" -> the arms, each one of ``ARMS``, the compared ones required."""
    xs = str_list(text)
    if [x for x in xs if x not in ARMS] or len(set(xs)) != len(xs):
        raise ValueError(f"--arms {text!r}: give distinct names from {', '.join(ARMS)}")
    missing = [a for a in COMPARED if a not in xs]
    if missing:
        raise ValueError(f"--arms {text!r} lacks {', '.join(missing)}: the claim compares "
                         "linear attention with softmax attention")  # fmt: skip
    return xs


@dataclass
class LinearConfig(LMFlags):
    """(a) the cost grid of one causal attention (forward + backward) against n; (b) the
    time per decoded token against t; (c) the arms (one transformer-lm per attention, equal
    sizes and parameters) trained at length n to a validation plateau."""

    train_size: int = option(60_000, "characters of generated training text")
    valid_size: int = option(8_193, "characters of validation text (early stopping reads it)")
    test_size: int = option(16_385, "characters of test text (bpc is measured on it)")
    segment: int = option(256, "training and evaluation length n (characters per segment)")
    arms: str = option("softmax,linear", "attentions: softmax, linear, performer; softmax and "
                       "linear are required (the claim), performer is reported beside them")
    ff: int = option(128, "feed-forward width")
    batch_size: int = option(12, "segments per update (12 of 256: 3,072 characters)")
    epochs: int = option(250, "cap: at most this many passes over the training text, the same "
                         "for every arm (early stopping ends a run before it)")  # fmt: skip
    patience: int = option(8, "early stopping, every arm: validations (one per epoch) "
                           "without a lower valid bpc before a run stops")  # fmt: skip
    seeds: int = option(5, "seeds seed, seed+1, ...: each a new text and initialisation (5 "
                        "for the t-interval over the seeds' paired gaps)")  # fmt: skip
    cost_n: str = option("1024,2048,4096,8192,16384", "lengths n of the one-attention cost grid")
    cost_heads: int = option(1, "heads of the cost grid's attention")
    cost_head_dim: int = option(64, "head width d of the cost grid's attention (linear: O(n·d²))")
    window: int = option(256, "look-back w of the sliding window in the cost grid (reported)")
    repeats: int = option(5, "timed forward+backward passes per (attention, n)")
    decode_t: str = option("256,512,1024,2048,4096,8192", "positions t at which the "
                           "time per decoded token is measured (untrained models of the "
                           "trained ones' sizes)")  # fmt: skip
    decode_tokens: int = option(32, "tokens timed from each t (their median is the time at t)")

    def __post_init__(self) -> None:
        check_ranges(self, positive=(
            "train_size", "valid_size", "test_size", "segment", "dim", "heads", "layers", "ff",
            "epochs", "batch_size", "patience", "seeds", "repeats", "jobs", "threads",
            "cost_heads", "cost_head_dim", "window", "decode_tokens"),
            fractions=(), as_flags=True)  # fmt: skip
        parse_arms(self.arms)
        parse_ints(self.cost_n, "cost-n", 2, "1024,2048,4096")
        parse_ints(self.decode_t, "decode-t", 1, "128,1024,4096")
        if self.dim % self.heads:
            raise ValueError(f"--dim {self.dim}: give a width divisible by --heads "
                             f"{self.heads}")  # fmt: skip
        if self.segment + 1 > self.test_size:
            raise ValueError(f"--test-size {self.test_size}: the evaluation at n = "
                             f"{self.segment} needs at least {self.segment + 1} characters")

    @property
    def arm_list(self) -> list[str]:
        """The arms, in the order given."""
        return parse_arms(self.arms)

    @property
    def n_list(self) -> list[int]:
        """The lengths of the cost grid."""
        return parse_ints(self.cost_n, "cost-n", 2, "1024,2048,4096")

    @property
    def t_list(self) -> list[int]:
        """The decoding positions."""
        return parse_ints(self.decode_t, "decode-t", 1, "128,1024,4096")


__all__ = ["ARMS", "COMPARED", "LinearConfig", "parse_arms"]
