"""The streaming experiment's outputs: bpc past the training length by arm, the checks, the
gaps to the recomputation baseline, a CSV, the JSON and a PNG (bpc against the position in
the stream, as the paper's Fig. 3)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, plateau_text, pyplot, reported_table, save_figure
from ..evidence import conclude
from .checks import ARMS, LABELS


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per arm: bpc past L (mean over seeds, each seed)."""
    return [{"arm": LABELS[arm], "bpc past L": round(statistics.fmean(v), 4),
             "each": " ".join(f"{x:.4f}" for x in v)}
            for arm, v in result["bpc"].items()]  # fmt: skip


def bpc_text(result: dict[str, Any]) -> str:
    body = [[LABELS[k], *(f"{x:.3f}" for x in v), f"{statistics.fmean(v):.3f}"]
            for k, v in result["bpc"].items()]  # fmt: skip
    return markdown_table(["bpc past L", *(f"seed {s}" for s in result["seeds"]), "mean"], body)


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    secs = sum(result["train_seconds"].values())
    cal = result["numbers"]["calibration"]
    say(f"parameters {result['parameters']:,}; {secs:.0f}s of training; {plateau_text(result)}")
    say(f"calibration seed {cal['seed']}: " + ", ".join(
        f"{LABELS[a]} {b:.3f}" for a, b in cal["bpc"].items()) + " bpc past L")  # fmt: skip
    say(bpc_text(result))
    say(reported_table(result))
    return conclude("streaming", result, rows, plot, out, say, "training and decoding")


def plot(result: dict[str, Any], path: Path) -> Path:
    """Bits per character against the position in the stream (bins of L/4, mean over seeds),
    one line per arm; the training length L and the window w dotted."""
    plt = pyplot()
    cfg = result["config"]
    width = max(1, cfg["segment"] // 4)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for i, arm in enumerate(ARMS):
        seeds = result["numbers"]["curve"][arm]
        ys = [statistics.fmean(c) for c in zip(*seeds, strict=True)]
        xs = [1 + width * (k + 0.5) for k in range(len(ys))]
        ax.plot(xs, ys, "-", color=f"C{i}", label=LABELS[arm])
    ax.axvline(cfg["segment"], color="gray", ls=":", lw=0.8)
    ax.axvline(cfg["window"] + cfg["sinks"], color="gray", ls="--", lw=0.6)
    ax.set_xlabel("position in the stream (training length L dotted, cache size dashed)")
    ax.set_ylabel("bits per character")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


__all__ = ["bpc_text", "plot", "report", "rows"]
