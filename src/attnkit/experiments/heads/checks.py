"""The checks of the heads experiment, fixed from Vaswani et al. (2017), Table 3 (A), before
any run. Per setting (toy-ko, Multi30K), on test BLEU (the paper's metric, its "0.9 BLEU"):

claim (i)  "single-head attention is 0.9 BLEU worse than the best setting":
           b₁ = the h > 1 with the lowest mean valid perplexity over seeds (chosen on the
           validation split, so that the test gap carries no selection bias);
           gap = BLEU(b₁) - BLEU(h = 1), paired bootstrap over seeds × test sentences;
           passes when its 95% interval lies above 0, fails when it lies at or below 0,
           otherwise inconclusive.
claim (ii) "quality also drops off with too many heads" (h = 32 is 0.4 BLEU below the
           best, h = 16, in the paper): b₂ = the h < h_max with the lowest mean valid
           perplexity; gap = BLEU(b₂) - BLEU(h_max), the same rule: the largest h must be
           worse than the best of the others; a largest h as good or better fails.
           The threshold is 0 for both: the paper states a direction, and its gaps
           (0.9, 0.4 BLEU) carry no interval of their own.
design     every run ended on the plateau rule (early stopping, not the cap); the arms are
           not all at BLEU's ceiling (every arm's mean within CEILING_EPS of 100); the best
           arm learnt the task (mean test BLEU >= LEARNED[setting]). Any of these failing
           makes the verdict INCONCLUSIVE.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..evidence import INCONCLUSIVE, PASS, Check, Interval, ceiling, learned, on_interval
from .bleu import paired_bleu_bootstrap

CEILING_EPS = 2.0  # BLEU points: every arm's mean within 2 of 100 is at the ceiling
LEARNED = {"toy-ko": 50.0, "multi30k": 10.0}  # test BLEU the best arm must reach


def best_by_valid(runs: Sequence[dict[str, Any]], exclude: int) -> int:
    """The head count, other than ``exclude``, with the lowest mean valid perplexity over its
    runs (ties: the smaller h)."""
    means = {
        h: statistics.fmean(r["valid_ppl"] for r in runs if r["heads"] == h)
        for h in sorted({r["heads"] for r in runs})
        if h != exclude
    }
    if not means:
        raise ValueError(f"no head count besides {exclude} to compare with")
    return min(means, key=lambda h: (means[h], h))


def bleu_gap(
    runs: Sequence[dict[str, Any]], a: int, b: int, *, resamples: int, seed: int = 0
) -> Interval:
    """BLEU(h = a) - BLEU(h = b) over the seeds both have, paired bootstrap (bleu.py)."""
    seeds = sorted({r["seed"] for r in runs if r["heads"] == a}
                   & {r["seed"] for r in runs if r["heads"] == b})  # fmt: skip
    by = {(r["heads"], r["seed"]): np.asarray(r["bleu_stats"], dtype=np.int64) for r in runs}
    return paired_bleu_bootstrap([by[a, s] for s in seeds], [by[b, s] for s in seeds],
                                 resamples=resamples, seed=seed)  # fmt: skip


def converged(name: str, runs: Sequence[dict[str, Any]]) -> Check:
    """A design check: every run ended on the plateau rule; value = how many hit the cap."""
    capped = [f"h={r['heads']} seed {r['seed']}" for r in runs if not r["plateau"]]
    reason = f"{name}: {len(runs) - len(capped)} of {len(runs)} runs stopped on the plateau"
    if capped:
        reason += f"; stopped by the cap of epochs while improving: {', '.join(capped)}"
    outcome = INCONCLUSIVE if capped else PASS
    n = float(len(capped))
    return Check(name, n, (n, n), 0.0, outcome, "design", reason)


def checks_of(task: str, runs: Sequence[dict[str, Any]], *, resamples: int) -> list[Check]:
    """The design and claim checks of the module doc for one setting's runs (each a dict
    with heads, seed, bleu, bleu_stats, valid_ppl, plateau)."""
    counts = sorted({r["heads"] for r in runs})
    if 1 not in counts or len(counts) < 3:
        raise ValueError(f"head counts {counts}: the checks need h = 1 and two more")
    bleu = {h: [r["bleu"] for r in runs if r["heads"] == h] for h in counts}
    top = max(statistics.fmean(xs) for xs in bleu.values())
    h_max = counts[-1]
    b1, b2 = best_by_valid(runs, exclude=1), best_by_valid(runs, exclude=h_max)
    gap1 = bleu_gap(runs, b1, 1, resamples=resamples)
    gap2 = bleu_gap(runs, b2, h_max, resamples=resamples, seed=1)
    return [
        converged(f"{task}: every arm converged", runs),
        ceiling(
            f"{task}: BLEU below the ceiling",
            {f"h={h}": xs for h, xs in bleu.items()},
            100.0,
            eps=CEILING_EPS,
        ),  # fmt: skip
        learned(f"{task}: best arm learnt the task (test BLEU)", top, LEARNED.get(task, 10.0)),
        on_interval(f"{task}: (i) BLEU of best h={b1} minus h=1", gap1, 0.0),
        on_interval(f"{task}: (ii) BLEU of best h={b2} minus largest h={h_max}", gap2, 0.0),
    ]


__all__ = ["CEILING_EPS", "LEARNED", "best_by_valid", "bleu_gap", "checks_of", "converged"]
