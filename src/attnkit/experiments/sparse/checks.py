"""The checks of the sparse experiment (evidence.py's contract), thresholds fixed from the
claim of Child et al. 2019 before any run (see sparse/__init__.py). The compared arms are
dense and fixed (the pattern the paper uses on text); strided and the sliding window are
reported beside them, never checked, and never withhold the verdict."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from .. import evidence as ev
from ..base import power_exponent
from ..pool import PLATEAU_EPS, plateaued, runs_of

LEARNED_SHARE = 0.8  # design: each dense seed's bpc at most 0.8 x its text's unigram bpc
NAME_BITS = 1.0
"""design: every dense seed learned the text's long-range structure: at most 1 bit per copied
name letter (``measure.copy_targets``; without the copy a letter costs log2(26) = 4.7 bits)."""
SLOPE = (1.3, 1.7)  # claim: the patterns' memory grows as n^p, p in [1.3, 1.7] (n·√n: 1.5)
DENSE_SLOPE = 1.8  # design: dense attention's memory slope at least 1.8 (n²: the grid sees it)
COMPARED = ("dense", "fixed")  # the quality claim on text: fixed against dense (Table 2, §7.2)
PATTERNS = ("strided", "fixed")  # the cost claim: both factorisations grow as n·√n
REPORTED = ("strided", "sliding")  # quality beside dense, with an interval, not checked


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


def converged(curves: Mapping[str, Sequence[Sequence[float]]], patience: int,
              seeds: Sequence[int]) -> ev.Check:  # fmt: skip
    """A design check: every run of the arms the claim compares (dense and fixed, each seed)
    ended on its plateau (``plateaued``); value = the runs that did not, named by seed. One
    run short of its plateau makes the verdict INCONCLUSIVE: its bpc is a budget's, not the
    arm's."""
    runs = [(arm, s, c) for arm in COMPARED for s, c in zip(seeds, curves[arm], strict=True)]
    short = [f"{arm} seed {s}" for arm, s, c in runs if not plateaued(c, patience)]
    reason = (f"runs on their valid-bpc plateau: {len(runs) - len(short)} of {len(runs)} (the "
              f"last {patience} validations lowered the best by < {PLATEAU_EPS} bpc)")  # fmt: skip
    return ev.none_short("runs short of their plateau (dense, fixed)", short, reason,
                         "at the cap, still improving")  # fmt: skip


def long_range(name_bits: Sequence[float], seeds: Sequence[int]) -> ev.Check:
    """A design check, per seed: every dense run learned the long-range structure (at most
    ``NAME_BITS`` bits per copied name letter); value = the dense seeds that did not. A seed
    that did not makes the verdict INCONCLUSIVE: a fixed pattern matched against a dense
    model that never used its reach says nothing about long sequences."""
    short = [f"seed {s} ({b:.2f})" for s, b in zip(seeds, name_bits, strict=True)
             if not b <= NAME_BITS]  # fmt: skip
    shown = ", ".join(f"{b:.2f}" for b in name_bits)
    reason = (f"dense seeds that learned the long-range structure (<= {NAME_BITS:g} bit per "
              f"copied name letter): {len(name_bits) - len(short)} of {len(name_bits)} "
              f"({shown})")  # fmt: skip
    return ev.none_short("dense seeds without the long-range structure", short, reason,
                         "not learned")  # fmt: skip


def seed_gaps(bits: Mapping[str, Sequence[Sequence[float]]], arm: str) -> list[float]:
    """Per seed, the arm's mean test bpc minus dense's (the same text and segments)."""
    return [sum(a) / len(a) - sum(d) / len(d)
            for a, d in zip(bits[arm], bits["dense"], strict=True)]  # fmt: skip


def reported(n: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The arms reported beside dense, not checked: per arm, the per-seed gaps to dense and
    their mean with its 95% t-interval (``None`` with fewer than 2 seeds)."""
    out = {}
    for arm in (a for a in REPORTED if a in n["bits"]):
        gaps = seed_gaps(n["bits"], arm)
        i = ev.t_interval(gaps) if len(gaps) >= 2 else None
        out[arm] = {"gaps": [round(g, 4) for g in gaps],
                    "gap": None if i is None else [round(x, 4) for x in (i.value, i.lo, i.hi)]}
    return out


def checks_of(n: dict[str, Any]) -> list[ev.Check]:
    """n: "seeds", "bits" {arm: [seed][segment] bits at length n}, "name_bits" {arm: [seed]
    bits per copied name letter}, "unigram" [seed] bits, "curves" {arm: [seed][validation]
    valid bpc}, "patience", "cost" {arm: {n: {"saved_bytes", "seconds"}}}. Quality: a
    t-interval over the seeds' paired gaps (fixed - dense, each seed's mean over its test
    segments). The memory slopes are exact (saved bytes do not vary): their interval is a
    point. Only dense and fixed enter the design checks on training."""
    bits = n["bits"]
    worst = max((sum(b) / len(b)) / u for b, u in zip(bits["dense"], n["unigram"], strict=True))
    dense_slope = memory_slope(n["cost"]["dense"])
    checks = [
        ev.learned("dense bpc / unigram bpc, the worst seed", worst, LEARNED_SHARE,
                   above=False),
        long_range(n["name_bits"]["dense"], n["seeds"]),
        converged(n["curves"], n["patience"], n["seeds"]),
        ev.learned("dense memory slope p (saved bytes ∝ n^p)", dense_slope, DENSE_SLOPE),
        ev.on_interval("fixed bpc - dense bpc", ev.t_interval(seed_gaps(bits, "fixed")), 0.0,
                       above=False),  # fmt: skip
    ]
    for arm in PATTERNS:
        p = memory_slope(n["cost"][arm])
        point = ev.Interval(p, p, p, len(n["cost"][arm]))
        checks.append(ev.on_interval(f"{arm} memory slope p", point, SLOPE[0]))
        checks.append(ev.on_interval(f"{arm} memory slope p", point, SLOPE[1], above=False))
    return checks


__all__ = ["COMPARED", "DENSE_SLOPE", "LEARNED_SHARE", "NAME_BITS", "PLATEAU_EPS", "REPORTED",
           "SLOPE", "checks_of", "converged", "long_range", "memory_slope", "plateaued",
           "reported", "runs_of", "seed_gaps", "time_slope"]  # fmt: skip
