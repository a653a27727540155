"""The parallel experiment's outputs: a Markdown table, CSV, JSON and a PNG of sequential
depth, step time and time per token against sentence length (log-log)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, pyplot, save_figure, write_outputs
from . import MODELS

LABELS = {"rnnsearch": "RNNsearch", "transformer": "Transformer"}


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per length: per model depth, nodes, cell calls, min/median step time (ms) and
    µs per target token (min time / (batch · n))."""
    table, batch = result["by_length"], result["config"]["batch_size"]
    out = []
    for i, n in enumerate(result["lengths"]):
        row: dict[str, Any] = {"n": n}
        for m in MODELS:
            t = table[m]
            row[f"{m}_depth"] = t["depth"][i]
            row[f"{m}_nodes"] = t["nodes"][i]
            row[f"{m}_cell_calls"] = t["cell_calls"][i]
            row[f"{m}_ms_min"] = round(1e3 * t["seconds_min"][i], 2)
            row[f"{m}_ms_median"] = round(1e3 * t["seconds_median"][i], 2)
            row[f"{m}_us_per_token"] = round(1e6 * t["seconds_min"][i] / (batch * n), 2)
        out.append(row)
    return out


def text_table(result: dict[str, Any]) -> str:
    head = ["n"]
    for m in MODELS:
        lab = LABELS[m]
        head += [f"{lab} depth", f"{lab} cell calls", f"{lab} ms (min / median)",
                 f"{lab} µs/token"]  # fmt: skip
    body = []
    for r in rows(result):
        line = [str(r["n"])]
        for m in MODELS:
            line += [str(r[f"{m}_depth"]), str(r[f"{m}_cell_calls"]),
                     f"{r[f'{m}_ms_min']:.1f} / {r[f'{m}_ms_median']:.1f}",
                     f"{r[f'{m}_us_per_token']:.1f}"]  # fmt: skip
        body.append(line)
    k = result["checks"]["exponents"]
    fit = ["exponent k (y ∝ n^k)"]
    for m in MODELS:
        fit += [_k(k[m]["depth"]), _k(k[m]["cell_calls"]), _k(k[m]["seconds_min"]), ""]
    return markdown_table(head, [*body, fit])


def _k(x: float | None) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.2f}"


def verdict_line(result: dict[str, Any]) -> str:
    c = result["checks"]
    k = c["exponents"]
    nums = (
        f"exponents in n: sequential depth RNNsearch {_k(k['rnnsearch']['depth'])}, "
        f"Transformer {_k(k['transformer']['depth'])} (max/min "
        f"{c['transformer_depth_ratio']:.2f}); step time RNNsearch "
        f"{_k(k['rnnsearch']['seconds_min'])}, Transformer {_k(k['transformer']['seconds_min'])}"
    )
    if c["reproduced"]:
        return (f"verdict: REPRODUCED (recurrence is sequential in n, self-attention is not). "
                f"{nums}")  # fmt: skip
    return f"verdict: NOT REPRODUCED ({'; '.join(c['reasons'])}). {nums}"


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print the models, the table and the verdict; write parallel.{csv,json,png}."""
    p, cfg = result["parameters"], result["config"]
    say(
        f"RNNsearch {p['rnnsearch']:,} params, Transformer {p['transformer']:,} params; "
        f"batch {cfg['batch_size']}, {result['threads']} thread(s)"
    )
    say(text_table(result))
    paths = write_outputs("parallel", rows(result), result, plot, out, say)
    say(f"total {result['total_seconds']:.0f}s")
    say(verdict_line(result))
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """Three log-log panels against n: sequential depth, step time (min, median dotted),
    time per token."""
    plt = pyplot()

    ns, table, batch = result["lengths"], result["by_length"], result["config"]["batch_size"]
    k = result["checks"]["exponents"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for m, style in zip(MODELS, ("o-", "s-"), strict=True):
        t = table[m]
        lab = LABELS[m]
        axes[0].plot(ns, t["depth"], style, label=f"{lab} (k={_k(k[m]['depth'])})")
        line = axes[1].plot(ns, [1e3 * s for s in t["seconds_min"]], style,
                            label=f"{lab} (k={_k(k[m]['seconds_min'])})")  # fmt: skip
        axes[1].plot(ns, [1e3 * s for s in t["seconds_median"]], ":",
                     color=line[0].get_color())  # fmt: skip
        per_token = [1e6 * s / (batch * n) for s, n in zip(t["seconds_min"], ns, strict=True)]
        axes[2].plot(ns, per_token, style, label=lab)
    titles = ("sequential depth (autograd longest path)", "training step, ms (min; median :)",
              "µs per target token")  # fmt: skip
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sentence length n")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle(
        f"batch {batch}, {result['threads']} thread(s) "
        "(cf. Vaswani et al. 2017, Table 1: sequential operations O(n) vs O(1))",
        fontsize=10,
    )
    return save_figure(fig, path)


__all__ = ["plot", "report", "rows", "text_table", "verdict_line"]
