"""The structure experiment's outputs: per part a Markdown table of its arms (AUC, final and
test accuracy as mean [min, max] over seeds, parameters, updates, CPU seconds), the checks,
structure.csv (one row per run), structure.json and structure.png (the learning curves: docs
validation accuracy per update count, digit-qa validation accuracy per score)."""

from __future__ import annotations

import statistics
import textwrap
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, save_figure, write_outputs
from ..evidence import checks_table

COLUMNS = ("part", "arm", "seed", "auc", "valid_final", "valid_best", "test_accuracy",
           "parameters", "steps_run", "cpu_seconds")  # fmt: skip


def csv_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per run, the same columns for every part (a part without one leaves it
    empty)."""
    rows = []
    for name, r in result["runs"].items():
        part, arm, seed = name.split("/")
        cells = {"part": part, "arm": arm, "seed": int(seed)}
        rows.append({c: cells.get(c, r.get(c, "")) for c in COLUMNS})
    return rows or [dict.fromkeys(COLUMNS, "")]


def _spread(xs: list[float]) -> str:
    return f"{statistics.fmean(xs):.3f} [{min(xs):.3f}, {max(xs):.3f}]" if xs else "-"


def summary(result: dict[str, Any]) -> list[list[str]]:
    """One line per (part, arm): AUC, final validation, test accuracy (mean [min, max] over
    seeds), parameters, updates run (mean), CPU seconds per run, seeds."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for name, r in result["runs"].items():
        part, arm, _ = name.split("/")
        groups.setdefault((part, arm), []).append(r)
    out = []
    for (part, arm), rs in groups.items():
        def col(key: str, rs: list[dict[str, Any]] = rs) -> list[float]:
            return [r[key] for r in rs if key in r]

        steps = col("steps_run")
        out.append([
            part, arm, _spread(col("auc")),
            _spread(col("valid_final") or col("valid_best")), _spread(col("test_accuracy")),
            str(rs[0]["parameters"]),
            f"{statistics.fmean(steps):.0f}" if steps else str(result["config"]["cap"]),
            f"{statistics.fmean(col('cpu_seconds')):.0f}", str(len(rs)),
        ])  # fmt: skip
    return out


HEAD = ["part", "arm", "AUC mean [min, max]", "valid acc (final / best)", "test acc",
        "parameters", "updates", "CPU s / run", "seeds"]  # fmt: skip


def _mean_curve(curves: list[list[float]]) -> list[float]:
    n = min(len(c) for c in curves)
    return [statistics.fmean(c[i] for c in curves) for i in range(n)]


def plot(result: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = list(result["parts"]) or ["(nothing measured)"]
    fig, axes = plt.subplots(1, len(parts), figsize=(4.6 * len(parts), 3.6), squeeze=False)
    cfg = result["config"]
    for ax, part in zip(axes[0], parts, strict=True):
        qa = part == "qa"
        from . import SETTINGS

        s = SETTINGS[bool(cfg["tiny"])]
        fitted = not qa and bool(cfg.get("train_docs"))  # a converged run's first score: 1 interval
        key = "valid_curve" if qa else "curve"
        every = int(s["qa_every"] if qa else s["fit_every"] if fitted else s["every"])  # type: ignore[call-overload]
        offset = qa or fitted  # the first score comes after one interval, not at 0
        for arm in result["parts"].get(part, {}).get("arms", []):
            curves = [r[key] for n, r in result["runs"].items()
                      if n.split("/")[:2] == [part, arm]]  # fmt: skip
            if not curves:
                continue
            for c in curves:
                xs = [(i + offset) * every for i in range(len(c))]
                ax.plot(xs, c, lw=0.5, alpha=0.35, color=f"C{arms_index(result, part, arm)}")
            mean = _mean_curve(curves)
            ax.plot([(i + offset) * every for i in range(len(mean))], mean, lw=2,
                    color=f"C{arms_index(result, part, arm)}", label=arm)  # fmt: skip
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("updates")
        ax.set_ylabel("validation accuracy")
        ax.set_title(f"{part}: {result['parts'].get(part, {}).get('verdict', '')[:40]}",
                     fontsize=8)  # fmt: skip
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(textwrap.fill(result["verdict"], 110 * len(parts) // 2), fontsize=6)
    return save_figure(fig, path, dpi=100)


def arms_index(result: dict[str, Any], part: str, arm: str) -> int:
    return result["parts"][part]["arms"].index(arm)


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    say(markdown_table(HEAD, summary(result)))
    say(checks_table(result["checks"]))
    for part, p in result["parts"].items():
        say(f"{part}: {p['verdict']}")
    say(f"verdict: {result['verdict']}")
    return write_outputs("structure", csv_rows(result), result, plot, out, say)


__all__ = ["COLUMNS", "HEAD", "csv_rows", "plot", "report", "summary"]
