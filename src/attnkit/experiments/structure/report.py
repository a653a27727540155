"""The structure experiment's outputs: a table of mean accuracy (± spread over seeds),
parameters and seconds per update for each (task, model); CSV of every (model, seed) row;
JSON; a PNG of accuracy per model, one panel per task, seeds as dots."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, write_outputs

COLUMNS = ("task", "model", "seed", "accuracy", "parameters", "seconds_per_step", "key_peak")


def csv_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every (model, seed) row with the same columns (a task without a column leaves it
    empty)."""
    rows = [{c: r.get(c, "") for c in COLUMNS} for r in result["rows"]]
    return [{k: ("" if v is None else v) for k, v in r.items()} for r in rows] or [
        dict.fromkeys(COLUMNS, "")
    ]


def summary(result: dict[str, Any]) -> list[list[str]]:
    """One line per (task, model): accuracy mean [min, max], key peak, parameters, s/update."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in result["rows"]:
        groups.setdefault((r["task"], r["model"]), []).append(r)
    out = []
    for (task, model), rs in groups.items():
        acc = [r["accuracy"] for r in rs]
        peaks = [r["key_peak"] for r in rs if r.get("key_peak") is not None]
        sps = sum(r["seconds_per_step"] for r in rs) / len(rs)
        out.append([
            task, model, f"{sum(acc) / len(acc):.3f} [{min(acc):.3f}, {max(acc):.3f}]",
            f"{sum(peaks) / len(peaks):.3f}" if peaks else "-",
            str(rs[0]["parameters"]), f"{1000 * sps:.1f}", str(len(rs)),
        ])  # fmt: skip
    return out


HEAD = ["task", "model", "accuracy mean [min, max]", "key-sentence peak", "parameters",
        "ms / update", "seeds"]  # fmt: skip


def plot(result: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in result["rows"])) or ["(nothing measured)"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        rs = [r for r in result["rows"] if r["task"] == task]
        models = list(dict.fromkeys(r["model"] for r in rs))
        for i, m in enumerate(models):
            acc = [r["accuracy"] for r in rs if r["model"] == m]
            peaks = [r["key_peak"] for r in rs if r["model"] == m and r.get("key_peak") is not None]
            first = i == 0
            ax.bar(i, sum(acc) / len(acc), color="tab:blue", alpha=0.6,
                   label="accuracy, mean" if first else None)  # fmt: skip
            ax.plot([i] * len(acc), acc, "k.", ms=5, label="accuracy, a seed" if first else None)
            ax.plot([i + 0.25] * len(peaks), peaks, "rd", ms=4,
                    label="key-sentence peak, a seed" if first else None)  # fmt: skip
        ax.set_xticks(range(len(models)), models, rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("test accuracy")
        steps = result["budgets"]["updates_per_model"].get(task, "?")
        ax.set_title(f"{task} ({steps} updates each)", fontsize=9)
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(textwrap.fill(result["verdict"], 85 * len(tasks)), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    say(markdown_table(HEAD, summary(result)))
    say(f"verdict: {result['verdict']}")
    return write_outputs("structure", csv_rows(result), result, plot, out, say)


__all__ = ["COLUMNS", "csv_rows", "plot", "report", "summary"]
