"""The sparse experiment's outputs: bpc by alignment, the one-layer cost by alignment and n
with its slopes, the checks, a CSV, the JSON and a PNG (memory and time against n)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, pyplot, save_figure
from ..evidence import conclude


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (arm, n) of the cost grid, with the arm's bpc (mean of seeds)."""
    out = []
    for arm, by_n in result["numbers"]["cost"].items():
        for n, c in by_n.items():
            out.append({"arm": arm, "n": int(n), "saved_mib": round(c["saved_bytes"] / 2**20, 3),
                        "ms_median": round(1000 * statistics.median(c["seconds"]), 2),
                        "bpc": round(statistics.fmean(result["bpc"][arm]), 4)})  # fmt: skip
    return out


def cost_text(result: dict[str, Any]) -> str:
    """Arms as rows: saved MiB and median ms at each n, then the slopes."""
    cost = result["numbers"]["cost"]
    ns = list(next(iter(cost.values())))
    head = ["arm", "test bpc (seeds)",
            *(f"n={n}: MiB / ms" for n in ns), "memory p", "time p [95%]"]  # fmt: skip
    body = []
    for arm, by_n in cost.items():
        t = result["slopes"][arm]["time"]
        body.append([arm, " ".join(f"{x:.3f}" for x in result["bpc"][arm]),
                     *(f"{by_n[n]['saved_bytes'] / 2**20:.1f} / "
                       f"{1000 * statistics.median(by_n[n]['seconds']):.0f}" for n in ns),
                     f"{result['slopes'][arm]['memory']:.2f}",
                     f"{t[0]:.2f} [{t[1]:.2f}, {t[2]:.2f}]"])  # fmt: skip
    return markdown_table(head, body)


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    params = ", ".join(f"{k} {v:,}" for k, v in result["parameters"].items())
    secs = sum(result["train_seconds"].values())
    say(f"parameters: {params}; stride l = {result['stride']}; {result['updates']} updates "
        f"per model, {secs:.0f}s of training; {result['segments']} test segments per seed")
    say(f"unigram bpc of the test text: {statistics.fmean(result['numbers']['unigram']):.3f}")
    say(cost_text(result))
    return conclude("sparse", result, rows, plot, out, say, "training and measuring")


def plot(result: dict[str, Any], path: Path) -> Path:
    """Saved MiB and median time of one attention against n (log-log), one line per arm."""
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for i, (arm, by_n) in enumerate(result["numbers"]["cost"].items()):
        ns = [int(n) for n in by_n]
        axes[0].plot(ns, [by_n[str(n)]["saved_bytes"] / 2**20 for n in ns], "o-",
                     color=f"C{i}", label=arm)  # fmt: skip
        axes[1].plot(ns, [1000 * statistics.median(by_n[str(n)]["seconds"]) for n in ns], "o-",
                     color=f"C{i}", label=arm)  # fmt: skip
    for ax, label in zip(axes, ("saved for backward (MiB)", "forward + backward (ms)"),
                         strict=True):  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    return save_figure(fig, path)


__all__ = ["cost_text", "plot", "report", "rows"]
