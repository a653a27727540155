"""The complexity experiment's numbers and checks (an audit of attnkit's layers against
Table 1): exponents fitted in log-log, the self-attention / recurrent crossover, the checks
(thresholds fixed from Vaswani et al. 2017, Table 1, before any run; see ``complexity`` for
what each check means) and the numbers reported beside them. Exact counts
(FLOPs, depth, layers) have no sampling error: their interval is the point [v, v]
(``evidence.point``); timings get bootstrap intervals over the repeats at each n."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

from .. import evidence as ev
from ..base import power_exponent as slope  # the exponent p of y ∝ x^p
from .models import LAYERS

TERM = {  # Table 1's per-layer complexity: exponents of (n, d) and the formula
    "recurrent": (1, 2, "n·d²"),
    "convolution": (1, 2, "k·n·d²"),
    "self_attention": (2, 1, "n²·d"),
    "restricted": (1, 1, "r·n·d"),
}
FIT_POINTS = 3  # exponents over the largest three n
FLOP_TOL = 0.01  # counted vs formula, relative
FLOP_EXP_TOL = 0.1
LINEAR_TIME = (0.7, 1.3)
QUADRATIC_TIME = 1.5  # closer to 2 than to 1
QUADRATIC_FROM = 4  # checked where every fitted n >= 4d
DEPTH_GROWS, DEPTH_FLAT = 0.9, 0.1
FLOP_CROSS = (0.5, 2.0)  # counted-FLOP crossover within [d/2, 2d]


def crossover(ns: Sequence[int], ratio: Sequence[float]) -> dict[str, Any]:
    """The first n where ``ratio`` (attention / recurrent) reaches 1, interpolated in log-log
    between the grid points around it; ``where`` says "inside", "below" (already > 1 at the
    first n) or "above" (< 1 at every n)."""
    if ratio[0] == 1:
        return {"n": float(ns[0]), "where": "inside"}
    if ratio[0] > 1:
        return {"n": None, "where": "below"}
    for i in range(1, len(ns)):
        if ratio[i] >= 1:
            a, b = math.log(ratio[i - 1]), math.log(ratio[i])
            t = -a / (b - a)
            n = math.exp(math.log(ns[i - 1]) + t * (math.log(ns[i]) - math.log(ns[i - 1])))
            return {"n": round(n, 1), "where": "inside"}
    return {"n": None, "where": "above"}


def summarise(rows: list[dict], ns: list[int], ds: list[int]) -> dict[str, Any]:
    """Exponents (time, FLOPs, saved bytes, depth), the worst FLOP-formula error, the band
    kernel's FLOPs against the dense ones, and the attention / recurrent crossovers per d.
    Dicts are keyed by str(d) and str(n), as they read back from JSON."""
    at = {(r["layer"], r["n"], r["d"]): r for r in rows}
    big = ns[-FIT_POINTS:]
    exps: dict[str, dict[str, Any]] = {}
    for kind in LAYERS:
        e: dict[str, Any] = {"time_n": {}, "time_n_ci": {}, "saved_n": {}}
        for d in ds:
            fit = ev.exponent_interval(big, [at[kind, n, d]["ms_repeats"] for n in big])
            e["time_n"][str(d)] = round(fit.value, 3)  # of the medians over the repeats
            e["time_n_ci"][str(d)] = [round(fit.lo, 3), round(fit.hi, 3)]
            saved = [at[kind, n, d]["saved_bytes"] for n in big]
            e["saved_n"][str(d)] = round(slope(big, saved), 3)
        e["flops_n"] = round(slope(big, [at[kind, n, ds[0]]["flops_term"] for n in big]), 3)
        e["flops_d"] = (
            round(slope(ds, [at[kind, ns[-1], d]["flops_term"] for d in ds]), 3)
            if len(ds) > 1 else None
        )  # fmt: skip
        e["depth_n"] = round(slope(ns, [at[kind, n, ds[0]]["depth"] for n in ns]), 3)
        e["depth"] = {str(n): at[kind, n, ds[0]]["depth"] for n in ns}
        exps[kind] = e
    cross = {}
    for d in ds:
        att, rec = (
            [at[kind, n, d] for n in ns] for kind in ("self_attention", "recurrent")
        )  # fmt: skip
        t = [a["ms"] / r["ms"] for a, r in zip(att, rec, strict=True)]
        f = [a["flops_forward"] / r["flops_forward"] for a, r in zip(att, rec, strict=True)]
        cross[str(d)] = {
            "time": crossover(ns, t),
            "flops": crossover(ns, f),
            "time_ratio": {str(n): round(x, 3) for n, x in zip(ns, t, strict=True)},
            "below_d": _largest_ratio_below_d(at, ns, d),
        }
    restricted = [r for r in rows if r["layer"] == "restricted"]
    last = at["restricted", ns[-1], ds[0]]
    return {
        "ns": ns,
        "ds": ds,
        "fit_ns": big,
        "exponents": exps,
        "flop_formula_max_rel_error": max(
            abs(r["flops_forward"] / r["flops_formula"] - 1) for r in rows
        ),
        "restricted_band": {
            "matches_band_formula": all(
                r["flops_term"] == r["flops_term_formula"] for r in restricted
            ),
            "fraction_of_dense": last["flops_term"]
            / at["self_attention", ns[-1], ds[0]]["flops_term"],
        },
        "crossover": cross,
    }


def _largest_ratio_below_d(at: dict, ns: Sequence[int], d: int) -> dict[str, Any] | None:
    """The largest self-attention / GRU ratio of median CPU times over the grid's n < d, with
    its bootstrap interval over the repeats; None when no n < d."""
    below = [n for n in ns if n < d]
    if not below:
        return None
    k = len(below)
    groups = [at[kind, n, d]["ms_repeats"] for kind in ("self_attention", "recurrent")
              for n in below]  # fmt: skip

    def largest(med: list[float]) -> float:  # self-attention's medians, then the GRU's
        return max(a / r for a, r in zip(med[:k], med[k:], strict=True))

    iv = ev.bootstrap_medians(groups, largest)
    return {"value": iv.value, "ci": [iv.lo, iv.hi], "n": below}


def _exact(name: str, value: float, threshold: float, above: bool = True) -> ev.Check:
    return ev.on_interval(name, ev.point(value), threshold, above=above)


def _band(name: str, iv: ev.Interval, lo: float, hi: float) -> list[ev.Check]:
    """The claim "lo < statistic < hi" as two checks on one interval."""
    return [ev.on_interval(f"{name} > {lo:g}", iv, lo),
            ev.on_interval(f"{name} < {hi:g}", iv, hi, above=False)]  # fmt: skip


def _crossover_over_d(c: dict[str, Any], ns: Sequence[int], d: int) -> ev.Interval:
    """n*/d of a FLOP crossover; outside the grid, the bound it lies beyond: below the first
    n, [0, n_0/d]; above the last, [n_last/d, no bound]."""
    if c["n"] is not None:
        return ev.point(c["n"] / d)
    if c["where"] == "below":
        return ev.Interval(ns[0] / d, 0.0, ns[0] / d, 1, 1.0)
    return ev.Interval(ns[-1] / d, ns[-1] / d, sys.float_info.max, 1, 1.0)


def checks_of(numbers: dict[str, Any]) -> list[ev.Check]:
    """The checks of the module docstring on ``summarise``'s numbers (with "paths")."""
    exps, ds, ns, fit_ns = numbers["exponents"], numbers["ds"], numbers["ns"], numbers["fit_ns"]
    below_d = [d for d in ds if numbers["crossover"][str(d)]["below_d"] is not None]
    checks = [
        ev.can_tell("restricted layer took the band kernel (1 yes, 0 no)",
                    float(numbers["restricted_band"]["matches_band_formula"]), 1.0),
        ev.can_tell("widths d with a grid point n < d", float(len(below_d)), 1.0),
        _exact("forward FLOPs: largest relative error vs the formula",
               numbers["flop_formula_max_rel_error"], FLOP_TOL, above=False),
    ]  # fmt: skip
    for kind, (pn, pd, term) in TERM.items():
        e = exps[kind]
        dev = max(abs(e["flops_n"] - pn), abs(e["flops_d"] - pd) if e["flops_d"] is not None
                  else 0.0)  # fmt: skip
        checks.append(_exact(f"{kind} FLOP exponents (n, d) vs {term}: largest deviation", dev,
                             FLOP_EXP_TOL, above=False))  # fmt: skip
    for kind in LAYERS:
        for d in ds:
            lo, hi = exps[kind]["time_n_ci"][str(d)]
            iv = ev.Interval(exps[kind]["time_n"][str(d)], lo, hi, FIT_POINTS)
            name = f"{kind} time exponent in n, d={d}"
            if kind != "self_attention":
                checks += _band(name, iv, *LINEAR_TIME)
            elif fit_ns[0] >= QUADRATIC_FROM * d:  # else the n·d² projections still weigh
                checks.append(ev.on_interval(name, iv, QUADRATIC_TIME))
    for kind in LAYERS:
        grows = kind == "recurrent"
        checks.append(_exact(f"{kind} autograd depth exponent in n", exps[kind]["depth_n"],
                             DEPTH_GROWS if grows else DEPTH_FLAT, above=grows))  # fmt: skip
    for kind, p in numbers["paths"].items():
        got = p["layers"] if p["layers"] is not None else math.inf
        checks.append(_exact(f"{kind} path: layers off Table 1's {p['expected']} by",
                             min(abs(got - p["expected"]), sys.float_info.max), 0.5,
                             above=False))  # fmt: skip
    rec = numbers["paths"]["recurrent"]
    checks.append(_exact(f"recurrent path: steps off n-1 = {rec['expected_steps']} by",
                         abs(rec["steps"] - rec["expected_steps"]), 0.5, above=False))
    for d in ds:
        c = numbers["crossover"][str(d)]
        checks += _band(f"FLOP crossover n*/d, d={d}", _crossover_over_d(c["flops"], ns, d),
                        *FLOP_CROSS)  # fmt: skip
    return checks


def reported_of(numbers: dict[str, Any]) -> list[dict[str, Any]]:
    """§4's "self-attention faster than recurrent when n < d" in CPU time, per d with a grid
    n < d: the largest self-attention / GRU ratio of median times over those n, with its
    bootstrap interval. Reported, never checked: on a CPU the GRU's n sequential steps make
    it slower than self-attention at every n < d, so the check could not fail here."""
    out = []
    for d in numbers["ds"]:
        b = numbers["crossover"][str(d)]["below_d"]
        if b is not None:
            out.append({"name": f"largest self-attention / GRU time ratio at n < d, d={d} "
                                "(medians; cannot fail on a CPU, not checked)",
                        "value": b["value"], "ci": b["ci"], "n": b["n"]})  # fmt: skip
    return out


__all__ = ["FIT_POINTS", "TERM", "checks_of", "crossover", "reported_of", "slope", "summarise"]
