"""The parallel experiment's outputs: Markdown tables, CSV, JSON and a PNG of the sequential
depth against sentence length and of each model's speed-up from 1 to T threads."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, save_figure
from ..evidence import conclude
from . import MODELS

LABELS = {"rnnsearch": "RNNsearch", "transformer": "Transformer"}


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per length of either kind: the depth, nodes and cell calls where counted; the
    median step time (ms) on 1 and T threads and the speed-up where timed (else blank)."""
    table, timing, k = result["by_length"], result["timing"], str(result["threads"])
    counted = dict(zip(result["lengths"], range(len(result["lengths"])), strict=True))
    timed = dict(zip(result["timing_lengths"], range(len(result["timing_lengths"])),
                     strict=True))  # fmt: skip
    out = []
    for n in sorted(set(counted) | set(timed)):
        row: dict[str, Any] = {"n": n}
        for m in MODELS:
            i, j = counted.get(n), timed.get(n)
            for key in ("depth", "nodes", "cell_calls"):
                row[f"{m}_{key}"] = "" if i is None else table[m][key][i]
            sec = timing["seconds"][m]
            row[f"{m}_ms_1_thread"] = "" if j is None else round(
                1e3 * statistics.median(sec["1"][j]), 2)
            row[f"{m}_ms_{k}_threads"] = "" if j is None else round(
                1e3 * statistics.median(sec[k][j]), 2)
            row[f"{m}_speedup"] = "" if j is None else round(timing["speedup"][m][j], 3)
        out.append(row)
    return out


def depth_table(result: dict[str, Any]) -> str:
    head = ["n"] + [f"{LABELS[m]} {what}" for m in MODELS for what in ("depth", "cell calls")]
    body = [[str(n)] + [str(result["by_length"][m][key][i]) for m in MODELS
                        for key in ("depth", "cell_calls")]
            for i, n in enumerate(result["lengths"])]  # fmt: skip
    k = result["exponents"]
    body.append(["exponent k (y ∝ n^k)"] + [_k(k[m][key]) for m in MODELS
                                            for key in ("depth", "cell_calls")])  # fmt: skip
    return markdown_table(head, body)


def speedup_table(result: dict[str, Any]) -> str:
    t, k = result["timing"], str(result["threads"])
    head = ["n"] + [f"{LABELS[m]} ms on 1 / on {k} threads, speed-up" for m in MODELS]
    body = []
    for j, n in enumerate(result["timing_lengths"]):
        cells = [str(n)]
        for m in MODELS:
            one = 1e3 * statistics.median(t["seconds"][m]["1"][j])
            many = 1e3 * statistics.median(t["seconds"][m][k][j])
            cells.append(f"{one:.1f} / {many:.1f}, {t['speedup'][m][j]:.2f}x")
        body.append(cells)
    return markdown_table(head, body)


def _k(x: float | None) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.2f}"


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print the models, the tables, the load and the verdict; write parallel.{csv,json,png}."""
    p, cfg, t = result["parameters"], result["config"], result["timing"]
    say(f"RNNsearch {p['rnnsearch']:,} params, Transformer {p['transformer']:,} params; depth "
        f"at batch {cfg['batch_size']}, timing at batch {cfg['timing_batch']}")  # fmt: skip
    say(depth_table(result))
    say(f"\nmedian step time of {cfg['repeats']} interleaved repeats; {t['cores']} CPU cores; "
        f"1-minute load average {t['load'][0]:.2f} before, {t['load'][1]:.2f} after the timing")
    say(speedup_table(result))
    say("\nchecks (exact counts: the point [v, v]; speed-ups: 95% bootstrap intervals over the "
        "repeats)")
    return conclude("parallel", result, rows, plot, out, say, "", digits=3)


def plot(result: dict[str, Any], path: Path) -> Path:
    """Two panels against n: the sequential depth (log-log), each model's speed-up from 1 to
    T threads."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns, table, t = result["lengths"], result["by_length"], result["timing"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for m, style in zip(MODELS, ("o-", "s-"), strict=True):
        axes[0].plot(ns, table[m]["depth"], style,
                     label=f"{LABELS[m]} (k={_k(result['exponents'][m]['depth'])})")
        axes[1].plot(result["timing_lengths"], t["speedup"][m], style, label=LABELS[m])
    axes[0].set(xscale="log", yscale="log", xlabel="sentence length n",
                title="sequential depth (autograd longest path)")  # fmt: skip
    axes[1].set(xscale="log", xlabel="sentence length n",
                title=f"speed-up of a step, 1 -> {result['threads']} threads (median)")
    axes[1].axhline(1.0, color="grey", lw=0.8, ls=":")
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle(f"load average {max(t['load']):.2f} (cf. Vaswani et al. 2017, Table 1: "
                 "sequential operations O(n) vs O(1))", fontsize=10)  # fmt: skip
    return save_figure(fig, path)


__all__ = ["depth_table", "plot", "report", "rows", "speedup_table"]
