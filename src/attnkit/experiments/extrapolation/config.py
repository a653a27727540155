"""The settings of the extrapolation experiment (extrapolation/__init__.py); every field is a
flag of ``attnkit experiment extrapolation``. ``--part positions`` (the default) compares
position methods (Press et al. 2022); ``--part rope`` stretches a plain-RoPE model with the
RoPE scalings, with and without a short fine-tune (Chen et al. 2023, Peng et al. 2023)."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..._flags import int_list, str_list
from ...registry import canonical
from ...stages.rope_scaling import scaling_name
from ..base import option
from ..pool import LMFlags

CLAIMED = ("sinusoidal", "alibi")  # the two arms the claim is about
PARTS = ("positions", "rope")  # Press 2022's position methods; Chen 2023 / Peng 2023's scalings
ROPE_CLAIMED = ("linear", "yarn")  # the scalings the RoPE part's claims compare
ROPE_FACTORS = (2, 4)  # the RoPE part checks Peng 2023 at s = 2, Chen 2023 at s = 4 (and 8, 16)


def parse_list(text: str, flag: str) -> list[str]:
    """ "a,b" -> ["a", "b"] (no empty items, no repeats)."""
    xs = str_list(text)
    if not xs or len(set(xs)) != len(xs):
        raise ValueError(f"--{flag} {text!r}: give distinct comma-separated names")
    return xs


def parse_factors(text: str, flag: str = "factors") -> list[int]:
    """ "1,2,4,8" -> [1, 2, 4, 8]: increasing, starting at 1 (the training length)."""
    xs = int_list(text, flag, "1,2,4,8")
    if len(xs) < 2 or xs[0] != 1 or xs != sorted(set(xs)):
        raise ValueError(
            f"--{flag.replace('_', '-')} {text!r}: give increasing integers starting at 1 (the "
            "training length L) and at least one longer, e.g. 1,2,4,8"
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
    patience: int = option(2, "--part positions: early stopping, every arm: validations (one "
                           "per epoch) without a lower valid loss before a run stops")
    cap: int = option(30, "--part positions: at most this many epochs per run, the same for "
                      "every arm (>= 3x each compared arm's median stop); --epochs is the "
                      "RoPE part's fixed training of its base model")  # fmt: skip
    seeds: int = option(5, "seeds seed, seed+1, ...: each a new text and initialisation (a "
                        "check needs 5)")
    part: str = option("positions", "positions: position methods, ALiBi vs sinusoidal (Press "
                       "2022), writes extrapolation.*; rope: plain RoPE stretched by PI, NTK or "
                       "YaRN with and without a short fine-tune (Chen 2023, Peng 2023), writes "
                       "extrapolation-rope.*")  # fmt: skip
    rope_factors: str = option("1,2,4,8", "--part rope: evaluation lengths as multiples k "
                               "of L, from 1, with 2 and 4; RoPE is stretched by s = k")
    scalings: str = option("linear,ntk,yarn", "--part rope: the RoPE scalings fine-tuned at "
                           "each k > 1 (linear = position interpolation; none = plain RoPE "
                           "fine-tuned at k·L); linear and yarn are required (the claim)")
    finetune_steps: int = option(200, "--part rope: updates of the fine-tune at k·L, the same "
                                 "for every scaling (each reads as many characters as a "
                                 "training update); the small budget is 0.4 x this (Peng "
                                 "2023's 400 steps to Chen 2023's 1,000)")  # fmt: skip

    def __post_init__(self) -> None:
        check_ranges(self, positive=(
            "train_size", "valid_size", "test_size", "segment", "dim", "heads", "layers", "ff",
            "epochs", "batch_size", "seeds", "jobs", "threads", "finetune_steps", "patience",
            "cap"), fractions=(),
            as_flags=True)  # fmt: skip
        arms = parse_list(self.arms, "arms")
        for arm in arms:
            if arm != "sinusoidal":
                canonical("position", arm)  # a ValueError naming the known stages
        missing = [a for a in CLAIMED if a not in arms]
        if missing:
            raise ValueError(f"--arms {self.arms!r} lacks {', '.join(missing)}: the claim "
                             "compares ALiBi with sinusoidal positions")  # fmt: skip
        if self.part not in PARTS:
            raise ValueError(f"--part {self.part!r}: choose one of {', '.join(PARTS)}")
        _ = self.scaling_list  # a ValueError naming --scalings
        if self.part == "rope":
            lacking = [str(k) for k in ROPE_FACTORS if k not in self.factor_list]
            if lacking:
                raise ValueError(f"--rope-factors {self.rope_factors!r} lacks "
                                 f"{', '.join(lacking)}: the RoPE part checks Peng 2023 at 2L "
                                 "and Chen 2023 at 4L")  # fmt: skip
        if self.block + 1 > self.test_size:
            raise ValueError(
                f"--test-size {self.test_size}: the evaluation at {self.factor_list[-1]}L = "
                f"{self.block} needs at least {self.block + 1} characters (aim for 20 blocks)"
            )

    @property
    def factor_list(self) -> list[int]:
        """The evaluation multiples k of L of the part run, increasing, from 1 (``--factors``,
        or ``--rope-factors`` for ``--part rope``)."""
        if self.part == "rope":
            return parse_factors(self.rope_factors, "rope_factors")
        return parse_factors(self.factors)

    @property
    def arm_list(self) -> list[str]:
        """The position methods, in the order given."""
        return parse_list(self.arms, "arms")

    @property
    def scaling_list(self) -> list[str]:
        """The RoPE scalings of ``--part rope``, canonical names, in the order given."""
        names = [scaling_name(n) for n in parse_list(self.scalings, "scalings")]
        missing = [n for n in ROPE_CLAIMED if n not in names]
        if missing or len(set(names)) != len(names):
            raise ValueError(f"--scalings {self.scalings!r}: name each at most once, with "
                             f"{' and '.join(ROPE_CLAIMED)} (the claim compares them)")  # fmt: skip
        return names

    @property
    def block(self) -> int:
        """Characters per test block: the longest evaluation length, k_max · L."""
        return self.factor_list[-1] * self.segment


__all__ = ["CLAIMED", "PARTS", "ROPE_CLAIMED", "ROPE_FACTORS", "ExtrapolationConfig",
           "parse_factors", "parse_list"]
