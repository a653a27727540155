"""The settings of the extrapolation experiment (extrapolation/__init__.py); every field is a
flag of ``attnkit experiment extrapolation``."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..._flags import int_list, str_list
from ...registry import canonical
from ..base import option
from ..pool import LMFlags

CLAIMED = ("sinusoidal", "alibi")  # the two arms the claim is about


def parse_list(text: str, flag: str) -> list[str]:
    """ "a,b" -> ["a", "b"] (no empty items, no repeats)."""
    xs = str_list(text)
    if not xs or len(set(xs)) != len(xs):
        raise ValueError(f"--{flag} {text!r}: give distinct comma-separated names")
    return xs


def parse_factors(text: str) -> list[int]:
    """ "1,2,4,8" -> [1, 2, 4, 8]: increasing, starting at 1 (the training length)."""
    xs = int_list(text, "factors", "1,2,4,8")
    if len(xs) < 2 or xs[0] != 1 or xs != sorted(set(xs)):
        raise ValueError(
            f"--factors {text!r}: give increasing integers starting at 1 (the training length "
            "L) and at least one longer, e.g. 1,2,4,8"
        )
    return xs


@dataclass
class ExtrapolationConfig(LMFlags):
    """The generated text, the arms (one vanilla LM per position method, equal sizes),
    their training at length L, and the evaluation lengths k·L."""

    train_size: int = option(80_000, "characters of generated training text")
    valid_size: int = option(2_000, "characters of validation text")
    test_size: int = option(12_300, "characters of test text (bpc is measured on it)")
    segment: int = option(32, "training length L (characters per segment)")
    factors: str = option("1,2,4,8,16", "evaluation lengths as multiples k of L, from 1")
    arms: str = option("sinusoidal,learned,rope,t5,alibi,xl",
                       "position methods (sinusoidal or a registry position stage); "
                       "sinusoidal and alibi are required (the claim)")  # fmt: skip
    ff: int = option(256, "feed-forward width")
    batch_size: int = option(16, "segments per update")
    seeds: int = option(5, "seeds seed, seed+1, ...: each a new text and initialisation (a "
                        "check needs 5)")

    def __post_init__(self) -> None:
        check_ranges(self, positive=(
            "train_size", "valid_size", "test_size", "segment", "dim", "heads", "layers", "ff",
            "epochs", "batch_size", "seeds", "jobs", "threads"), fractions=(),
            as_flags=True)  # fmt: skip
        arms = parse_list(self.arms, "arms")
        for arm in arms:
            if arm != "sinusoidal":
                canonical("position", arm)  # a ValueError naming the known stages
        missing = [a for a in CLAIMED if a not in arms]
        if missing:
            raise ValueError(f"--arms {self.arms!r} lacks {', '.join(missing)}: the claim "
                             "compares ALiBi with sinusoidal positions")  # fmt: skip
        if self.block + 1 > self.test_size:
            raise ValueError(
                f"--test-size {self.test_size}: the evaluation at {self.factor_list[-1]}L = "
                f"{self.block} needs at least {self.block + 1} characters (aim for 20 blocks)"
            )

    @property
    def factor_list(self) -> list[int]:
        """The evaluation multiples k of L, increasing, from 1."""
        return parse_factors(self.factors)

    @property
    def arm_list(self) -> list[str]:
        """The position methods, in the order given."""
        return parse_list(self.arms, "arms")

    @property
    def block(self) -> int:
        """Characters per test block: the longest evaluation length, k_max · L."""
        return self.factor_list[-1] * self.segment


__all__ = ["CLAIMED", "ExtrapolationConfig", "parse_factors", "parse_list"]
