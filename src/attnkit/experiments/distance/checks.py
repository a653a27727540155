"""The distance experiment's checks (evidence.py's contract), on numbers only: testable on
synthetic inputs.

Per task, with u_m(Δ, s) the updates-to-criterion of model m at distance Δ and seed s
(censored runs = the cap, see measure.py) and the growth ratio per seed

    g_m(s) = log2( u_m(Δmax, s) / u_m(Δmin, s) )          (doublings from Δmin to Δmax)

  * (design) the best arm learns the task: some model meets the criterion at Δmin in every
    seed; and each checked model (LSTM, GRU, attention) does (else its g has no baseline);
  * (design) off the floor: not every checked model meets it at Δmax within 2× the window
    (the fewest updates u can show), where no growth could show;
  * (claim) LSTM and GRU grow: the mean of g over seeds > 1 (u more than doubles from Δmin
    to Δmax), on its 95% t-interval;
  * (claim) attention stays flat: the mean of g < 1 (u less than doubles), on its interval.

Censoring: a censored u(Δmax) makes g a lower bound of that seed's true growth. So a
recurrent "grows" that passes stands, but one that fails with a censored run is
INCONCLUSIVE; an attention "flat" that fails stands, one that passes with a censored run at
Δmax is INCONCLUSIVE.

Gradient half (at initialisation; thresholds kept from the previous design), with
r_m(s) = log10( ‖∂ℓ/∂e_{t−Δmax}‖ / ‖∂ℓ/∂e_{t−Δmin}‖ ) per seed, in sequences of one length:
  * (claim) LSTM and GRU: mean r < −2 (the gradient Δmax back is under 1% of Δmin's);
  * (claim) attention: mean r > −1 (it keeps over 10%).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from .. import evidence as ev

RECURRENT = ("lstm", "gru")
CHECKED = ("lstm", "gru", "attention")
GROWTH = 1.0  # log2 of the ratio u(Δmax)/u(Δmin): "grows" > 1 (more than doubles), flat < 1
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


def task_checks(task: str, deltas: Sequence[int], updates: Grid, censored: Grid,
                window: int) -> list[ev.Check]:  # fmt: skip
    """The design and claim checks of one task (module docstring)."""
    lo, hi = deltas[0], deltas[-1]
    reached = {m: 1 - sum(bool(c) for c in censored[m][0]) / len(censored[m][0])
               for m in updates}  # fmt: skip
    checks = [ev.learned(f"{task}: the best arm meets the criterion at Δ={lo} (share of seeds)",
                         max(reached.values()), 1.0)]  # fmt: skip
    checks += [baseline(f"{task}: {m} meets the criterion at Δ={lo} (share of seeds)",
                        reached[m]) for m in CHECKED]  # fmt: skip
    checks.append(ev.ceiling(
        f"{task}: log2 updates-to-criterion at Δ={hi} off the floor",
        {m: [math.log2(u) for u in updates[m][-1]] for m in CHECKED},
        math.log2(window), eps=FLOOR_EPS, floor=True))  # fmt: skip
    for m in CHECKED:
        above = m in RECURRENT
        what = "grows" if above else "stays flat"
        checks.append(censored_claim(
            f"{task}: {m} {what}: log2 u(Δ={hi}) / u(Δ={lo})", growth(updates[m]), GROWTH,
            above, sum(bool(c) for c in censored[m][-1])))  # fmt: skip
    return checks


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


__all__ = ["CHECKED", "GROWTH", "baseline", "censored_claim", "gradient_checks", "growth", "slopes",
           "task_checks"]  # fmt: skip
