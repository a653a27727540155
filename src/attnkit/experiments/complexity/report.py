"""The complexity experiment's outputs: Markdown tables (Table 1 as measured, the crossover per
d, the timings), complexity.csv (one row per layer, n, d), complexity.json and complexity.png
(fwd+bwd time against n; self-attention / GRU time against n/d)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, save_figure, write_outputs
from ..evidence import checks_table
from .checks import TERM
from .models import LAYERS

LABELS = {
    "recurrent": "recurrent (GRU)",
    "convolution": "convolution (k)",
    "self_attention": "self-attention",
    "restricted": "restricted (r)",
}
PATH_ROWS = {  # stack -> (Table 1's path length, how it reads)
    "recurrent": "O(n)",
    "conv_contiguous": "O(n/k)",
    "conv_dilated": "O(log_k n)",
    "self_attention": "O(1)",
    "restricted": "O(n/r)",
}


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def table1(result: dict[str, Any]) -> str:
    """Per layer: Table 1's complexity, fitted FLOP exponents (n, d), time exponents in n per
    d (of the medians, with the 95% bootstrap interval), autograd depth over the n grid,
    bytes saved for backward exponent."""
    exps, ds, ns = result["exponents"], result["ds"], result["ns"]
    head = ["layer", "Table 1", "FLOPs ∝ n^a d^b (a, b)"]
    head += [f"time exp. n, d={d}" for d in ds]
    head += [f"autograd depth n={ns[0]}→{ns[-1]}", "saved-bytes exp. n"]
    body = []
    for kind in LAYERS:
        e = exps[kind]
        body.append(
            [LABELS[kind], f"O({TERM[kind][2]})", f"{_fmt(e['flops_n'])}, {_fmt(e['flops_d'])}"]
            + [f"{_fmt(e['time_n'][str(d)])} [{_fmt(e['time_n_ci'][str(d)][0])}, "
               f"{_fmt(e['time_n_ci'][str(d)][1])}]" for d in ds]  # fmt: skip
            + [
                f"{e['depth'][str(ns[0])]}→{e['depth'][str(ns[-1])]} (exp. {e['depth_n']:.2f})",
                _fmt(e["saved_n"][str(ds[-1])]),
            ]
        )
    return markdown_table(head, body)


def path_table(result: dict[str, Any]) -> str:
    n = result["config"]["path_n"]
    body = []
    for kind, p in result["paths"].items():
        got = f"{p['layers']}"
        want = f"{p['expected']}"
        if kind == "recurrent":
            got += f" layer, {p['steps']:g} steps"
            want += f" layer, {p['expected_steps']} steps"
        body.append([kind, PATH_ROWS[kind], got, want])
    return markdown_table([f"stack (n={n})", "Table 1", "measured", "expected"], body)


def crossover_table(result: dict[str, Any]) -> str:
    ns = result["ns"]
    head = ["d", "time crossover n*", "n*/d", "FLOP crossover n", "attention/GRU time"]
    body = []
    for d in result["ds"]:
        c = result["crossover"][str(d)]
        t, f = c["time"], c["flops"]
        lo, hi = ns[0], ns[-1]
        tn = f"{t['n']:.0f}" if t["n"] else (f"< {lo}" if t["where"] == "below" else f"> {hi}")
        ratio = "n/d " + " ".join(f"{int(n) / d:g}:{r:.2f}" for n, r in c["time_ratio"].items())
        body.append(
            [str(d), tn, f"{t['n'] / d:.1f}" if t["n"] else "-",
             f"{f['n']:.0f}" if f["n"] else f["where"], ratio]
        )  # fmt: skip
    return markdown_table(head, body)


def time_table(result: dict[str, Any]) -> str:
    """fwd+bwd milliseconds: a row per (d, n), a column per layer."""
    at = {(r["layer"], r["n"], r["d"]): r for r in result["rows"]}
    body = [
        [str(d), str(n)] + [f"{at[k, n, d]['ms']:.1f}" for k in LAYERS]
        for d in result["ds"]
        for n in result["ns"]
    ]
    return markdown_table(["d", "n"] + [f"{LABELS[k]}" for k in LAYERS], body)


def reported_table(result: dict[str, Any]) -> str:
    """The numbers reported beside the checks (judging nothing), with their intervals."""
    return markdown_table(
        ["reported, not checked", "value", "95% interval", "grid n < d"],
        [[r["name"], f"{r['value']:.3g}", f"[{r['ci'][0]:.3g}, {r['ci'][1]:.3g}]",
          ", ".join(map(str, r["n"]))] for r in result.get("reported", [])],
    )  # fmt: skip


def verdict_line(result: dict[str, Any]) -> str:
    return f"verdict: {result['verdict']}"


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print the tables and the verdict; write complexity.{csv,json,png}."""
    say("Table 1, measured (exponents: log-log slopes over n = "
        f"{', '.join(map(str, result['fit_ns']))}):")  # fmt: skip
    say(table1(result))
    say("\nmaximum path length (layers from position 0 to n-1):")
    say(path_table(result))
    say("\nself-attention vs recurrent (GRU), fwd+bwd CPU time:")
    say(crossover_table(result))
    say("\nfwd+bwd CPU ms, least of the repeats (wall-clock ms in the CSV):")
    say(time_table(result))
    say("\nreported, not checked (95% bootstrap intervals over the repeats):")
    say(reported_table(result))
    say("\nchecks, an audit of attnkit's layers against Table 1 (exact counts: the point "
        "[v, v]; timings: 95% bootstrap intervals over the repeats at each n)")
    say(checks_table(result["checks"], digits=3))
    paths = write_outputs("complexity", result["rows"], result, plot, out, say)
    say(f"total {result['seconds']:.0f}s")
    say(verdict_line(result))
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """Left: fwd+bwd time against n per layer (log-log, one line style per d). Right:
    self-attention / GRU time against n/d, with the claim's crossover n = d."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    at = {(r["layer"], r["n"], r["d"]): r for r in result["rows"]}
    ns, ds = result["ns"], result["ds"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.4))
    styles = ["-", "--", ":", "-."]
    for i, kind in enumerate(LAYERS):
        for j, d in enumerate(ds):
            ax.plot(ns, [at[kind, n, d]["ms"] for n in ns], styles[j % 4], marker="o",
                    color=f"C{i}", ms=3, label=f"{LABELS[kind]}" if j == 0 else None)  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (line style: d = " + ", ".join(map(str, ds)) + ")")
    ax.set_ylabel("fwd+bwd CPU ms (least of repeats)")
    ax.set_title("per-layer time (cf. Vaswani et al. 2017, Table 1)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    for d in ds:
        ratio = result["crossover"][str(d)]["time_ratio"]
        bx.plot([int(n) / d for n in ratio], list(ratio.values()), marker="o", label=f"d={d}")
    bx.axhline(1, color="k", lw=0.8)
    bx.axvline(1, color="grey", ls="--", lw=0.8, label="n = d (the claim)")
    bx.set_xscale("log", base=2)
    bx.set_yscale("log")
    bx.set_xlabel("n / d")
    bx.set_ylabel("self-attention / GRU CPU time")
    bx.set_title("below 1: self-attention is faster than the GRU", fontsize=10)
    bx.grid(alpha=0.3, which="both")
    bx.legend(fontsize=8)
    return save_figure(fig, path)


__all__ = ["crossover_table", "path_table", "plot", "report", "reported_table", "table1",
           "time_table"]
