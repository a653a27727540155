"""The extrapolation experiment's outputs: bpc by position method and evaluation length k·L,
the checks, a CSV, the JSON and a PNG (bpc against the evaluation length, one line per arm).
The RoPE part's are rope_report.py's."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, plateau_text, pyplot, save_figure
from ..evidence import conclude


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (arm, k): the mean bpc over seeds and each seed's ("n/a": no positions
    past L)."""
    out = []
    for arm, by_k in result["bpc"].items():
        for k, per_seed in by_k.items():
            out.append({"arm": arm, "k": int(k),
                        "length": int(k) * result["config"]["segment"],
                        "bpc": "n/a" if per_seed is None else round(statistics.fmean(per_seed), 4),
                        "each": "n/a" if per_seed is None else
                        " ".join(f"{x:.4f}" for x in per_seed)})  # fmt: skip
    return out


def bpc_text(result: dict[str, Any]) -> str:
    """Arms as rows, evaluation lengths as columns: the mean test bpc over seeds."""
    length = result["config"]["segment"]
    ks = list(next(iter(result["bpc"].values())))
    body = [[arm, *("n/a" if by_k[k] is None else f"{statistics.fmean(by_k[k]):.3f}"
                    for k in ks)] for arm, by_k in result["bpc"].items()]  # fmt: skip
    head = ["test bpc (mean of seeds)", *(f"{k}L = {int(k) * length}" for k in ks)]
    return markdown_table(head, body)


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print the tables and the verdict, write OUT/extrapolation.{csv,json,png} (a RoPE
    part's result: rope_report.report's OUT/extrapolation-rope.*)."""
    if result.get("part") == "rope":
        from .rope_report import report as rope_report

        return rope_report(result, out, say)
    params = ", ".join(f"{k} {v:,}" for k, v in result["parameters"].items())
    secs = sum(result["train_seconds"].values())
    say(f"parameters: {params}; {secs:.0f}s of training; {result['blocks']} test blocks per "
        "seed")
    if "stopping_epochs" in result:  # runs to a plateau; earlier runs trained fixed epochs
        say(plateau_text(result, "cap"))
    say(f"unigram bpc of the test text: {statistics.fmean(result['numbers']['unigram']):.3f}")
    say(bpc_text(result))
    return conclude("extrapolation", result, rows, plot, out, say, "training and measuring")


def plot(result: dict[str, Any], path: Path) -> Path:
    """Test bpc against the evaluation length k·L (log2 axis), one line per arm (mean of
    seeds, seeds as dots), the training length dotted."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7, 4.5))
    length = result["config"]["segment"]
    for i, (arm, by_k) in enumerate(result["bpc"].items()):
        ks = [int(k) for k, v in by_k.items() if v is not None]
        means = [statistics.fmean(by_k[str(k)]) for k in ks]
        ax.plot([k * length for k in ks], means, "o-", color=f"C{i}", label=arm)
        for k in ks:
            ax.plot([k * length] * len(by_k[str(k)]), by_k[str(k)], ".", color=f"C{i}", ms=3)
    ax.axvline(length, color="gray", ls=":", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"evaluation length (characters; trained at L = {length}, dotted)")
    ax.set_ylabel("test bits per character")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


__all__ = ["bpc_text", "plot", "report", "rows"]
