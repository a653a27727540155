"""The distance experiment's checks (evidence.py's contract), on numbers only: testable on
synthetic inputs.

The claim (Vaswani et al. 2017, §4): "The shorter these paths between any combination of
positions in the input and output sequences, the easier it is to learn long-range
dependencies" (maximum path length O(n) recurrent, O(1) self-attention). A direction, no
number. Per task, with u_m(Δ, s) the updates-to-criterion of model m at distance Δ and seed s
and the growth per seed

    g_m(s) = log2( u_m(Δmax, s) / u_m(Δmin, s) )          (doublings from Δmin to Δmax)

a run censored at the cap counts as the cap, so a censored g is a lower bound of that seed's
growth (``survival`` gives the censoring-aware summaries: the Kaplan-Meier median and the
mean restricted to the cap, RMST, with its t-interval). On the compared arms (LSTM, GRU,
attention) only, each cell (model, Δ) judged on its own, never on an average over cells:

  * (design, per compared model) it meets the criterion at Δmin in every seed (else its g has
    no baseline);
  * (design, per Δ) at every Δ of the grid, the best compared arm meets the criterion in
    every seed (a Δ no compared arm learns is at chance for all of them: their u there are
    all caps);
  * (design, per compared model) a model with a censored run has a cap of at least
    CAP_FACTOR times its own median u(Δmin) (so that growth of log2(CAP_FACTOR) doublings
    can show before the cap becomes the measurement; each arm has its own cap, calibrated
    on a seed disjoint from these, ``calibrate.py``);
  * (design, per recurrent model) off the floor at Δmax: its u(Δmax) is not within 2x the
    window (where it learns at once even at Δmax, no growth can show);
  * (claim) per recurrent model m, the paired contrast c(s) = g_m(s) - g_attention(s) (the same
    batches per seed) has its 95% t-interval above 0: the recurrent model's cost grows more
    with Δ than attention's. Censoring makes c(s) a bound (``contrast_bounds``): a censored
    u_m(Δmax) or u_attention(Δmin) makes it a lower bound, a censored u_m(Δmin) or
    u_attention(Δmax) an upper bound. The claim passes only if every c(s) is exact or a lower
    bound and the interval of those lower bounds already excludes 0; it fails only if no
    run of the four cells is censored and the interval lies at or below 0; anything else is
    INCONCLUSIVE.

Reported, not checked (thresholds the paper does not set): each model's g against 1 doubling
("grows", "stays flat") and the gradient at initialisation, r_m(s) = log10(‖∂ℓ/∂e_{t−Δmax}‖ /
‖∂ℓ/∂e_{t−Δmin}‖) against −2 (recurrent) and −1 (attention).

The contrast, the cap rule and the scope above replaced, after the committed run had been
seen, checks with thresholds of our own (g > 1 and g < 1 doublings, the gradient ratios); the
experiment's page says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .. import evidence as ev

RECURRENT = ("lstm", "gru")
CHECKED = ("lstm", "gru", "attention")
GROWTH = 1.0  # reported: log2 u(Δmax)/u(Δmin), "grows" > 1 (more than doubles), flat < 1
CONTRAST = 0.0  # the claim: g(recurrent) - g(attention) > 0
CAP_FACTOR = 10  # the cap is at least this many times a censored model's own median u(Δmin)
FLOOR_EPS = 1.0  # log2: within 2x of the window is "at the floor"
MAX_RNN_GRAD = -2.0  # log10 of the initial gradient ratio Δmax/Δmin: recurrent below 1%
MIN_ATTN_GRAD = -1.0  # attention above 10%
TINY = 1e-300  # a gradient that underflowed even float64 counts as this


Grid = Mapping[str, Sequence[Sequence[float]]]  # model -> [Δ index][seed]


def growth(updates: Sequence[Sequence[float]]) -> list[float]:
    """g(s) = log2(u(Δmax, s) / u(Δmin, s)) for every seed; updates [Δ index][seed]."""
    return [math.log2(hi / lo) for lo, hi in zip(updates[0], updates[-1], strict=True)]


def slopes(deltas: Sequence[int], updates: Sequence[Sequence[float]]) -> list[float]:
    """Per seed, the least-squares slope of log u against log Δ over the whole grid (reported:
    u ∝ Δ^slope; censored runs count as the cap, as in the checks)."""
    xs = [math.log(d) for d in deltas]
    mx = sum(xs) / len(xs)
    sxx = sum((x - mx) ** 2 for x in xs)
    out = []
    for s in range(len(updates[0])):
        ys = [math.log(updates[i][s]) for i in range(len(deltas))]
        my = sum(ys) / len(ys)
        out.append(sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx)
    return out


def censored_claim(name: str, samples: Sequence[float], threshold: float, above: bool,
                   censored: int) -> ev.Check:  # fmt: skip
    """``ev.on_interval`` on a t-interval of lower bounds: the outcome that a censored run
    could overturn (a fail of "above", a pass of "below") becomes inconclusive."""
    check = ev.on_interval(name, ev.t_interval(samples), threshold, above=above)
    overturnable = ev.FAIL if above else ev.PASS
    if censored and check.outcome == overturnable:
        return replace(check, outcome=ev.INCONCLUSIVE, reason=check.reason + (
            f": {censored} run(s) censored at the cap at Δmax, so the ratio is only a lower "
            "bound"))  # fmt: skip
    return check


def baseline(name: str, share: float) -> ev.Check:
    """A design check: a model's growth ratio needs its u(Δmin) in every seed (``share`` of
    the seeds that met the criterion at Δmin must be 1)."""
    ok = share >= 1.0
    reason = f"{name}: {share:.0%} of the seeds, needs all"
    if not ok:
        reason += ": a censored u(Δmin) leaves the growth ratio without a baseline"
    return ev.Check(name, share, (share, share), 1.0, ev.PASS if ok else ev.INCONCLUSIVE,
                    "design", reason)  # fmt: skip


def kaplan_meier_median(times: Sequence[float], censored: Sequence[bool]) -> float | None:
    """The Kaplan-Meier median of event ``times`` with right-censoring: the first time at
    which the survival estimate falls to 0.5 or below; None when it never does (more than
    half the runs censored before any such time: the median is beyond the data)."""
    at_risk, surv = len(times), 1.0
    for t, c in sorted(zip(times, censored, strict=True), key=lambda x: (x[0], x[1])):
        if not c:
            surv *= 1 - 1 / at_risk
            if surv <= 0.5 + 1e-12:
                return float(t)
        at_risk -= 1
    return None


def survival(updates: Sequence[float], censored: Sequence[bool], cap: float) -> dict[str, object]:
    """Censoring-aware summaries of one (model, Δ) over seeds: the Kaplan-Meier median (None:
    not reached), the mean restricted to the cap (RMST = ∫_0^cap S(t) dt, which with every
    censoring at the cap is the mean of min(u, cap)) with its 95% t-interval, and how many
    runs were censored."""
    capped_u = [min(float(u), float(cap)) for u in updates]
    ci = ev.t_interval(capped_u)
    return {"km_median": kaplan_meier_median(updates, censored), "rmst": ci.value,
            "rmst_ci": [ci.lo, ci.hi], "censored": sum(map(bool, censored)),
            "seeds": len(updates)}  # fmt: skip


def cap_check(name: str, updates_min: Sequence[float], censored_any: bool, cap: int) -> ev.Check:
    """A design check: a model with a censored run needs a cap of at least CAP_FACTOR times
    its own median u(Δmin); one never censored passes (the cap did not bind)."""
    need = CAP_FACTOR * statistics.median(updates_min)
    ok = not censored_any or cap >= need
    reason = (f"{name}: cap {cap}, {CAP_FACTOR}x the median u(Δmin) {need:g}"
              + ("" if censored_any else ", no run censored"))  # fmt: skip
    if not ok:
        reason += (f": runs censored at a cap {cap / statistics.median(updates_min):.1f}x the "
                   f"model's own u(Δmin), so the cap, not the model, is what is measured there")
    return ev.Check(name, cap / statistics.median(updates_min),
                    (cap / statistics.median(updates_min),) * 2, float(CAP_FACTOR),
                    ev.PASS if ok else ev.INCONCLUSIVE, "design", reason)  # fmt: skip


EXACT, LOWER, UPPER, UNBOUNDED = "exact", "lower bound", "upper bound", "unbounded"


def contrast_bounds(rnn_censored: Sequence[Sequence[float]],
                    attn_censored: Sequence[Sequence[float]]) -> list[str]:  # fmt: skip
    """Per seed, what the censored runs make of c(s) = log2(u_r(Δmax)/u_r(Δmin)) -
    log2(u_a(Δmax)/u_a(Δmin)) (censored [Δ index][seed], r recurrent, a attention). A censored
    u is below its true value, so a censored u_r(Δmax) or u_a(Δmin) can only have lowered c
    (LOWER), a censored u_r(Δmin) or u_a(Δmax) only raised it (UPPER); both kinds: UNBOUNDED."""
    out = []
    for r0, r1, a0, a1 in zip(rnn_censored[0], rnn_censored[-1], attn_censored[0],
                              attn_censored[-1], strict=True):  # fmt: skip
        low, up = bool(r1) or bool(a0), bool(r0) or bool(a1)
        out.append(UNBOUNDED if low and up else LOWER if low else UPPER if up else EXACT)
    return out


def contrast_check(name: str, rnn: Sequence[Sequence[float]], attn: Sequence[Sequence[float]],
                   rnn_censored: Sequence[Sequence[float]],
                   attn_censored: Sequence[Sequence[float]]) -> ev.Check:  # fmt: skip
    """The claim: per seed c(s) = g_rnn(s) - g_attention(s) > 0 on its t-interval (updates and
    censored [Δ index][seed]). A pass needs every c(s) exact or a lower bound; a fail needs
    every c(s) exact (no censored run in the four cells); otherwise INCONCLUSIVE."""
    c = [a - b for a, b in zip(growth(rnn), growth(attn), strict=True)]
    check = ev.on_interval(name, ev.t_interval(c), CONTRAST)
    kinds = contrast_bounds(rnn_censored, attn_censored)
    lower = sum(k == LOWER for k in kinds)
    other = [k for k in kinds if k in (UPPER, UNBOUNDED)]
    if other and check.outcome != ev.INCONCLUSIVE:
        return replace(check, outcome=ev.INCONCLUSIVE, reason=check.reason + (
            f": {len(other)} seed(s) with a censored u_rnn(Δmin) or u_attention(Δmax), so c "
            "is not a lower bound there and the interval can neither pass nor fail"))  # fmt: skip
    if lower and check.outcome == ev.FAIL:
        return replace(check, outcome=ev.INCONCLUSIVE, reason=check.reason + (
            f": {lower} seed(s) censored at the cap, so c is only a lower bound there and a "
            "fail needs every run uncensored"))  # fmt: skip
    if lower:
        return replace(check, reason=check.reason + (
            f" ({lower} seed(s) a lower bound: censored at the cap)"))  # fmt: skip
    return check


def cap_of(caps: Mapping[str, int] | int, model: str) -> int:
    """A model's cap: ``caps`` per model, or one cap for every model (a run of the earlier
    design, or ``--cap``)."""
    return caps if isinstance(caps, int) else int(caps[model])


def caps_of(result: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """A run's caps, task -> model: its own ``caps``, or (a run of the earlier design, one cap
    for every arm) the config's ``cap`` for each model of ``result["updates"]``."""
    if "caps" in result:
        return result["caps"]
    return {t: {m: result["config"]["cap"] for m in result["updates"][t]}
            for t in result["tasks"]}  # fmt: skip


def task_checks(task: str, deltas: Sequence[int], updates: Grid, censored: Grid,
                window: int, caps: Mapping[str, int] | int) -> list[ev.Check]:  # fmt: skip
    """The design and claim checks of one task (module docstring), on the compared arms, each
    (model, Δ) cell judged on its own; ``caps`` per model (or one for all)."""
    lo, hi = deltas[0], deltas[-1]

    def share(m: str, i: int) -> float:  # share of seeds that met the criterion at Δ index i
        return 1 - sum(bool(c) for c in censored[m][i]) / len(censored[m][i])

    checks = [baseline(f"{task}: {m} meets the criterion at Δ={lo} (share of seeds)",
                       share(m, 0)) for m in CHECKED]  # fmt: skip
    checks += [ev.learned(f"{task}: the best compared arm meets the criterion at Δ={d} "
                          "(share of seeds)", max(share(m, i) for m in CHECKED), 1.0)
               for i, d in enumerate(deltas)]  # fmt: skip
    checks += [cap_check(f"{task}: {m}: cap >= {CAP_FACTOR}x its own u(Δ={lo})", updates[m][0],
                         any(bool(c) for row in censored[m] for c in row), cap_of(caps, m))
               for m in CHECKED]  # fmt: skip
    checks += [ev.ceiling(f"{task}: {m}: log2 updates-to-criterion at Δ={hi} off the floor",
                          {m: [math.log2(u) for u in updates[m][-1]]}, math.log2(window),
                          eps=FLOOR_EPS, floor=True) for m in RECURRENT]  # fmt: skip
    for m in RECURRENT:
        checks.append(contrast_check(
            f"{task}: {m} grows more than attention: log2 u(Δ={hi})/u(Δ={lo}), {m} - attention",
            updates[m], updates["attention"], censored[m], censored["attention"]))  # fmt: skip
    return checks


def task_reported(task: str, deltas: Sequence[int], updates: Grid,
                  censored: Grid) -> list[ev.Check]:  # fmt: skip
    """Reported, not checked: each compared model's own growth against 1 doubling (recurrent
    "grows", attention "stays flat"), a threshold of ours, not the paper's."""
    lo, hi = deltas[0], deltas[-1]
    out = []
    for m in CHECKED:
        above = m in RECURRENT
        what = "grows" if above else "stays flat"
        out.append(censored_claim(
            f"{task}: {m} {what}: log2 u(Δ={hi}) / u(Δ={lo})", growth(updates[m]), GROWTH,
            above, sum(bool(c) for c in censored[m][-1])))  # fmt: skip
    return out


def gradient_checks(grad_init: Mapping[str, Sequence[Sequence[float]]]) -> list[ev.Check]:
    """The gradient half: grad_init[model][seed][Δ index] at initialisation."""
    def ratio(m: str) -> list[float]:
        return [math.log10(max(g[-1], TINY) / max(g[0], TINY)) for g in grad_init[m]]

    checks = [ev.on_interval(f"{m}: initial gradient log10 ratio Δmax/Δmin",
                             ev.t_interval(ratio(m)), MAX_RNN_GRAD, above=False)
              for m in RECURRENT]  # fmt: skip
    checks.append(ev.on_interval("attention: initial gradient log10 ratio Δmax/Δmin",
                                 ev.t_interval(ratio("attention")), MIN_ATTN_GRAD))
    return checks


__all__ = ["CAP_FACTOR", "CHECKED", "CONTRAST", "EXACT", "GROWTH", "LOWER", "RECURRENT",
           "UNBOUNDED", "UPPER", "baseline", "cap_check", "cap_of", "caps_of", "censored_claim",
           "contrast_bounds", "contrast_check", "gradient_checks", "growth",
           "kaplan_meier_median", "slopes", "survival", "task_checks", "task_reported"]  # fmt: skip
