"""The checks of the extrapolation experiment's RoPE part (``--part rope``, rope.py; evidence.py's
contract), thresholds fixed from the papers before any verdict seed ran. Every gap is paired
(the same test blocks, the same seed's text and base model): one gap per seed, its mean over
the blocks, and a 95% t-interval over the seeds.

Claims (directions only: the papers state no tolerance that would apply to bits per character):

* (i) Chen et al. 2023, Table 1 (LLaMA 7B-65B trained at 2,048 tokens, PG-19 perplexity):
  without extension RoPE fails past L ("None": 7.20 at 2,048, > 10^3 at 4,096 and beyond), so
  ``bpc(RoPE, k·L) − bpc(RoPE, L) > 0``; with position interpolation and ~1,000 fine-tuning
  steps the model reads k·L better than the original reads L (7B extended to 8,192: 6.95 at
  8,192; §3.2 Table 3: "At 200 steps the models surpassed the original model's perplexity on
  2048 context window size"), so ``bpc(PI after B, k·L) − bpc(control after B, L) < 0``,
  the control being the same base model trained the same B updates at L (here a fine-tune is a
  sizeable share of the pre-training, so the original model alone would credit PI with the
  extra training). Checked at each k in {4, 8, 16} that is run: Chen's extensions from 2,048
  to 8,192, 16,384 and 32,768 tokens.
* (ii) Chen 2023, Table 3 (7B extended to 8,192, PG-19): 16.10 perplexity at 0 fine-tuning
  steps, 6.95 at 1,000: ``bpc(PI after 0, k·L) − bpc(PI after B, k·L) > 0``, at the same k.
* (iii) Peng et al. 2023, §4 and Table 1 (Llama 2 7B, 4,096 -> 8,192, s = 2): YaRN fine-tuned
  400 steps matches PI fine-tuned 1,000 (3.35 vs 3.34 perplexity at 8,192), "2.5x less
  training steps"; PI at 400 steps is still short of its 1,000-step value (Chen 2023, Table 3:
  7.10 at 400, 6.95 at 1,000), so at the same small budget b = 0.4 B YaRN leads:
  ``bpc(PI after b, 2L) − bpc(YaRN after b, 2L) > 0``. Checked at k = 2, Peng's setting.

Design checks (on the compared arms only: plain RoPE, the control at L, PI, YaRN; NTK-aware
and direct fine-tuning are reported beside them and never withhold a verdict):

* at least ``MIN_SEEDS`` seeds;
* the base model learned the text: bpc(RoPE, L) ≤ 0.8 x the unigram bpc;
* off the floor (evidence.off_floor: the unigram bpc minus the arm's, per seed, its interval
  above 0) for every compared arm in every checked cell: PI after B at each Chen k, the control
  after B at L, PI and YaRN after b at 2L;
* the small budget is short: PI still improves from b to B at 2L (bpc after b − after B, its
  interval above 0). Otherwise PI has converged by b, every method can reach its end value
  within b, and "needs less fine-tuning" cannot show (a ceiling of the budget axis).
"""

from __future__ import annotations

import statistics
from typing import Any

from .. import evidence as ev
from ..base import mean_of_means
from .checks import LEARNED_SHARE, enough_seeds, seed_gaps

CHEN_FACTORS = (4, 8, 16)  # Chen 2023, Table 1: 2,048 extended to 8,192, 16,384, 32,768
PENG_FACTOR = 2  # Peng 2023, Table 1: 4,096 extended to 8,192 (s = 2)
DEGRADES = 0.0  # (i) plain RoPE past L: bpc(k·L) − bpc(L) above 0
RECOVERS = 0.0  # (i) PI after B at k·L − the control after B at L: below 0
FINE_TUNE_HELPS = 0.0  # (ii) PI after 0 − PI after B at k·L: above 0
YARN_LEADS = 0.0  # (iii) PI after b − YaRN after b at 2L: above 0


def floor_margin(name: str, rows: list[list[float]], unigram: list[float]) -> ev.Check:
    """evidence.off_floor on one compared arm in one cell: the seed's unigram bpc minus the
    arm's mean over the blocks, per seed."""
    margins = [u - sum(r) / len(r) for u, r in zip(unigram, rows, strict=True)]
    return ev.off_floor(name, ev.t_interval(margins))


def still_improving(name: str, gap: ev.Interval) -> ev.Check:
    """A design check: the arm's bpc after the small budget minus after the full budget, its
    interval above 0 passes; otherwise INCONCLUSIVE (the budget axis at its ceiling)."""
    return ev.above_zero(name, gap, "the small budget is not short for PI, no lead in the "
                         "fine-tuning it needs can show")  # fmt: skip


def checks_of(n: dict[str, Any]) -> list[ev.Check]:
    """n: "unigram" [seed] bits; "steps" [0, b, B]; "base" {k: [seed][block]} (plain RoPE,
    no fine-tune, at k·L); "continued" {step: [seed][block]} (plain RoPE fine-tuned at L, read
    at L); "scaled" {scaling: {k: {step: [seed][block]}}} (fine-tuned and read at k·L)."""
    unigram = n["unigram"]
    _, small, full = (str(s) for s in n["steps"])
    base, control, scaled = n["base"], n["continued"], n["scaled"]
    pi, yarn = scaled["linear"], scaled["yarn"]
    chen = [str(k) for k in CHEN_FACTORS if str(k) in base]
    peng = str(PENG_FACTOR)
    mean_unigram = statistics.fmean(unigram)
    checks = [
        enough_seeds(len(unigram)),
        ev.learned(f"RoPE bpc at L / unigram bpc ({mean_unigram:.3f})",
                   mean_of_means(base["1"]) / mean_unigram, LEARNED_SHARE,
                   above=False),  # fmt: skip
        floor_margin(f"control after {full} at L, off the floor", control[full], unigram),
    ]
    checks += [floor_margin(f"PI after {full} at {k}L, off the floor", pi[k][full], unigram)
               for k in chen]  # fmt: skip
    checks += [
        floor_margin(f"{label} after {small} at {peng}L, off the floor", arm[peng][small],
                     unigram)
        for label, arm in (("PI", pi), ("YaRN", yarn))
    ]  # fmt: skip
    checks.append(still_improving(
        f"PI bpc at {peng}L after {small} - after {full}",
        seed_gaps(pi[peng][small], pi[peng][full])))  # fmt: skip
    for k in chen:
        checks += [
            ev.on_interval(f"RoPE bpc at {k}L - at L", seed_gaps(base[k], base["1"]),
                           DEGRADES),  # fmt: skip
            ev.on_interval(f"PI after {full} at {k}L - control after {full} at L",
                           seed_gaps(pi[k][full], control[full]), RECOVERS,
                           above=False),  # fmt: skip
            ev.on_interval(f"PI at {k}L: after 0 - after {full}",
                           seed_gaps(pi[k]["0"], pi[k][full]), FINE_TUNE_HELPS),  # fmt: skip
        ]
    checks.append(ev.on_interval(
        f"at {peng}L after {small}: PI bpc - YaRN bpc",
        seed_gaps(pi[peng][small], yarn[peng][small]), YARN_LEADS))  # fmt: skip
    return checks


__all__ = ["CHEN_FACTORS", "DEGRADES", "FINE_TUNE_HELPS", "PENG_FACTOR", "RECOVERS",
           "YARN_LEADS", "checks_of", "floor_margin", "still_improving"]
