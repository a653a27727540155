"""The checks of the sparse experiment (evidence.py's contract), thresholds fixed from the
claim of Child et al. 2019 before any run (see sparse/__init__.py)."""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

from .. import evidence as ev
from ..base import mean_of_means, power_exponent

LEARNED_SHARE = 0.8  # design: dense bpc at most 0.8 x the unigram bpc of the test text
EPSILON = 0.05  # claim: bpc(pattern) - bpc(dense) below +0.05 bpc (matches dense)
SLOPE = (1.3, 1.7)  # claim: the patterns' memory grows as n^p, p in [1.3, 1.7] (n·√n: 1.5)
DENSE_SLOPE = 1.8  # design: dense attention's memory slope at least 1.8 (n²: the grid sees it)
PATTERNS = ("strided", "fixed")


def memory_slope(cost: dict[str, dict[str, Any]]) -> float:
    """p of saved bytes ∝ n^p over the grid (least squares in log-log)."""
    ns = sorted(cost, key=int)
    return power_exponent([int(n) for n in ns], [cost[n]["saved_bytes"] for n in ns])


def time_slope(cost: dict[str, dict[str, Any]], resamples: int = 2000, seed: int = 0
               ) -> ev.Interval:  # fmt: skip
    """p of time ∝ n^p from the median time at each n, with a percentile interval from
    resampling the repeats at each n."""
    ns = sorted(cost, key=int)
    xs = [int(n) for n in ns]
    med = power_exponent(xs, [statistics.median(cost[n]["seconds"]) for n in ns])
    rng = random.Random(seed)
    stats = sorted(
        power_exponent(xs, [statistics.median(rng.choices(cost[n]["seconds"],
                                                          k=len(cost[n]["seconds"])))
                            for n in ns]) for _ in range(resamples))  # fmt: skip
    lo = stats[int(math.floor(0.025 * (resamples - 1)))]
    hi = stats[int(math.ceil(0.975 * (resamples - 1)))]
    return ev.Interval(med, min(lo, med), max(hi, med), len(ns) * len(cost[ns[0]]["seconds"]))


def checks_of(n: dict[str, Any]) -> list[ev.Check]:
    """n: "bits" {arm: [seed][segment] bits at length n}, "unigram" [seed] bits, "cost"
    {arm: {n: {"saved_bytes", "seconds"}}}. Quality is paired over seeds x test segments;
    the memory slopes are exact (saved bytes do not vary), so their interval is a point."""
    bits, unigram = n["bits"], sum(n["unigram"]) / len(n["unigram"])
    dense_slope = memory_slope(n["cost"]["dense"])
    checks = [
        ev.learned(f"dense bpc / unigram bpc ({unigram:.3f})",
                   mean_of_means(bits["dense"]) / unigram, LEARNED_SHARE, above=False),  # fmt: skip
        ev.learned("dense memory slope p (saved bytes ∝ n^p)", dense_slope, DENSE_SLOPE),
    ]
    for arm in PATTERNS:
        checks.append(ev.on_interval(f"{arm} bpc - dense bpc",
                                     ev.paired_bootstrap(bits[arm], bits["dense"]), EPSILON,
                                     above=False))  # fmt: skip
    for arm in PATTERNS:
        p = memory_slope(n["cost"][arm])
        point = ev.Interval(p, p, p, len(n["cost"][arm]))
        checks.append(ev.on_interval(f"{arm} memory slope p", point, SLOPE[0]))
        checks.append(ev.on_interval(f"{arm} memory slope p", point, SLOPE[1], above=False))
    return checks


__all__ = ["DENSE_SLOPE", "EPSILON", "LEARNED_SHARE", "SLOPE", "checks_of",
           "memory_slope", "time_slope"]  # fmt: skip
