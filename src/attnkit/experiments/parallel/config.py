"""The settings of the parallel experiment (parallel/__init__.py); every field is a flag of
``attnkit experiment parallel``."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..base import option


@dataclass
class ParallelConfig:
    lengths: str = option("8,16,32,64,128,256", "sentence lengths n, comma-separated")
    batch_size: int = option(32, "sentences per step, the same at every n")
    vocab: int = option(32, "vocabulary of the random tokens")
    emb: int = option(32, "RNNsearch embedding width")
    hidden: int = option(
        64, "RNNsearch widths: encoder (per direction), decoder, attention, maxout"
    )
    dim: int = option(48, "Transformer model width d")
    ff: int = option(192, "Transformer feed-forward width")
    heads: int = option(4, "Transformer heads")
    layers: int = option(2, "Transformer layers, encoder and decoder each")
    timing_lengths: str = option("256,512,1024", "sentence lengths n at which the speed-up "
                                 "from 1 to --threads threads is timed, comma-separated")
    timing_batch: int = option(8, "sentences per timed step")
    warmup: int = option(2, "untimed steps per model, thread count and length")
    repeats: int = option(20, "timed steps per model, thread count and length, interleaved")
    threads: int = option(2, "intra-op threads compared with 1 (the machine needs as many "
                          "cores)")
    max_load: float = option(1.5, "the highest 1-minute load average, before and after the "
                             "timing, at which the timings count")
    seed: int = option(0, "initialisation and token seed")

    def __post_init__(self) -> None:
        ns, _ = self.ns, self.timing_ns  # parse, or raise
        if len(ns) < 2 or len(set(ns)) != len(ns) or min(ns) < 1:
            raise ValueError(
                f"--lengths {self.lengths!r}: give at least two different lengths >= 1, "
                "e.g. 8,16,32 (the exponents are fitted across them)"
            )
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "batch_size", "emb", "hidden", "dim", "ff", "heads", "layers", "repeats",
            "timing_batch"))  # fmt: skip
        if self.threads < 2:
            raise ValueError(f"--threads {self.threads}: the speed-up compares 1 thread with "
                             "--threads, so it must be at least 2")  # fmt: skip
        if self.vocab < 4:
            raise ValueError(f"--vocab {self.vocab}: need at least 4 (3 ids are reserved)")
        if self.warmup < 0:
            raise ValueError(f"--warmup {self.warmup}; it must not be negative")
        if self.dim % self.heads or self.dim % 2:
            raise ValueError(f"--dim {self.dim} must be even and divisible by --heads "
                             f"{self.heads}")  # fmt: skip

    @property
    def ns(self) -> list[int]:
        return _ints(self.lengths, "--lengths")

    @property
    def timing_ns(self) -> list[int]:
        got = _ints(self.timing_lengths, "--timing-lengths")
        if not got or min(got) < 1:
            raise ValueError(f"--timing-lengths {self.timing_lengths!r}: give lengths >= 1")
        return got


def _ints(text: str, flag: str) -> list[int]:
    try:
        return sorted(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(
            f"{flag} {text!r}: expected comma-separated integers, e.g. 8,16,32"
        ) from None
