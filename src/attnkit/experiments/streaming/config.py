"""The settings of the streaming experiment (streaming/__init__.py); every field is a flag of
``attnkit experiment streaming``."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..base import option
from ..pool import LMFlags

POSITIONS = ("rope", "alibi")
"""The relative position stages StreamingLLM applies to (§3.2: RoPE, ALiBi)."""


@dataclass
class StreamingConfig(LMFlags):
    """The generated text, the Transformer LM (a relative position stage) trained at L to a
    validation plateau, and the stream it is evaluated on: k·L characters decoded token by
    token under each cache policy."""

    train_size: int = option(60_000, "characters of generated training text")
    valid_size: int = option(3_000, "characters of validation text")
    test_size: int = option(8_192, "characters of test text, cut into streams")
    segment: int = option(64, "training length L (characters per segment)")
    stream: int = option(8, "stream length in multiples of L (the paper: 20K tokens, 5x-20x)")
    window: int = option(32, "recent tokens w a window keeps (w <= L)")
    sinks: int = option(4, "first tokens the StreamingLLM arm keeps beside the window")
    position: str = option("rope", "the position stage in every attention: rope or alibi")
    ff: int = option(256, "feed-forward width")
    batch_size: int = option(16, "segments per update")
    epochs: int = option(30, "cap on the passes over the training text (one validation each)")
    patience: int = option(2, "validations without a lower valid loss before a run stops")
    seeds: int = option(5, "seeds seed, seed+1, ...: each a new text and initialisation")
    calibration_seed: int = option(
        1000, "seed of the calibration run (disjoint from the verdict's): does the window "
        "without sinks degrade at this scale at all?")  # fmt: skip

    def __post_init__(self) -> None:
        check_ranges(self, positive=(
            "train_size", "valid_size", "test_size", "segment", "stream", "window", "dim",
            "heads", "layers", "ff", "epochs", "batch_size", "seeds", "jobs", "threads",
            "patience"), non_negative=("sinks",), fractions=(), as_flags=True)  # fmt: skip
        if self.seeds < 2:
            raise ValueError(f"--seeds {self.seeds}: an interval over seeds needs 2 at least "
                             "(5 for a verdict)")  # fmt: skip
        if self.position not in POSITIONS:
            raise ValueError(f"--position {self.position!r}: StreamingLLM renumbers a relative "
                             f"position stage; choose one of {', '.join(POSITIONS)}")  # fmt: skip
        if self.window > self.segment or self.sinks + self.window > self.segment:
            raise ValueError(
                f"--window {self.window} with --sinks {self.sinks}: the cache (sinks + window) "
                f"must fit the training length --segment {self.segment}, as in the paper"
            )
        if self.stream < 2:
            raise ValueError(f"--stream {self.stream}: the stream must run past the training "
                             "length; give 2 or more (multiples of L)")  # fmt: skip
        if self.test_size < 2 * self.stream_length:
            raise ValueError(
                f"--test-size {self.test_size}: two streams of {self.stream_length} characters "
                f"(--stream {self.stream} x --segment {self.segment}) need "
                f"{2 * self.stream_length} at least"
            )
        if self.seed <= self.calibration_seed < self.seed + self.seeds:
            raise ValueError(f"--calibration-seed {self.calibration_seed} is one of the "
                             f"verdict's seeds {self.seed_list}; pick a disjoint one")  # fmt: skip

    @property
    def stream_length(self) -> int:
        """Characters per stream: stream x L."""
        return self.stream * self.segment


__all__ = ["POSITIONS", "StreamingConfig"]
