"""The checks of the context experiment (evidence.py's contract), thresholds fixed from the
claims of Dai et al. 2019 before any run (see context/__init__.py)."""

from __future__ import annotations

import math
from typing import Any

from .. import evidence as ev
from ..base import mean_of_means, power_exponent

LEARNED_SHARE = 0.8  # design: the better model's bpc is at most 0.8 x the unigram bpc
SPEEDUP_PER_CONTEXT = 1 / 20  # (b): speedup at the largest C above C / 20
GROWTH = 0.5  # (b): the speedup grows at least as C^0.5 (the paper's grows about as C^1)


def checks_of(n: dict[str, Any]) -> list[ev.Check]:
    """n: "xl" {memory: [seed][segment] bits}, "vanilla" [seed][segment] bits (sliding
    window), "train_memory", "unigram" [seed] bits, "timing" {C: [(vanilla s, xl s) per
    repeat]}."""
    xl, memories = n["xl"], sorted(n["xl"], key=int)
    at_train, longest = xl[str(n["train_memory"])], xl[memories[-1]]
    lengths = sorted(n["timing"], key=int)
    speedups = {c: [v / x for v, x in n["timing"][c]] for c in lengths}
    repeats = len(speedups[lengths[0]])
    exponents = [power_exponent([int(c) for c in lengths], [speedups[c][r] for c in lengths])
                 for r in range(repeats)]  # fmt: skip
    c_max = int(lengths[-1])
    best = min(mean_of_means(at_train), mean_of_means(n["vanilla"]))
    unigram = sum(n["unigram"]) / len(n["unigram"])
    return [
        ev.learned(f"best bpc / unigram bpc ({unigram:.3f})", best / unigram, LEARNED_SHARE,
                   above=False),  # fmt: skip
        ev.on_interval("(a) vanilla bpc - XL bpc", ev.paired_bootstrap(n["vanilla"], at_train),
                       0.0),  # fmt: skip
        ev.on_interval(f"(c) XL bpc at memory {n['train_memory']} - at {memories[-1]}",
                       ev.paired_bootstrap(at_train, longest), 0.0),  # fmt: skip
        ev.on_interval(f"(b) speedup at C = {c_max}", _interval(speedups[lengths[-1]]),
                       c_max * SPEEDUP_PER_CONTEXT),  # fmt: skip
        ev.on_interval("(b) exponent of the speedup in C", _interval(exponents), GROWTH),
    ]


def _interval(xs: list[float]) -> ev.Interval:
    """A t interval over repeats (a point with a zero-width interval for one repeat)."""
    if len(xs) == 1:
        return ev.Interval(xs[0], xs[0], xs[0], 1)
    if any(not math.isfinite(x) for x in xs):
        return ev.Interval(math.nan, -math.inf, math.inf, len(xs))
    return ev.t_interval(xs)


__all__ = ["GROWTH", "LEARNED_SHARE", "SPEEDUP_PER_CONTEXT", "checks_of"]
