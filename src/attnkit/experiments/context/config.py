"""The settings of the context experiment (context/__init__.py); every field is a flag of
``attnkit experiment context``."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..base import option, parse_ints
from ..pool import LMFlags


@dataclass
class ContextConfig(LMFlags):
    """The generated text, the two models (equal parameters), their training to a validation
    plateau, and what is measured: bpc by evaluation memory, and evaluation time by context
    length."""

    train_size: int = option(60_000, "characters of generated training text")
    valid_size: int = option(3_000, "characters of validation text")
    test_size: int = option(5_000, "characters of test text (bpc is measured on it)")
    segment: int = option(32, "training segment length L (characters)")
    memory: int = option(64, "Transformer-XL's training memory length M")
    ff: int = option(256, "feed-forward width (the vanilla LM's is widened to XL's parameters)")
    batch_size: int = option(16, "streams per update")
    eval_memories: str = option(
        "0,32,64,128,256", "XL's memory lengths at evaluation; (c) is checked at the longest"
    )
    eval_streams: int = option(4, "streams the test text is read in (fewer: longer streams)")
    lengths: str = option("64,128,256,512", "context lengths C of the evaluation timing")
    timing_chars: int = option(256, "characters predicted per timing")
    repeats: int = option(3, "timings per context length (the interval is over them)")
    epochs: int = option(30, "cap on the passes over the training text (one validation each)")
    patience: int = option(2, "validations without a lower valid loss before a run stops")
    seeds: int = option(5, "seeds seed, seed+1, ...: each a new text and initialisation")

    def __post_init__(self) -> None:
        check_ranges(self, positive=(
            "train_size", "valid_size", "test_size", "segment", "dim", "heads", "layers", "ff",
            "epochs", "batch_size", "seeds", "eval_streams", "timing_chars", "repeats", "jobs",
            "threads", "patience"), non_negative=("memory",), fractions=(),
            as_flags=True)  # fmt: skip
        if self.seeds < 2:
            raise ValueError(f"--seeds {self.seeds}: an interval over seeds needs 2 at least "
                             "(5 for a verdict)")  # fmt: skip
        memories = parse_ints(self.eval_memories, "eval-memories", 0, "0,32,128")
        if self.memory not in memories or memories[-1] <= self.memory:
            raise ValueError(
                f"--eval-memories {self.eval_memories!r} must hold the training --memory "
                f"{self.memory} and a longer one (the claim is about memory beyond training)"
            )
        lengths = parse_ints(self.lengths, "lengths", 2, "64,128,256")
        if self.test_size < 2 * lengths[-1] + 2:
            raise ValueError(
                f"--test-size {self.test_size}: the timing at C = {lengths[-1]} needs at "
                f"least {2 * lengths[-1] + 2} characters of test text"
            )

    @property
    def memory_list(self) -> list[int]:
        """The evaluation memory lengths, increasing."""
        return parse_ints(self.eval_memories, "eval-memories", 0, "0,32,128")

    @property
    def length_list(self) -> list[int]:
        """The timing's context lengths, increasing."""
        return parse_ints(self.lengths, "lengths", 2, "64,128,256")


__all__ = ["ContextConfig"]
