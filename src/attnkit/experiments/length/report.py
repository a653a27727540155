"""The length experiment's outputs: a text table (BLEU by length, the mean over the
training seeds), the checks, CSV, JSON and a PNG plot of BLEU against source length (the
layout of Bahdanau 2015, Figure 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, save_figure
from ..evidence import conclude
from . import LABELS, MODELS


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per length bin: n, then each model's BLEU (mean over the seeds, and the lowest
    and highest seed's) and exact match (%, mean)."""
    table = result["by_length"]
    out = []
    for i, first in enumerate(table[MODELS[0]]):
        row: dict[str, Any] = {"src_len": first["src_len"], "n": first["n"]}
        for m in MODELS:
            row[f"{m}_bleu"] = table[m][i]["bleu"]
        for m in MODELS:
            row[f"{m}_bleu_min"] = table[m][i]["bleu_min"]
            row[f"{m}_bleu_max"] = table[m][i]["bleu_max"]
        for m in MODELS:
            row[f"{m}_exact"] = table[m][i]["exact"]
        out.append(row)
    return out


def text_table(result: dict[str, Any]) -> str:
    """A Markdown table (readable on a terminal, pasteable into docs): means over the seeds,
    BLEU with the range over the seeds."""
    head = ["source length", "n"]
    head += [f"{LABELS[m]} BLEU (seed range)" for m in MODELS]
    head += [f"{LABELS[m]} exact %" for m in MODELS]
    body = [
        [r["src_len"], str(r["n"])]
        + [f"{r[f'{m}_bleu']:.1f} ({r[f'{m}_bleu_min']:.1f}-{r[f'{m}_bleu_max']:.1f})"
           for m in MODELS]
        + [f"{r[f'{m}_exact']:.1f}" for m in MODELS]
        for r in rows(result)
    ]  # fmt: skip
    return markdown_table(head, body)


def runs_text(result: dict[str, Any]) -> str:
    """Models as rows: per seed, the updates run (a censored run marked "cap"), then the
    median stopping point against the cap."""
    head = ["model", *(f"seed {s}" for s in result["seeds"]), "median stop / cap"]
    body = [[LABELS[m], *(f"{u}{' (cap)' if c else ''}" for u, c in zip(
                result["updates"][m], result["censored"][m], strict=True)),
             f"{result['median_stop'][m]:.0f} / {result['cap_updates']}"]
            for m in MODELS]  # fmt: skip
    return "updates until early stopping\n" + markdown_table(head, body)


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print what was trained, the table, the checks and the verdict; write the files."""
    secs = result["train_seconds"]
    say(f"trained: RNNencdec {result['parameters']['rnnencdec']:,} params, RNNsearch "
        f"{result['parameters']['rnnsearch']:,}; training seeds {result['seeds']}; "
        f"{sum(secs.values()):.0f}s of training in all")  # fmt: skip
    say(runs_text(result))
    say(text_table(result))
    say("\nchecks (95% t-intervals over the training seeds)")
    return conclude("length", result, rows, plot, out, say, "training and scoring", digits=3)


def plot(result: dict[str, Any], path: Path) -> Path:
    """BLEU against source length (bin centres), one line per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for m, style in zip(MODELS, ("s--", "o-"), strict=True):
        bins = result["by_length"][m]
        x = [sum(map(int, b["src_len"].split("-"))) / 2 for b in bins]
        line = ax.plot(x, [b["bleu"] for b in bins], style, label=f"{LABELS[m]} (mean)")
        ax.fill_between(x, [b["bleu_min"] for b in bins], [b["bleu_max"] for b in bins],
                        color=line[0].get_color(), alpha=0.2, lw=0)  # fmt: skip
    cfg = result["config"]
    ax.set_xlabel("source length (tokens)")
    ax.set_ylabel("BLEU")
    ax.set_ylim(0, 100)
    ax.set_title(
        f"{cfg['task']}, early stopping (cap {cfg['steps']} updates of {cfg['batch_size']}), "
        f"{len(result['seeds'])} seeds, band: their range (cf. Bahdanau 2015, Fig. 2)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend()
    return save_figure(fig, path)


__all__ = ["report", "rows", "runs_text", "text_table"]
