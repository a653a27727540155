"""The alignment experiment's checks (evidence.py's contract), on numbers only: testable on
synthetic inputs. Thresholds fixed from the claim before any run.

The claim (Luong et al. 2015, Table 6): local attention aligns better than global, AER of
global (location) 0.39 > local-m 0.34, local-p 0.36, on English-German, a pair that reorders
locally. It is checked on CLAIM_ORDERING ("swap", data.py), with the source reversed as the
paper does, at each window D of the run; ``monotone`` and ``sov`` are the difficulty sweep
around it, reported with the same intervals but not checked (the paper makes no claim there).

  * (design) the task needs reordering: ``monotone`` has no crossing link (the control);
    ``swap`` and ``sov`` have crossing links in >= MIN_REORDERED of the test sentences;
  * (design) every arm of the claim reached greedy valid BLEU >= CRITERION (every seed)
    before its AER counts; an arm that did not makes the verdict INCONCLUSIVE;
  * (design) the arms' AER is off its floor: not every arm within FLOOR_EPS of AER 0 (then
    no gap could show);
  * (claim) per seed s, gap(s) = AER_global-location(s) - AER_best local(s) (the best local
    row by its mean AER over seeds; both rows trained with seed s: paired), its 95%
    t-interval over seeds above 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from .. import evidence as ev

GLOBAL = "global-location"  # the global row of the paper's Table 6
LOCALS = ("local-m", "local-p")
CLAIM_ORDERING = "swap"  # En->De-like local reordering: where the paper's claim is checked
MIN_REORDERED = 0.5  # swap and sov: at least half the test sentences have crossing links
FLOOR_EPS = 0.02  # AER within this of 0 for every arm: no gap can show
PerSeed = Mapping[str, Sequence[float]]  # row -> one number per seed

GAP = 0.0  # the claim: AER(global) - AER(best local) > 0
CRITERION = 95.0  # greedy valid BLEU an arm must reach before its AER counts


def reorders(ordering: str, fraction: float) -> ev.Check:
    """A design check: does ``ordering`` reorder as designed? ``monotone``: no sentence with
    crossing links; the others: at least MIN_REORDERED of them."""
    if ordering == "monotone":
        ok, want = fraction == 0.0, 0.0
        reason = f"{ordering}: {fraction:.0%} of test sentences with crossing links, needs 0%"
    else:
        ok, want = fraction >= MIN_REORDERED, MIN_REORDERED
        reason = (f"{ordering}: {fraction:.0%} of test sentences with crossing links, needs "
                  f">= {MIN_REORDERED:.0%}")  # fmt: skip
    if not ok:
        reason += ": the ordering does not test what it is meant to"
    return ev.Check(f"{ordering}: the task reorders as designed", fraction, (fraction, fraction),
                    want, ev.PASS if ok else ev.INCONCLUSIVE, "design", reason)  # fmt: skip


def all_learned(name: str, reached: Mapping[str, Sequence[bool]], bleu: PerSeed) -> ev.Check:
    """A design check: every seed of every arm reached the criterion; the value is the
    smallest share of seeds that did."""
    share = {a: sum(map(bool, r)) / len(r) for a, r in reached.items()}
    low = [f"{a} ({share[a]:.0%} of seeds, lowest valid BLEU {min(bleu[a]):.1f})"
           for a in reached if share[a] < 1]  # fmt: skip
    worst = min(share.values())
    reason = f"{name}: every seed of every arm reached greedy valid BLEU >= {CRITERION:g}"
    if low:
        reason = (f"{name}: below greedy valid BLEU {CRITERION:g} at the cap: "
                  f"{'; '.join(low)}: its AER does not count")  # fmt: skip
    return ev.Check(name, worst, (worst, worst), 1.0, ev.INCONCLUSIVE if low else ev.PASS,
                    "design", reason)  # fmt: skip


def best_local(aer: PerSeed) -> str:
    """The local row with the lowest mean AER over seeds."""
    here = [m for m in LOCALS if m in aer]
    if not here:
        raise ValueError(f"no local row among {sorted(aer)}; add local-m or local-p to --models")
    return min(here, key=lambda m: statistics.fmean(aer[m]))


def gaps(aer: PerSeed, local: str) -> list[float]:
    """Per seed, AER(global-location) - AER(``local``)."""
    return [g - x for g, x in zip(aer[GLOBAL], aer[local], strict=True)]


def claim_checks(where: str, aer: PerSeed, reached: Mapping[str, Sequence[bool]],
                 bleu: PerSeed) -> list[ev.Check]:  # fmt: skip
    """The design and claim checks of one setting ``where`` (e.g. "swap, D=5, reversed"):
    ``aer``, ``reached`` and ``bleu`` per row, one number per seed."""
    if GLOBAL not in aer:
        raise ValueError(f"the claim needs {GLOBAL} in --models")
    local = best_local(aer)
    arms = {GLOBAL: aer[GLOBAL], local: aer[local]}
    return [
        all_learned(f"{where}: every arm learned the task", reached, bleu),
        ev.ceiling(f"{where}: AER off the floor", arms, 0.0, eps=FLOOR_EPS),
        ev.on_interval(f"{where}: AER(global-location) - AER({local})",
                       ev.t_interval(gaps(aer, local)), GAP),  # fmt: skip
    ]


__all__ = ["CLAIM_ORDERING", "CRITERION", "FLOOR_EPS", "GAP", "GLOBAL", "LOCALS", "MIN_REORDERED",
           "all_learned", "best_local", "claim_checks", "gaps", "reorders"]  # fmt: skip
