"""The distance experiment's outputs: a Markdown table of accuracy and gradient norm by Δ,
distance.csv, distance.json and distance.png (accuracy vs Δ; gradient norm vs Δ at
initialisation and after training, log scale)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...models.sequence_classifiers import MODELS
from ..base import Say, markdown_table, write_outputs

LABELS = {"lstm": "LSTM", "gru": "GRU", "cnn": "CNN", "attention": "attention"}


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per Δ: each model's accuracy, then its gradient norm at init and trained."""
    out = []
    for i, d in enumerate(result["deltas"]):
        row: dict[str, Any] = {"delta": d}
        for m in MODELS:
            row[f"{m}_acc"] = round(result["accuracy"][m][i], 4)
        for key in ("grad_init", "grad_trained"):
            for m in MODELS:
                row[f"{m}_{key}"] = float(f"{result[key][m][i]:.4g}")
        out.append(row)
    return out


def text_table(result: dict[str, Any]) -> str:
    head = ["Δ"] + [f"{LABELS[m]} acc %" for m in MODELS]
    head += [f"{LABELS[m]} ‖∂ℓ/∂x‖ init / trained" for m in MODELS]
    body = [
        [str(r["delta"])]
        + [f"{100 * r[f'{m}_acc']:.1f}" for m in MODELS]
        + [f"{r[f'{m}_grad_init']:.2g} / {r[f'{m}_grad_trained']:.2g}" for m in MODELS]
        for r in rows(result)
    ]
    return markdown_table(head, body)


def verdict_line(result: dict[str, Any]) -> str:
    c = result["checks"]
    drop, ratio = c["accuracy_drop"], c["initial_gradient_ratio"]
    nums = (
        "accuracy lost from the shortest to the longest Δ: "
        + ", ".join(f"{LABELS[m]} {100 * drop[m]:.1f} points" for m in MODELS)
        + "; initial gradient Δmax/Δmin: "
        + ", ".join(f"{LABELS[m]} {ratio[m]:.2g}" for m in MODELS)
    )
    return f"verdict: {result['verdict']}. {nums}"


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print budgets, the table and the verdict; write distance.{csv,json,png}."""
    secs, params, widths = result["train_seconds"], result["parameters"], result["widths"]
    u = result["updates"]
    say(
        f"same updates: {u['steps']} Adam steps of {u['batch_size']} (lr {u['lr']}, clip "
        f"{u['clip']}), same batches; parameters: "
        + ", ".join(
            f"{LABELS[m]} {params[m]:,} (width {widths[m]}, {secs[m]:.0f}s)" for m in MODELS
        )  # fmt: skip
    )
    say(f"chance {100 * result['chance']:.1f}%; sequence length {result['length']}")
    say(text_table(result))
    paths = write_outputs("distance", rows(result), result, plot, out, say)
    say(f"total {result['total_seconds']:.0f}s (training and scoring)")
    say(verdict_line(result))
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """Left: accuracy vs Δ; right: ‖∂ℓ/∂x_{t−Δ}‖ vs Δ (dashed at init, solid trained)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = result["deltas"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    for m, mark in zip(MODELS, "osD^", strict=True):
        line = ax.plot(d, [100 * a for a in result["accuracy"][m]], mark + "-", label=LABELS[m])
        c = line[0].get_color()
        bx.plot(d, [max(g, 1e-300) for g in result["grad_init"][m]], mark + "--", color=c,
                alpha=0.6, label=f"{LABELS[m]} init")  # fmt: skip
        bx.plot(d, [max(g, 1e-300) for g in result["grad_trained"][m]], mark + "-", color=c,
                label=f"{LABELS[m]} trained")  # fmt: skip
    ax.axhline(100 * result["chance"], color="grey", lw=0.8, ls=":", label="chance")
    u = result["updates"]
    ax.set(xscale="log", ylim=(0, 102), xlabel="distance Δ", ylabel="test accuracy (%)",
           title=f"recall Δ back, {u['steps']} updates of {u['batch_size']}")  # fmt: skip
    bx.set(xscale="log", yscale="log", xlabel="distance Δ",
           ylabel="‖∂ loss / ∂ input embedding at t − Δ‖",
           title="gradient w.r.t. the input Δ back (mean over examples)")  # fmt: skip
    for a in (ax, bx):
        a.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    bx.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["report", "rows", "text_table", "verdict_line"]
