"""Vaswani et al. (2017), Table 1, measured instead of quoted: "Maximum path lengths,
per-layer complexity and minimum number of sequential operations for different layer types".

    layer            complexity per layer   sequential ops   maximum path length
    self-attention   O(n²·d)                O(1)             O(1)
    recurrent        O(n·d²)                O(n)             O(n)
    convolutional    O(k·n·d²)              O(1)             O(log_k n) dilated, O(n/k) contiguous
    restricted       O(r·n·d)               O(1)             O(n/r)

and, from §4: "self-attention layers are faster than recurrent layers when the sequence
length n is smaller than the representation dimensionality d".

Each layer (``complexity_layers``: a GRU, a causal conv, attnkit's MultiheadAttention on its
fused path, and the same with ``SlidingWindow(r)`` on the O(n·r) band kernel) is run forward
and backward over a grid of n and d (same batch, same d, the layers' own parameter counts).
Measured: the FLOPs (``FlopCounterMode``), checked against the hand formula; bytes autograd
saves for backward; the depth of the autograd graph (operations that must run in sequence);
the least CPU time (``time.process_time``, one torch thread) of ``repeats`` fwd+bwd passes
after a warm-up, and their least wall-clock time; the maximum path length of a stack.
CPU time, not wall-clock, feeds the fits: on a shared machine it leaves out the time the
process waits for a core.

Checks (thresholds fixed from the claim before any run; exponents are log-log least-squares
slopes over the largest three n of the grid, "large n"):

* FLOPs: counted forward FLOPs equal the formula within 1% at every grid point; the exponents
  of the table's term (recurrence, convolution, attention kernel) in n and in d are within
  0.1 of the table's: (1, 2), (1, 2), (2, 1), (1, 1);
* the restricted layer took the band kernel: its attention FLOPs are the band formula's, not
  the dense 4·n²·d;
* time: the exponent in n is within [0.7, 1.3] for recurrent, convolution and restricted at
  every d, and >= 1.5 (closer to 2 than to 1) for self-attention at every d whose fitted n
  are all >= 4d (where the n²·d term leads);
* sequential operations: the autograd depth grows with n for the recurrent layer (exponent
  over the n grid >= 0.9) and not for the others (<= 0.1);
* path length: the measured number of layers equals the table's for every stack exactly,
  and the recurrent path runs through n-1 steps;
* crossover: self-attention is faster than the recurrent layer at every grid n < d (the
  claim's direction), and the counted-FLOP crossover lies within [d/2, 2d]. The timed
  crossover n* per d is reported, with n*/d, but not required to be near d.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from .base import Experiment, Say
from .base import verdict as verdict_text
from .complexity_layers import (
    LAYERS,
    STACKS,
    expected_path,
    forward_flops,
    make_layer,
    make_stack_layer,
    measure,
    mixing_flops,
    path_length,
    recurrent_steps,
)

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


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


def ints(text: str, name: str) -> list[int]:
    """A comma-separated list of positive ints, sorted ascending, no repeats."""
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"--{name} {text!r}: give comma-separated integers, e.g. 64,128") from None
    if not values or values[0] < 1:
        raise ValueError(f"--{name} {text!r}: give at least one integer, all >= 1")
    return values


@dataclass
class ComplexityConfig:
    ns: str = _opt("32,64,128,256,512,1024,2048,4096", "sequence lengths n, comma-separated")
    ds: str = _opt("64,128,256", "model widths d, comma-separated (each divisible by --heads)")
    batch: int = _opt(4, "sequences per pass (default 4)")
    heads: int = _opt(4, "attention heads (default 4)")
    kernel: int = _opt(3, "convolution kernel k (default 3)")
    radius: int = _opt(16, "restricted self-attention radius r, |i - j| <= r (default 16)")
    repeats: int = _opt(5, "timed fwd+bwd passes per point after one warm-up; the fastest "
                        "counts (default 5)")  # fmt: skip
    path_n: int = _opt(64, "sequence length of the path-length stacks (default 64)")
    path_d: int = _opt(8, "width of the path-length stacks (default 8)")
    threads: int = _opt(1, "torch threads (default 1)")
    seed: int = _opt(0, "initialisation and input seed (default 0)")

    def __post_init__(self) -> None:
        ns, ds = ints(self.ns, "ns"), ints(self.ds, "ds")
        if len(ns) < 2:
            raise ValueError(f"--ns {self.ns!r}: need at least two lengths to fit an exponent")
        if any(d % self.heads for d in ds) or self.heads < 1:
            raise ValueError(f"--ds {self.ds!r}: every d must be divisible by --heads {self.heads}")
        if self.kernel < 2:
            raise ValueError(f"--kernel {self.kernel}: a kernel of at least 2 connects positions")
        for name in ("batch", "radius", "repeats", "path_d", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
        if self.path_n < 2:
            raise ValueError(f"--path-n {self.path_n}: need at least 2 positions")

    @property
    def n_grid(self) -> list[int]:
        return ints(self.ns, "ns")

    @property
    def d_grid(self) -> list[int]:
        return ints(self.ds, "ds")


QUICK = dict(ns="16,32,64", ds="32", batch=2, repeats=1, path_n=16, radius=4)


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y on log x: the exponent p of y ∝ x^p."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sxx


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


def run_experiment(cfg: ComplexityConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Measure every layer on the grid and the path lengths; returns the JSON-able result."""
    ns, ds = cfg.n_grid, cfg.d_grid
    say(
        f"complexity experiment: {', '.join(LAYERS)}; n {ns}, d {ds}, batch {cfg.batch}, "
        f"k {cfg.kernel}, r {cfg.radius}, {cfg.heads} heads, fastest of {cfg.repeats} fwd+bwd "
        f"after a warm-up, {cfg.threads} thread(s); output in {out}/"
    )
    before = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    try:
        rows = []
        for d in ds:
            for n in ns:
                for kind in LAYERS:
                    torch.manual_seed(cfg.seed)
                    layer = make_layer(kind, d, heads=cfg.heads, kernel=cfg.kernel,
                                       radius=cfg.radius)  # fmt: skip
                    x = torch.randn(cfg.batch, n, d, requires_grad=True)  # (B, n, d)
                    m = measure(layer, x, cfg.repeats)
                    rows.append(_row(cfg, kind, n, d, m, layer))
            say(f"  [{time.perf_counter() - t0:5.0f}s] d={d} done")
        paths = measure_paths(cfg)
    finally:
        torch.set_num_threads(before)
    numbers = summarise(rows, ns, ds)
    numbers["paths"] = paths
    reasons, checks = verdict(numbers)
    return {
        "config": asdict(cfg),
        "held_equal": "per (n, d): the same input x (B, n, d), seed and width d for every "
        "layer; each layer has its own parameter count (listed per row)",
        "rows": rows,
        **numbers,
        "seconds": round(time.perf_counter() - t0, 1),
        "checks": checks,
        "verdict": verdict_text(reasons),
    }


def _row(cfg: ComplexityConfig, kind: str, n: int, d: int, m: Any, layer: Any) -> dict:
    formula = forward_flops(kind, cfg.batch, n, d, cfg.kernel, cfg.radius)
    term = m.flops_attention if kind in ("self_attention", "restricted") else m.flops_forward
    return {
        "layer": kind, "n": n, "d": d,
        "params": sum(p.numel() for p in layer.parameters()),
        "ms": round(1000 * m.cpu_seconds, 3),  # CPU time: what the fits and crossovers use
        "wall_ms": round(1000 * m.wall_seconds, 3),
        "flops_forward": m.flops_forward, "flops_formula": formula,
        "flops_term": term,
        "flops_term_formula": mixing_flops(kind, cfg.batch, n, d, cfg.kernel, cfg.radius),
        "flops_total": m.flops_total, "saved_bytes": m.saved_bytes, "depth": m.depth,
    }  # fmt: skip


def measure_paths(cfg: ComplexityConfig) -> dict[str, dict[str, Any]]:
    """Layers needed to connect position 0 to n-1 in each stack, measured and Table 1's."""
    n = cfg.path_n
    out: dict[str, dict[str, Any]] = {}
    for kind in STACKS:
        torch.manual_seed(cfg.seed)
        expected = expected_path(kind, n, cfg.kernel, cfg.radius)

        def make(i: int, kind: str = kind) -> Any:
            return make_stack_layer(kind, i, cfg.path_d, heads=1, kernel=cfg.kernel,
                                    radius=cfg.radius)  # fmt: skip

        out[kind] = {"layers": path_length(make, n, cfg.path_d, max(n, 2 * expected)),
                     "expected": expected}  # fmt: skip
    out["recurrent"]["steps"] = recurrent_steps(cfg.path_d, n)
    out["recurrent"]["expected_steps"] = n - 1
    return out


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


def _report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    from .complexity_report import report

    return report(result, out, say)


EXPERIMENT = Experiment(
    name="complexity",
    help="per-layer cost, sequential ops, path length: recurrent vs conv vs self-attention "
    "(Vaswani 2017, Table 1)",
    description="Time forward+backward, count FLOPs, bytes saved for backward and autograd "
    "depth of a GRU, a causal conv, self-attention and restricted (sliding-window) "
    "self-attention over a grid of n and d; measure the layers a stack needs to connect "
    "position 0 to n-1; check the fitted exponents and path lengths against Table 1 and "
    "report where self-attention stops being faster than the GRU. Writes "
    "OUT/complexity.{csv,json,png}; exits 1 when a check fails.",
    config=ComplexityConfig,
    quick=QUICK,
    run=run_experiment,
    report=_report,
)

__all__ = [
    "EXPERIMENT",
    "QUICK",
    "TERM",
    "ComplexityConfig",
    "crossover",
    "ints",
    "run_experiment",
    "slope",
    "summarise",
    "verdict",
]
