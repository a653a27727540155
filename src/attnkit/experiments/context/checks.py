"""The checks of the context experiment (evidence.py's contract), fixed from the claims of
Dai et al. 2019 before the verdict's seeds ran (see context/__init__.py): t-intervals over
the per-seed gaps (each seed's mean over its test segments; the same segments for every
arm of a seed: paired), over the timing repeats for (b); design checks on the compared
cells only, each on its own.

The compared cells: for (a) the vanilla LM with its sliding window and XL at its training
memory; for (c) XL at its training memory and at the longest evaluation memory. XL at other
memories and the vanilla LM read segment by segment are reported, and judge nothing.
(c) has a positive control (``uses_memory``): XL must gain from its own training memory
over a shorter one, or no gain from a longer one could show.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from .. import evidence as ev
from ..base import power_exponent

ARM_RUNS = {"transformer-xl": "xl", "transformer-lm": "vanilla"}
"""The trained models, and the key of their stopping points in the numbers."""


def seed_means(rows: list[list[float]]) -> list[float]:
    """Each seed's mean bits per character over its test segments."""
    return [statistics.fmean(r) for r in rows]


def gap(a: list[list[float]], b: list[list[float]]) -> ev.Interval:
    """bpc of ``a`` − bpc of ``b``: the t-interval over the per-seed gaps (paired)."""
    return ev.t_interval([x - y for x, y in zip(seed_means(a), seed_means(b), strict=True)])


def compared(n: dict[str, Any]) -> dict[str, list[list[float]]]:
    """The compared cells, by name: the vanilla LM's sliding window, XL at its training
    memory and at the longest evaluation memory."""
    longest = max(n["xl"], key=int)
    return {"transformer-lm, sliding window": n["vanilla"],
            f"transformer-xl, memory {n['train_memory']}": n["xl"][str(n["train_memory"])],
            f"transformer-xl, memory {longest}": n["xl"][longest]}  # fmt: skip


def checks_of(n: dict[str, Any]) -> list[ev.Check]:
    """n: "xl" {memory: [seed][segment] bits}, "vanilla" [seed][segment] bits (sliding
    window), "train_memory", "unigram" [seed] bits, "timing" {C: [(vanilla s, xl s) per
    repeat]}, "stops" {"xl" | "vanilla": [epochs per seed]}, "censored" {same: [bool per
    seed]}, "cap" (epochs)."""
    xl, memories = n["xl"], sorted(n["xl"], key=int)
    at_train, longest = xl[str(n["train_memory"])], xl[memories[-1]]
    lengths = sorted(n["timing"], key=int)
    speedups = {c: [v / x for v, x in n["timing"][c]] for c in lengths}
    repeats = len(speedups[lengths[0]])
    exponents = [power_exponent([int(c) for c in lengths], [speedups[c][r] for c in lengths])
                 for r in range(repeats)]  # fmt: skip
    unigram = [[u] for u in n["unigram"]]  # one number per seed
    floors = [ev.off_floor(f"{name} learnt: unigram bpc - its bpc", gap(unigram, rows))
              for name, rows in compared(n).items()]  # fmt: skip
    plateaus = [ev.plateau_cap(f"{arm}: cap / median stopping epoch", n["stops"][key],
                               n["cap"], sum(n["censored"][key]))
                for arm, key in ARM_RUNS.items()]  # fmt: skip
    return [
        *floors,
        *plateaus,
        *uses_memory(n),
        ev.on_interval("(a) vanilla bpc - XL bpc", gap(n["vanilla"], at_train), 0.0),
        ev.on_interval(f"(c) XL bpc at memory {n['train_memory']} - at {memories[-1]}",
                       gap(at_train, longest), 0.0),  # fmt: skip
        ev.on_interval(f"(b) speedup at C = {lengths[-1]}", _interval(speedups[lengths[-1]]),
                       1.0),  # fmt: skip
        ev.on_interval("(b) exponent of the speedup in C", _interval(exponents), 0.0),
    ]


def uses_memory(n: dict[str, Any]) -> list[ev.Check]:
    """(c)'s positive control, a design check: XL makes use of its own training memory M,
    bpc at the longest evaluation memory below M − bpc at M > 0 (t-interval over seeds).
    A model that gains nothing from the memory it was trained with has no use for a longer
    one to show, whatever its relative encodings do: (c) cannot tell then. None when no
    evaluation memory below M was measured."""
    m = n["train_memory"]
    shorter = sorted((k for k in n["xl"] if 0 < int(k) < m), key=int)
    if not shorter:
        return []
    k = shorter[-1]
    return [ev.off_floor(f"(c) XL uses its training memory: bpc at memory {k} - at {m}",
                         gap(n["xl"][k], n["xl"][str(m)]))]  # fmt: skip


def reported_of(n: dict[str, Any]) -> list[dict[str, Any]]:
    """XL's bpc at its training memory − at each other memory longer than it (the longest is
    checked as (c); the others judge nothing), each with its t-interval over seeds."""
    m = n["train_memory"]
    longer = sorted((k for k in n["xl"] if int(k) > m), key=int)[:-1]
    out = []
    for k in longer:
        i = gap(n["xl"][str(m)], n["xl"][k])
        out.append({"name": f"XL bpc at memory {m} - at {k}", "value": i.value,
                    "ci": [i.lo, i.hi], "n": i.n})  # fmt: skip
    return out


def _interval(xs: list[float]) -> ev.Interval:
    """A t interval over repeats (a point with a zero-width interval for one repeat)."""
    if len(xs) == 1:
        return ev.Interval(xs[0], xs[0], xs[0], 1)
    if any(not math.isfinite(x) for x in xs):
        return ev.Interval(math.nan, -math.inf, math.inf, len(xs))
    return ev.t_interval(xs)


__all__ = ["ARM_RUNS", "checks_of", "compared", "gap", "reported_of", "seed_means", "uses_memory"]
