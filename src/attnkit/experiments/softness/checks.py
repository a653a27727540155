"""The softness experiment's checks, on the experiment contract (evidence.py):
Deng, Kim, Chiu, Guo & Rush (2018), "Latent Alignment and Variational Attention", Table 1
(IWSLT14 De→En): test perplexity, exact (the marginal over the alignment for the latent rows),
orders

    variational-enumerate (6.08) and exact marginal likelihood (6.34)  <  soft (7.17)
                                            <  hard (7.37 enumerated, 7.38 sampled)

Claim checks, each on the t interval over seeds of the per-seed paired gap (same seed, same
data, same batches for every row), thresholds fixed from the claim before any run; the two
orders a model of this size can test at equal parameters (soft, exact and hard are one
network, trained by different objectives):

    PPL(soft) − PPL(exact)         > 0      exact marginal ≤ soft
    PPL(hard) − PPL(soft)          > 0      soft ≤ hard

Reported, not checked (``PPL_REPORTED``):

    PPL(soft) − PPL(variational)   > 0      variational (enumerated) ≤ soft

since the variational row trains an inference network q beside the same decoder (36% more
parameters on Multi30K), so that comparison is not at equal parameters.

Design checks where the task trains to a validation plateau (Multi30K: early stopping,
``multi30k_patience`` epochs, the same cap for every row), on the compared rows (``COMPARED``:
soft, exact, hard) only: every run ended on the plateau rule, not at the cap while its valid
loss still fell, and each row's cap is at least 3× its median stopping epoch; else the verdict
is INCONCLUSIVE ("no verdict from a budget at which the arms have not learned": the
experiment contract). A row only reported (variational, variational-sample) never withholds
the verdict.

A design check: perplexity has a floor of 1 (every gold token given probability 1); when both
rows of a compared pair have a mean perplexity within ``PPL_FLOOR_EPS`` of it, the task is too
easy for that gap to show, and the verdict is INCONCLUSIVE whatever the claim checks say
(judged per compared pair: rows no claim compares cannot lift a pair off the floor).
``PPL_FLOOR_EPS`` = 0.05 (fixed before the run): every row then gives the gold token a
geometric-mean probability above 1/1.05 ≈ 0.95, and the gaps left are a few rare tokens'.

The entropy order hard < variational < soft is in neither paper: it is reported
(``entropy_order``), not checked. On Multi30K, "BLEU within the paper's reported spread" is
computed (``bleu_checks``) and reported (``scoped``: a margin the paper does not set): for
exact, hard and variational, the t interval of the paired BLEU gap to soft within ±2.68, the
spread of Table 1's BLEU over its five rows (33.68 − 31.00). On toy-ko, BLEU is reported per
seed, not checked (every row is near its ceiling).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .. import evidence as ev
from ..evidence import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    Check,
    Interval,
    ceiling,
    learned,
    on_interval,
    paired_bootstrap,
    t_interval,
)
from ..pool import plateau

PPL_FLOOR_EPS = 0.05
DENG_BLEU = {"soft": 32.77, "exact": 33.29, "hard": 31.00, "variational": 33.68,
             "variational-sample": 33.30}  # fmt: skip
"""Deng 2018 Table 1's BLEU (IWSLT14 De→En) by row (hard: the sampled row, trained like ours;
variational: enumerate)."""
DENG_BLEU_SPREAD = round(max(DENG_BLEU.values()) - min(DENG_BLEU.values()), 2)
"""The spread of Table 1's BLEU over its five rows, 33.68 − 31.00 = 2.68: the BLEU claims'
margin."""
BLEU_ROWS = ("exact", "hard", "variational")
"""The rows whose BLEU gap to soft is checked on Multi30K: those a perplexity claim compares."""
# (name, the row whose PPL is claimed larger, the row claimed smaller)
PPL_CLAIMS = (
    ("PPL soft − exact (claim: exact marginal ≤ soft)", "soft", "exact"),
    ("PPL hard − soft (claim: soft ≤ hard)", "hard", "soft"),
)
"""The claims checked: each compares two rows of the same network (the same parameters)."""
PPL_REPORTED = (
    ("PPL soft − variational (Deng: variational-enumerate ≤ soft)", "soft", "variational"),
)
"""Deng's third order, reported beside the checks, never checked: the variational row trains an
inference network q beside the decoder (on Multi30K 283,795 parameters against 209,075, 36%
more), so the comparison is not at equal parameters. Its rows are not compared rows: no
design check (floor, plateau, cap) looks at them."""
COMPARED = ("soft", "exact", "hard")
"""The rows the checked claims compare, the only ones the design checks look at."""


def per_seed(records: Sequence[Mapping[str, Any]], task: str, key: str) -> dict[str, dict]:
    """row -> {seed: the record's ``key``} for ``task``."""
    out: dict[str, dict[int, float]] = {}
    for r in records:
        if r["task"] == task:
            out.setdefault(r["row"], {})[r["seed"]] = r[key]
    return out


def _cannot(name: str, why: str) -> Check:
    """A claim check that the run cannot judge (a row missing, one seed): inconclusive."""
    return Check(name, math.nan, (math.nan, math.nan), 0.0, INCONCLUSIVE, "claim",
                 f"{name}: {why}")  # fmt: skip


def gap_check(name: str, ppl: Mapping[str, Mapping[int, float]], big: str, small: str) -> Check:
    """The claim PPL(big) − PPL(small) > 0 on the t interval of the per-seed paired gaps."""
    if big not in ppl or small not in ppl:
        return _cannot(name, f"needs the {big} and {small} rows")
    seeds = sorted(set(ppl[big]) & set(ppl[small]))
    if len(seeds) < 2:
        return _cannot(name, f"{len(seeds)} paired seed(s); an interval needs 2 (--seeds)")
    gaps = [ppl[big][s] - ppl[small][s] for s in seeds]
    return on_interval(name, t_interval(gaps), 0.0, above=True)


def converged(name: str, records: Sequence[Mapping[str, Any]], patience: int) -> Check:
    """A design check: every run of a row a claim compares ended on the plateau rule (early
    stopping after ``patience`` epochs without a lower valid loss, not the cap while still
    improving; pool.plateau); value = how many runs hit the cap improving."""
    runs = [r for r in records if r["row"] in COMPARED]
    capped = [f"{r['row']} seed {r['seed']} (best epoch {r['best_epoch']} of {r['epochs']})"
              for r in runs if not plateau(r["epochs"], r["best_epoch"], patience)]  # fmt: skip
    reason = (f"{name}: {len(runs) - len(capped)} of {len(runs)} runs ended on the plateau "
              f"({patience} epochs without a lower valid loss)")  # fmt: skip
    if capped:
        reason += f"; cut by the cap of epochs while still improving: {', '.join(capped)}"
    n = float(len(capped))
    return Check(name, n, (n, n), 0.0, INCONCLUSIVE if capped else PASS, "design", reason)


def floor_check(task: str, ppl: Mapping[str, Mapping[int, float]]) -> Check:
    """The design check "perplexity above its floor", judged per compared pair: INCONCLUSIVE
    when, for any claim of ``PPL_CLAIMS``, both rows' mean perplexities sit within
    ``PPL_FLOOR_EPS`` of 1 (that pair cannot show a gap, whatever the other rows do); value =
    how many compared pairs sit at the floor."""
    name = f"{task}: perplexity above its floor"
    stuck, seen = [], []
    for _, big, small in PPL_CLAIMS:
        if big in ppl and small in ppl:
            pair = ceiling(f"{big} and {small}", {r: list(ppl[r].values()) for r in (big, small)},
                           1.0, eps=PPL_FLOOR_EPS, floor=True)  # fmt: skip
            seen.append(pair.reason)
            if pair.outcome == INCONCLUSIVE:
                stuck.append(f"{big} and {small}")
    reason = f"{name}, each compared pair: " + "; ".join(seen)
    if stuck:
        reason += f": {', '.join(stuck)}: every arm at the floor, no gap can show"
    n = float(len(stuck))
    return Check(name, n, (n, n), 0.0, INCONCLUSIVE if stuck else PASS, "design", reason)


def cap_checks(task: str, records: Sequence[Mapping[str, Any]], cap: int) -> list[Check]:
    """The design check of the evidence checklist (§3) for each row a claim compares: the cap
    of epochs is at least 3× the median epoch its runs stopped at (``evidence.plateau_cap``);
    a run that ran to the cap counts as censored (whether it was still improving there is
    ``converged``'s check)."""
    out = []
    for row in COMPARED:
        runs = [r for r in records if r["task"] == task and r["row"] == row]
        if runs:
            out.append(ev.plateau_cap(f"{task}: {row}: cap / median stopping epoch",
                                      [r["epochs"] for r in runs], cap,
                                      sum(r["epochs"] >= cap for r in runs)))  # fmt: skip
    return out


def translation_checks(records: Sequence[Mapping[str, Any]], task: str,
                       patience: int = 0, bleu: bool = False,
                       cap: int | None = None) -> list[Check]:  # fmt: skip
    """The floor design check (per compared pair), the plateau design checks where the task
    trains to a plateau (``patience`` > 0: Multi30K; with ``cap``, the cap of epochs, the
    3×-median-stop check of each compared row), the three perplexity claims of the module
    docstring, and with ``bleu`` (Multi30K) the BLEU claims (``bleu_checks``)."""
    ppl = per_seed(records, task, "ppl")
    design = [floor_check(task, ppl)]
    if patience > 0:
        mine = [r for r in records if r["task"] == task]
        design.append(converged(f"{task}: every compared row converged", mine, patience))
        if cap is not None:
            design += cap_checks(task, mine, cap)
    claims = [gap_check(f"{task}: {n}", ppl, big, small) for n, big, small in PPL_CLAIMS]
    shown = [replace(c, kind="report", reason=f"{c.reason} (reported: the variational row "
                     "trains q beside the decoder, so the parameters differ)")
             for c in (gap_check(f"{task}: {n}", ppl, big, small)
                       for n, big, small in PPL_REPORTED)]  # fmt: skip
    return design + claims + shown + (bleu_checks(records, task) if bleu else [])


def bleu_checks(records: Sequence[Mapping[str, Any]], task: str) -> list[Check]:
    """The BLEU claim on Multi30K, "BLEU within the paper's reported spread": for each
    row a perplexity claim compares with soft (exact, hard, variational), the t interval over
    seeds of the per-seed paired gap BLEU(row) − BLEU(soft) within ±``DENG_BLEU_SPREAD``, the
    spread of Table 1's BLEU over Deng's five rows (``within``)."""
    bleu = per_seed(records, task, "bleu")
    out = []
    for row in BLEU_ROWS:
        name = (f"{task}: BLEU {row} − soft (claim: within Deng's spread "
                f"±{DENG_BLEU_SPREAD:g})")  # fmt: skip
        seeds = sorted(set(bleu.get(row, {})) & set(bleu.get("soft", {})))
        if len(seeds) < 2:
            out.append(_cannot(name, f"{len(seeds)} paired seed(s) of {row} and soft; an "
                               "interval needs 2"))  # fmt: skip
            continue
        gap = t_interval([bleu[row][s] - bleu["soft"][s] for s in seeds])
        out.append(within(name, gap, DENG_BLEU_SPREAD))
    return out


def entropy_order(summary: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The rows from the sharpest attention (lowest mean entropy) to the flattest: reported."""
    have = {r: s["entropy"] for r, s in summary.items() if s.get("entropy") is not None}
    return sorted(have, key=lambda r: have[r])


def paired_gaps(records: Sequence[Mapping[str, Any]], task: str, key: str,
                base: str = "soft") -> dict[str, dict[str, Any]]:  # fmt: skip
    """row -> the per-seed gap of ``key`` against ``base`` and its t interval (None with one
    seed): reported beside the checks (BLEU, and the variational-sample row's PPL)."""
    vals = per_seed(records, task, key)
    out: dict[str, dict[str, Any]] = {}
    for row, v in vals.items():
        if row == base or base not in vals:
            continue
        seeds = sorted(set(v) & set(vals[base]))
        gaps = [v[s] - vals[base][s] for s in seeds
                if v[s] is not None and vals[base][s] is not None]  # fmt: skip
        ci = t_interval(gaps) if len(gaps) >= 2 else None
        out[row] = {"gaps": gaps, "ci": None if ci is None else [ci.lo, ci.hi],
                    "mean": sum(gaps) / len(gaps) if gaps else None}  # fmt: skip
    return out


# -- digit-captions: Xu et al. 2015, Table 1 ------------------------------------------------------
#
# Xu 2015, Table 1 (BLEU-1..4, METEOR on Flickr8k, Flickr30k, COCO): hard attention within a
# point or two of soft on every data set (COCO BLEU-4 25.0 hard vs 24.3 soft). Claim checks,
# fixed before the run, on the paired bootstrap over seeds × test captions (evidence.py) of the
# per-caption exact match (0 or 100):
#
#     exact(hard) − exact(soft)  within ±CAPTION_MARGIN   hard within 5 points of soft
#     exact(soft) − exact(mean)  > CAPTION_ABOVE_MEAN     soft far above mean pooling
#     exact(hard) − exact(mean)  > CAPTION_ABOVE_MEAN     hard too
#
# Design checks: soft learns (mean final valid exact match ≥ CAPTION_LEARNED over seeds; else
# the budget cannot judge), and soft and hard are not both at the ceiling of 100 (within
# CAPTION_CEILING_EPS, where a gap within 5 cannot fail).

CAPTION_MARGIN = 5.0
CAPTION_ABOVE_MEAN = 20.0
CAPTION_LEARNED = 90.0
CAPTION_CEILING_EPS = 1.0


def within(name: str, gap: Interval, margin: float) -> Check:
    """The claim |gap| < margin on ``gap``'s interval: wholly inside (−margin, margin)
    passes, wholly outside fails, across an end is inconclusive."""
    if -margin < gap.lo and gap.hi < margin:
        outcome = PASS
    elif gap.hi <= -margin or gap.lo >= margin:
        outcome = FAIL
    else:
        outcome = INCONCLUSIVE
    reason = (f"{name}: {gap.value:.4g}, {gap.level:.0%} interval [{gap.lo:.4g}, {gap.hi:.4g}]"
              f" over {gap.n} seeds, claim within ±{margin:.4g}")  # fmt: skip
    if outcome == INCONCLUSIVE:
        reason += ": the interval holds both the claim and its negation"
    return Check(name, gap.value, (gap.lo, gap.hi), margin, outcome, "claim", reason)


def _items(records: Sequence[Mapping[str, Any]], task: str, row: str) -> dict[int, list]:
    return {r["seed"]: r["exact_items"] for r in records if r["task"] == task and r["row"] == row}


def _bootstrap(records: Sequence[Mapping[str, Any]], task: str, a: str, b: str,
               resamples: int) -> Interval | str:  # fmt: skip
    """The paired bootstrap of exact(a) − exact(b), or why it cannot be made."""
    ia, ib = _items(records, task, a), _items(records, task, b)
    if not ia or not ib:
        return f"needs the {a} and {b} rows"
    seeds = sorted(set(ia) & set(ib))
    if len(seeds) < 2:
        return f"{len(seeds)} paired seed(s); an interval needs 2 (--seeds)"
    return paired_bootstrap([ia[s] for s in seeds], [ib[s] for s in seeds], resamples=resamples)


def caption_checks(records: Sequence[Mapping[str, Any]], task: str = "digit-captions",
                   resamples: int = 2000) -> list[Check]:  # fmt: skip
    """The two design checks and three claims of the block above, for ``task``'s records
    (each with ``exact_items``: per test caption 0 or 100, and ``valid_exact``: the final
    validation exact match, %)."""
    out: list[Check] = []
    soft_valid = [r["valid_exact"] for r in records if r["task"] == task and r["row"] == "soft"]
    if soft_valid:
        out.append(learned(f"{task}: soft learns (final valid exact match, mean over seeds)",
                           sum(soft_valid) / len(soft_valid), CAPTION_LEARNED))  # fmt: skip
    else:
        out.append(Check(f"{task}: soft learns", math.nan, (math.nan, math.nan),
                         CAPTION_LEARNED, INCONCLUSIVE, "design",
                         f"{task}: soft learns: no soft row, nothing to judge the budget by"))
    pair = {row: [r["quality"] for r in records if r["task"] == task and r["row"] == row]
            for row in ("soft", "hard")}  # fmt: skip
    if all(pair.values()):
        out.append(ceiling(f"{task}: soft and hard below the ceiling", pair, 100.0,
                           eps=CAPTION_CEILING_EPS))  # fmt: skip
    name = f"{task}: exact hard − soft (claim: within ±{CAPTION_MARGIN:g} points)"
    gap = _bootstrap(records, task, "hard", "soft", resamples)
    out.append(_cannot(name, gap) if isinstance(gap, str) else within(name, gap, CAPTION_MARGIN))
    for row in ("soft", "hard"):
        name = f"{task}: exact {row} − mean (claim: > {CAPTION_ABOVE_MEAN:g} points)"
        gap = _bootstrap(records, task, row, "mean", resamples)
        out.append(_cannot(name, gap) if isinstance(gap, str)
                   else on_interval(name, gap, CAPTION_ABOVE_MEAN, above=True))  # fmt: skip
    return out


MIN_SEEDS = 5  # seeds a check needs (an interval over 3 seeds under-covers)
PARAM_TOLERANCE = 0.05  # compared rows' parameter counts within 5% of each other


def scoped(checks: Sequence[ev.Check], seeds: Mapping[str, int],
           parameters: Mapping[str, Mapping[str, int]],
           budget: Sequence[str] = ()) -> list[ev.Check]:  # fmt: skip
    """The checks of every task, scoped by the evidence checklist (rules set after the
    committed runs had been seen; the experiment's page says so):

    * each task needs MIN_SEEDS seeds for a check (``seeds[task]``);
    * a claim check comparing two rows whose trained parameter counts
      (``parameters[task][row]``, q included for the variational rows) differ by more than
      PARAM_TOLERANCE is reported, not checked;
    * a task in ``budget`` trained every row for a fixed budget, not to a validation plateau:
      a design check says no verdict comes from it (the checklist's §3);
    * checks whose threshold the papers do not set are reported: the BLEU margin "within
      Deng's spread" and the captions' "within ±5 points"; and "more than 20 points above mean
      pooling", which holds by construction (mean pooling cannot tell the cells apart);
    * a task left with no claim check the paper sets is INCONCLUSIVE.

    Reported checks keep their outcome with kind "report" (outside the verdict)."""
    def report(c: ev.Check, why: str) -> ev.Check:
        return replace(c, kind="report", reason=f"{c.reason} (reported: {why})")

    out: list[ev.Check] = []
    for c in checks:
        task = c.name.split(":", 1)[0]
        rows = [r for r in parameters.get(task, {}) if f" {r} " in f" {c.name} "]
        counts = [parameters[task][r] for r in rows]
        if c.kind != "claim":
            out.append(c)
        elif "within Deng's spread" in c.name or "within ±" in c.name:
            out.append(report(c, "a margin the paper does not set"))
        elif "− mean" in c.name:
            out.append(report(c, "mean pooling cannot tell the cells apart, so this holds by "
                                  "construction"))
        elif len(counts) >= 2 and max(counts) > (1 + PARAM_TOLERANCE) * min(counts):
            shown = ", ".join(f"{r} {parameters[task][r]:,}" for r in rows)
            out.append(report(c, f"parameter counts {shown} differ by more than 5%"))
        else:
            out.append(c)
    for task, n in seeds.items():
        enough = ev.can_tell(f"{task}: seeds for a check (at least {MIN_SEEDS})", n, MIN_SEEDS)
        if n < MIN_SEEDS:
            enough = replace(enough, reason=enough.reason.replace(
                "the measurement cannot test the claim",
                f"an interval over {n} seeds under-covers"))  # fmt: skip
        claims = sum(c.kind == "claim" and c.name.startswith(f"{task}:") for c in out)
        out += [enough, ev.can_tell(f"{task}: claim checks the paper sets", claims, 1)]
        if task in budget:
            out.append(ev.Check(f"{task}: trained to a validation plateau", 0.0, (0.0, 0.0),
                                1.0, ev.INCONCLUSIVE, "design",
                                f"{task}: every row trained for a fixed budget, not to a "
                                "validation plateau: no verdict from a budget"))  # fmt: skip
    return out


def task_verdicts(checks: Sequence[ev.Check], tasks: Sequence[str]) -> dict[str, str]:
    """Each task's verdict from its checks (named "task: ...")."""
    return {t: ev.verdict_of([c for c in checks if c.name.startswith(f"{t}:")]) for t in tasks}


def combined_verdict(parts: Mapping[str, str]) -> str:
    """One verdict from each part's (task -> verdict): REPRODUCED when every part is; else
    NOT REPRODUCED when a part is not reproduced; else INCONCLUSIVE; the parts' reasons,
    each named by its task, follow the colon."""
    if all(v == "REPRODUCED" for v in parts.values()):
        return "REPRODUCED"
    if len(parts) == 1:
        return next(iter(parts.values()))
    head = ("NOT REPRODUCED" if any(v.startswith("NOT REPRODUCED") for v in parts.values())
            else "INCONCLUSIVE")  # fmt: skip
    why = [f"[{t}] {v}" for t, v in parts.items() if v != "REPRODUCED"]
    return f"{head}: " + "; ".join(why)


__all__ = [
    "MIN_SEEDS",
    "PARAM_TOLERANCE",
    "scoped",
    "task_verdicts",
    "BLEU_ROWS",
    "CAPTION_ABOVE_MEAN",
    "CAPTION_CEILING_EPS",
    "CAPTION_LEARNED",
    "CAPTION_MARGIN",
    "caption_checks",
    "cap_checks",
    "floor_check",
    "within",
    "COMPARED",
    "PPL_CLAIMS",
    "PPL_REPORTED",
    "PPL_FLOOR_EPS",
    "DENG_BLEU",
    "DENG_BLEU_SPREAD",
    "bleu_checks",
    "combined_verdict",
    "converged",
    "entropy_order",
    "gap_check",
    "paired_gaps",
    "per_seed",
    "translation_checks",
]
