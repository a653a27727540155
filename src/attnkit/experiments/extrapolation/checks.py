"""The checks of the extrapolation experiment (evidence.py's contract), thresholds fixed from
the claim of Press et al. 2022 before any run (see extrapolation/__init__.py)."""

from __future__ import annotations

from typing import Any

from .. import evidence as ev
from ..base import mean_of_means

LEARNED_SHARE = 0.8  # design: both claimed arms' bpc at L at most 0.8 x the unigram bpc
FLAT = 0.02  # claim: ALiBi's bpc at k_max·L minus at L below +0.02 bpc (flat or better)
RISE = 0.0  # claim: sinusoidal's bpc at k_max·L minus at L above 0 (it gets worse)


def checks_of(n: dict[str, Any]) -> list[ev.Check]:
    """n: "bits" {arm: {k: [seed][block] bits, or None where the arm has no positions}},
    "unigram" [seed] bits. The claim compares each arm at the longest k with itself at k = 1
    on the same test blocks (paired over seeds x blocks)."""
    bits, unigram = n["bits"], sum(n["unigram"]) / len(n["unigram"])
    factors = sorted(bits["alibi"], key=int)
    one, top = factors[0], factors[-1]
    worst = max(mean_of_means(bits[a][one]) for a in ("sinusoidal", "alibi"))
    return [
        ev.learned(f"worse of sinusoidal, ALiBi bpc at L / unigram bpc ({unigram:.3f})",
                   worst / unigram, LEARNED_SHARE, above=False),  # fmt: skip
        ev.on_interval(f"ALiBi bpc at {top}L - at L",
                       ev.paired_bootstrap(bits["alibi"][top], bits["alibi"][one]), FLAT,
                       above=False),  # fmt: skip
        ev.on_interval(f"sinusoidal bpc at {top}L - at L",
                       ev.paired_bootstrap(bits["sinusoidal"][top], bits["sinusoidal"][one]),
                       RISE),  # fmt: skip
    ]


__all__ = ["FLAT", "LEARNED_SHARE", "RISE", "checks_of"]
