"""The checks of the sparse experiment (evidence.py's contract), thresholds fixed from the
claim of Child et al. 2019 before any run (see sparse/__init__.py)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from .. import evidence as ev
from ..base import mean_of_means, power_exponent
from ..pool import plateau

LEARNED_SHARE = 0.8  # design: dense bpc at most 0.8 x the unigram bpc of the test text
EPSILON = 0.05  # claim: bpc(pattern) - bpc(dense) below +0.05 bpc (matches dense)
SLOPE = (1.3, 1.7)  # claim: the patterns' memory grows as n^p, p in [1.3, 1.7] (n·√n: 1.5)
DENSE_SLOPE = 1.8  # design: dense attention's memory slope at least 1.8 (n²: the grid sees it)
PATTERNS = ("strided", "fixed")
PLATEAU_EPS = 0.01
"""design: a run is on its plateau when its last ``patience`` validations lowered its best
valid bpc by less than 0.01 bpc (a fifth of ``EPSILON``); early stopping firing is the case
of no lowering at all. Fixed with the cap and patience, before any run that trains to them."""


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


def plateaued(curve: Sequence[float], patience: int, eps: float = PLATEAU_EPS) -> bool:
    """Whether a run's valid bpc, one per validation, ended on its plateau: more than
    ``patience`` validations, and the last ``patience`` of them lowered the best valid bpc by
    less than ``eps``. A run cut by the cap while still improving is not on its plateau."""
    if len(curve) <= patience:
        return False
    return min(curve[:-patience]) - min(curve) < eps


def converged(curves: Mapping[str, Sequence[Sequence[float]]], patience: int) -> ev.Check:
    """A design check: every run of the arms the claim compares (dense, strided, fixed; each
    seed) ended on its plateau (``plateaued``); value = the runs that did not. One run short
    of its plateau makes the verdict INCONCLUSIVE: its bpc is a budget's, not the arm's."""
    runs = [(arm, k, c) for arm in ("dense", *PATTERNS) for k, c in enumerate(curves[arm])]
    short = [f"{arm} seed #{k + 1}" for arm, k, c in runs if not plateaued(c, patience)]
    reason = (f"runs on their valid-bpc plateau: {len(runs) - len(short)} of {len(runs)} (the "
              f"last {patience} validations lowered the best by < {PLATEAU_EPS} bpc)")  # fmt: skip
    if short:
        reason += f"; at the cap, still improving: {', '.join(short)}"
    n = float(len(short))
    return ev.Check("runs short of their plateau (dense, strided, fixed)", n, (n, n), 0.0,
                    ev.INCONCLUSIVE if short else ev.PASS, "design", reason)  # fmt: skip


def runs_of(curves: Mapping[str, Sequence[Sequence[float]]], seeds: Sequence[int],
            patience: int, per_epoch: int) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
    """{arm: one summary per seed}: the updates run, the update of the lowest valid bpc
    (the weights measured), that bpc, how the run ended (early stopping, or the cap) and
    whether it reached its plateau (``plateaued``)."""
    def one(seed: int, c: Sequence[float]) -> dict[str, Any]:
        best = c.index(min(c))
        ended = "early stopping" if plateau(len(c), best + 1, patience) else "cap"
        return {"seed": seed, "updates": len(c) * per_epoch, "best_update": (best + 1) * per_epoch,
                "best_valid_bpc": min(c), "ended": ended, "plateau": plateaued(c, patience)}

    return {arm: [one(s, c) for s, c in zip(seeds, cs, strict=True)] for arm, cs in curves.items()}


def checks_of(n: dict[str, Any]) -> list[ev.Check]:
    """n: "bits" {arm: [seed][segment] bits at length n}, "unigram" [seed] bits, "curves"
    {arm: [seed][validation] valid bpc}, "patience", "cost" {arm: {n: {"saved_bytes",
    "seconds"}}}. Quality is paired over seeds x test segments; the memory slopes are exact
    (saved bytes do not vary), so their interval is a point."""
    bits, unigram = n["bits"], sum(n["unigram"]) / len(n["unigram"])
    dense_slope = memory_slope(n["cost"]["dense"])
    checks = [
        ev.learned(f"dense bpc / unigram bpc ({unigram:.3f})",
                   mean_of_means(bits["dense"]) / unigram, LEARNED_SHARE, above=False),  # fmt: skip
        converged(n["curves"], n["patience"]),
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


__all__ = ["DENSE_SLOPE", "EPSILON", "LEARNED_SHARE", "PLATEAU_EPS", "SLOPE", "checks_of",
           "converged", "memory_slope", "plateaued", "runs_of", "time_slope"]  # fmt: skip
