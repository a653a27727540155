"""The settings of the scaling experiment (scaling.py) and the names they parse: apart so that
the trained part (jobs.py) reads them without an import loop."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..._flags import str_list
from ..base import Pooled, Seeds, check_schedule, option, parse_ints

SCORES = ("dot", "scaled_dot")  # unscaled, scaled


FALL_FROM = 16  # A: the monotone fall is checked from this d_k on
CAP = 6000  # C: the cap on updates (10x the 600 at which every run of the earlier design was cut)



def parse_widths(text: str) -> list[tuple[int, int]]:
    """ "2x16,2x64" -> [(heads 2, d_k 16), (2, 64)], d_k increasing."""
    out = []
    for part in str_list(text):
        h, sep, d = part.partition("x")
        if not (sep and h.isdigit() and d.isdigit() and int(h) >= 1 and int(d) >= 1):
            raise ValueError(f"--widths {text!r}: give HEADSxD_K pairs, e.g. 2x16,2x64")
        if int(h) * int(d) % 2:
            raise ValueError(f"--widths {part}: heads x d_k must be even (sinusoid widths)")
        out.append((int(h), int(d)))
    if len(out) < 2 or [d for _, d in out] != sorted({d for _, d in out}):
        raise ValueError(f"--widths {text!r}: give two or more widths with increasing d_k")
    return out


@dataclass
class ScalingConfig(Seeds, Pooled):
    """The settings of (a) random q, k, (c) the Transformers and their shared stopping rule;
    every field is a flag of ``attnkit experiment scaling``."""

    dims: str = option("4,16,64,256,1024", "d_k values of the random q, k")
    rows: int = option(2048, "query rows measured per d_k")
    keys: int = option(64, "keys per row, Tk")
    queries: int = option(32, "queries sharing one set of keys")
    random_seeds: int = option(5, "draws of the random q, k, g (seed, seed+1, ...)")
    widths: str = option(
        "2x16,2x32,2x64",
        "Transformer widths HEADSxD_K, d_model = heads x d_k",
    )
    layers: int = option(1, "encoder and decoder layers; d_ff = 2 d_model, no dropout")
    task: str = option("reverse", "copy | reverse | sort")
    min_len: int = option(4, "shortest source")
    max_len: int = option(12, "longest source")
    seeds: int = option(5, "seeds of the trained part (data and initialisation: seed, seed+1, ...)")
    steps: int = option(CAP, "cap on the updates per model, the same for all")
    epoch_steps: int = option(100, "updates between two validations")
    patience: int = option(2, "validations without a lower valid loss before stopping")
    batch_size: int = option(32, "pairs per update")
    lr: float = option(1e-3, "Adam learning rate, constant")
    valid_size: int = option(200, "validation pairs")
    test_size: int = option(200, "test pairs")
    seed: int = option(0, "first seed of the random q, k, g, the data and the initialisation")

    def __post_init__(self) -> None:
        dims = parse_ints(self.dims, "dims", 1, "4,16,64")
        if sum(d >= FALL_FROM for d in dims) < 2:
            raise ValueError(f"--dims {self.dims!r}: give two or more d_k >= {FALL_FROM} (the "
                             "fall is checked from there)")  # fmt: skip
        parse_widths(self.widths)
        if self.task not in ("copy", "reverse", "sort"):
            raise ValueError(f"--task {self.task!r}; choose copy, reverse or sort")
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(f"lengths {self.min_len}..{self.max_len}: need 1 <= min <= max")
        if self.keys < 2:
            raise ValueError(f"--keys {self.keys}: a softmax over one key is always one-hot")
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "rows", "queries", "layers", "steps", "epoch_steps", "batch_size", "valid_size",
            "test_size", "jobs", "threads"
        ))  # fmt: skip
        for name in ("seeds", "random_seeds"):
            if getattr(self, name) < 2:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 2 (an interval)")
        check_schedule(self)


def run_name(heads: int, d_k: int, score: str, seed: int) -> str:
    """The folder of one trained model, e.g. ``2x64-dot-s0``."""
    return f"{heads}x{d_k}-{score}-s{seed}"


__all__ = ["FALL_FROM", "SCORES", "ScalingConfig", "parse_ints", "parse_widths", "run_name"]
