"""The settings of the complexity experiment (complexity/__init__.py); every field is a flag of
``attnkit experiment complexity``."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..base import option


def ints(text: str, name: str) -> list[int]:
    """A comma-separated list of positive ints, sorted ascending, no repeats."""
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"--{name} {text!r}: give comma-separated integers, e.g. 64,128") from None
    if not values or values[0] < 1:
        raise ValueError(f"--{name} {text!r}: give at least one integer, all >= 1")
    return values


@dataclass
class ComplexityConfig:
    ns: str = option("32,64,128,256,512,1024,2048,4096", "sequence lengths n, comma-separated")
    ds: str = option("64,128,256", "model widths d, comma-separated (each divisible by --heads)")
    batch: int = option(4, "sequences per pass")
    heads: int = option(4, "attention heads")
    kernel: int = option(3, "convolution kernel k")
    radius: int = option(16, "restricted self-attention radius r, |i - j| <= r")
    repeats: int = option(5, "timed fwd+bwd passes per point after one warm-up; the fastest "
                        "counts")  # fmt: skip
    path_n: int = option(64, "sequence length of the path-length stacks")
    path_d: int = option(8, "width of the path-length stacks")
    threads: int = option(1, "torch threads")
    seed: int = option(0, "initialisation and input seed")

    def __post_init__(self) -> None:
        ns, ds = ints(self.ns, "ns"), ints(self.ds, "ds")
        if len(ns) < 2:
            raise ValueError(f"--ns {self.ns!r}: need at least two lengths to fit an exponent")
        if self.heads < 1 or any(d % self.heads for d in ds):
            raise ValueError(f"--ds {self.ds!r}: every d must be divisible by --heads {self.heads}")
        if self.kernel < 2:
            raise ValueError(f"--kernel {self.kernel}: a kernel of at least 2 connects positions")
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "batch", "radius", "repeats", "path_d", "threads"
        ))  # fmt: skip
        if self.path_n < 2:
            raise ValueError(f"--path-n {self.path_n}: need at least 2 positions")

    @property
    def n_grid(self) -> list[int]:
        return ints(self.ns, "ns")

    @property
    def d_grid(self) -> list[int]:
        return ints(self.ds, "ds")
