"""The checks of the streaming experiment (evidence.py's contract), fixed from the claims of
Xiao et al. 2023 before the verdict's seeds ran (see streaming/__init__.py): t-intervals,
95%, over the per-seed gaps (each seed's mean bpc over its streams past the training length;
every arm of a seed reads the same streams with the same model: paired).

The compared arms are the window without sinks and the window with sinks (claim i). The
recomputation baseline and dense attention are reported beside them, with intervals, and
judge nothing: the paper gives no margin for "nearly matching" the baseline (Fig. 3), and
dense attention past the training length is context for the figure.
"""

from __future__ import annotations

import statistics
from typing import Any

from .. import evidence as ev

ARMS = ("window", "sinks", "recompute", "dense")
"""Every arm, in the order of the tables."""
COMPARED = ("window", "sinks")
"""The arms claim (i) compares."""
LABELS = {"window": "window, no sinks", "sinks": "window + sinks (StreamingLLM)",
          "recompute": "sliding window, recomputed", "dense": "dense, past L"}  # fmt: skip
"""How the tables name each arm."""


def seed_means(rows: list[list[float]]) -> list[float]:
    """Each seed's mean bits per character over its streams."""
    return [statistics.fmean(r) for r in rows]


def gap(a: list[list[float]], b: list[list[float]]) -> ev.Interval:
    """bpc of ``a`` − bpc of ``b``: the t-interval over the per-seed gaps (paired)."""
    return ev.t_interval([x - y for x, y in zip(seed_means(a), seed_means(b), strict=True)])


def degrades(name: str, window: list[float], recompute: list[float]) -> ev.Check:
    """The calibration (a seed disjoint from the verdict's): the window without sinks is
    worse than recomputation, a t-interval over the calibration streams' paired gaps wholly
    above 0; otherwise INCONCLUSIVE, since a model that never leans on its first tokens
    cannot show what keeping them buys."""
    gaps = [w - r for w, r in zip(window, recompute, strict=True)]
    return ev.above_zero(name, ev.t_interval(gaps), "at this scale evicting the first tokens "
                         "costs nothing, so keeping them cannot help")  # fmt: skip


def checks_of(n: dict[str, Any]) -> list[ev.Check]:
    """n: "bits" {arm: [seed][stream] bpc past L}, "unigram" [seed] bpc, "calibration"
    {"window" | "recompute": [stream] bpc} of the calibration seed, "stops" [epochs per
    seed], "censored" [bool per seed], "cap" (epochs), "sinks" (s)."""
    bits = n["bits"]
    unigram = [[u] for u in n["unigram"]]
    cal = n["calibration"]
    return [
        degrades(f"(calibration, seed {cal['seed']}) window without sinks - recomputation",
                 cal["window"], cal["recompute"]),  # fmt: skip
        ev.off_floor(f"{LABELS['sinks']} learnt: unigram bpc - its bpc",
                     gap(unigram, bits["sinks"])),  # fmt: skip
        ev.plateau_cap("transformer-lm: cap / median stopping epoch", n["stops"], n["cap"],
                       sum(n["censored"])),  # fmt: skip
        ev.on_interval(f"(i) bpc(window) - bpc(window + {n['sinks']} sinks)",
                       gap(bits["window"], bits["sinks"]), 0.0),  # fmt: skip
    ]


def reported_of(n: dict[str, Any]) -> list[dict[str, Any]]:
    """Each arm's bpc − the recomputation baseline's (claim ii and the dense arm, reported,
    not checked), with its t-interval over seeds."""
    out = []
    for arm in ("sinks", "window", "dense"):
        i = gap(n["bits"][arm], n["bits"]["recompute"])
        out.append({"name": f"bpc({LABELS[arm]}) - bpc(recomputation)", "value": i.value,
                    "ci": [i.lo, i.hi], "n": i.n})  # fmt: skip
    return out


__all__ = ["ARMS", "COMPARED", "LABELS", "checks_of", "degrades", "gap", "reported_of",
           "seed_means"]
