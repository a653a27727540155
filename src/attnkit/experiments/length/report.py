"""The length experiment's outputs: a text table, CSV, JSON and a PNG plot of BLEU against
source length (the layout of Bahdanau 2015, Figure 2)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, pyplot, save_figure, write_outputs
from . import MODELS

LABELS = {"rnnencdec": "RNNencdec", "rnnsearch": "RNNsearch"}


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per length bin: n, then BLEU and exact match (%) of each model."""
    table = result["by_length"]
    out = []
    for i, first in enumerate(table[MODELS[0]]):
        row: dict[str, Any] = {"src_len": first["src_len"], "n": first["n"]}
        for m in MODELS:
            row[f"{m}_bleu"] = table[m][i]["bleu"]
        for m in MODELS:
            row[f"{m}_exact"] = table[m][i]["exact"]
        out.append(row)
    return out


def text_table(result: dict[str, Any]) -> str:
    """A Markdown table (readable on a terminal, pasteable into docs)."""
    head = ["source length", "n"]
    head += [f"{LABELS[m]} BLEU" for m in MODELS] + [f"{LABELS[m]} exact %" for m in MODELS]
    body = [
        [r["src_len"], str(r["n"])]
        + [f"{r[f'{m}_bleu']:.1f}" for m in MODELS]
        + [f"{r[f'{m}_exact']:.1f}" for m in MODELS]
        for r in rows(result)
    ]
    return markdown_table(head, body)


def _pct(x: float) -> str:
    return "n/a (no BLEU on the shortest bin)" if math.isnan(x) else f"{x:.0%}"


def verdict_line(result: dict[str, Any]) -> str:
    v = result["checks"]
    d = v["drop"]
    nums = (
        f"BLEU drop from the shortest to the longest bin: RNNencdec {_pct(d['rnnencdec'])}, "
        f"RNNsearch {_pct(d['rnnsearch'])}; RNNsearch leads by {v['gap_longest']:.1f} BLEU "
        "on the longest bin"
    )
    if v["reproduced"]:
        return f"verdict: REPRODUCED (RNNencdec falls with length, RNNsearch holds up). {nums}"
    return f"verdict: NOT REPRODUCED ({'; '.join(v['reasons'])}). {nums}"


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print what was trained, the table and the verdict; write the files."""
    secs = result["train_seconds"]
    say(
        "trained: "
        + ", ".join(f"{m} {result['parameters'][m]:,} params in {secs[m]:.0f}s" for m in secs)
    )
    say(text_table(result))
    paths = write_outputs("length", rows(result), result, plot, out, say)
    say(f"total {result['total_seconds']:.0f}s (training and scoring)")
    say(verdict_line(result))
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """BLEU against source length (bin centres), one line per model."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for m, style in zip(MODELS, ("s--", "o-"), strict=True):
        bins = result["by_length"][m]
        x = [sum(map(int, b["src_len"].split("-"))) / 2 for b in bins]
        ax.plot(x, [b["bleu"] for b in bins], style, label=LABELS[m])
    cfg = result["config"]
    ax.set_xlabel("source length (tokens)")
    ax.set_ylabel("BLEU")
    ax.set_ylim(0, 100)
    ax.set_title(
        f"{cfg['task']} task, {cfg['steps']} updates of {cfg['batch_size']} "
        "(cf. Bahdanau et al. 2015, Fig. 2)",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend()
    return save_figure(fig, path)


__all__ = ["report", "rows", "text_table", "verdict_line"]
