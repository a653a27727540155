"""The complexity experiment's numbers and checks: exponents fitted in log-log, the
self-attention / recurrent crossover, and the verdict (thresholds fixed from Vaswani et al.
2017, Table 1, before any run; see ``complexity`` for what each check means)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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
        e: dict[str, Any] = {"time_n": {}, "saved_n": {}}
        for d in ds:
            e["time_n"][str(d)] = round(slope(big, [at[kind, n, d]["ms"] for n in big]), 3)
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


def verdict(numbers: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The checks of the module docstring on the measured numbers -> (failed checks, each
    with its number; every check's numbers)."""
    reasons: list[str] = []
    exps, ds, fit_ns = numbers["exponents"], numbers["ds"], numbers["fit_ns"]
    err = numbers["flop_formula_max_rel_error"]
    if not err <= FLOP_TOL:
        reasons.append(f"counted FLOPs differ from the formula by {err:.1%} (> {FLOP_TOL:.0%})")
    flop_exps = {}
    for kind, (pn, pd, term) in TERM.items():
        got = (exps[kind]["flops_n"], exps[kind]["flops_d"])
        flop_exps[kind] = {"n": got[0], "d": got[1], "expected": [pn, pd]}
        bad = abs(got[0] - pn) > FLOP_EXP_TOL or (
            got[1] is not None and abs(got[1] - pd) > FLOP_EXP_TOL
        )
        if bad:
            d_part = "" if got[1] is None else f" d^{got[1]}"
            reasons.append(f"{kind} FLOPs grow as n^{got[0]}{d_part}, not {term}")
    band = numbers["restricted_band"]
    if not band["matches_band_formula"]:
        reasons.append(
            "restricted attention did not take the band kernel (its attention FLOPs are "
            f"{band['fraction_of_dense']:.2f} of dense, not the band formula's)"
        )
    time_checked = {}
    for kind in LAYERS:
        for d in ds:
            e = exps[kind]["time_n"][str(d)]
            if kind == "self_attention":
                if fit_ns[0] < QUADRATIC_FROM * d:
                    continue  # the n·d² projections still weigh: reported, not checked
                ok = e >= QUADRATIC_TIME
                want = f">= {QUADRATIC_TIME}"
            else:
                ok = LINEAR_TIME[0] <= e <= LINEAR_TIME[1]
                want = f"in [{LINEAR_TIME[0]}, {LINEAR_TIME[1]}]"
            time_checked[f"{kind}@d={d}"] = e
            if not ok:
                reasons.append(f"{kind} time grows as n^{e} at d={d} (want exponent {want})")
    for kind in LAYERS:
        e = exps[kind]["depth_n"]
        grows = kind == "recurrent"
        if (grows and e < DEPTH_GROWS) or (not grows and e > DEPTH_FLAT):
            want = f">= {DEPTH_GROWS}" if grows else f"<= {DEPTH_FLAT}"
            reasons.append(f"{kind} autograd depth grows as n^{e} (want {want})")
    paths = numbers["paths"]
    for kind, p in paths.items():
        if p["layers"] != p["expected"]:
            reasons.append(f"{kind} path: {p['layers']} layers, Table 1 gives {p['expected']}")
    rec = paths["recurrent"]
    if rec["steps"] != rec["expected_steps"]:
        reasons.append(
            f"recurrent path runs {rec['steps']} steps, not n-1 = {rec['expected_steps']}"
        )
    faster_below_d = {}
    for d in ds:
        ratio = numbers["crossover"][str(d)]["time_ratio"]
        below = {n: r for n, r in ratio.items() if int(n) < d}
        if below:
            faster_below_d[str(d)] = below
            slow = {n: r for n, r in below.items() if r >= 1}
            if slow:
                reasons.append(
                    f"at d={d} self-attention is not faster than the GRU at n < d "
                    f"(time ratio {slow})"
                )
        f = numbers["crossover"][str(d)]["flops"]
        if f["n"] is None or not FLOP_CROSS[0] * d <= f["n"] <= FLOP_CROSS[1] * d:
            reasons.append(f"at d={d} the FLOP crossover is {f['n'] or f['where']}, not ~d")
    if not faster_below_d:
        reasons.append("no grid point has n < d: the n < d claim is untested")
    checks = {
        "flop_formula_max_rel_error": err,
        "flop_exponents": flop_exps,
        "restricted_band": band,
        "time_exponents_checked": time_checked,
        "depth_exponents": {k: exps[k]["depth_n"] for k in LAYERS},
        "paths": paths,
        "attention_over_recurrent_time_at_n_below_d": faster_below_d,
        "crossover_n": {
            d: {"time": c["time"], "flops": c["flops"]} for d, c in numbers["crossover"].items()
        },
        "thresholds": {
            "flop_tol": FLOP_TOL,
            "flop_exp_tol": FLOP_EXP_TOL,
            "linear_time": LINEAR_TIME,
            "quadratic_time": QUADRATIC_TIME,
            "quadratic_from_n_over_d": QUADRATIC_FROM,
            "depth_grows": DEPTH_GROWS,
            "depth_flat": DEPTH_FLAT,
            "flop_cross": FLOP_CROSS,
        },  # fmt: skip
        "reproduced": not reasons,
        "reasons": reasons,
    }
    return reasons, checks


__all__ = ["FIT_POINTS", "TERM", "crossover", "slope", "summarise", "verdict"]
