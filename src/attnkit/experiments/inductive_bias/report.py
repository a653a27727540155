"""The inductive-bias experiment's outputs: a Markdown table of test accuracy by training-set
size (mean ± std over seeds), inductive-bias.csv, inductive-bias.json, inductive-bias.png
(learning curves, one panel per task) and inductive-bias-maps.png (the attention model's
class-token attention, upsampled from its patch grid onto a few test images)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, pyplot, save_figure, write_outputs
from ..evidence import checks_table
from .data import upsample

NAME = "inductive-bias"
LABELS = {"cnn": "CNN", "attention": "attention"}


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (task, fraction): images used, each model's mean and std, the gap."""
    out = []
    for t in result["tasks"]:
        mean, std = result["mean"][t], result["std"][t]
        on_cell = result["attention_on_digit_cell"].get(t)
        for i, f in enumerate(result["fractions"]):
            row: dict[str, Any] = {
                "task": t,
                "fraction": f,
                "train_images": result["train_images"][t][i],
            }
            for m in LABELS:
                row[f"{m}_mean"] = round(mean[m][i], 4)
                row[f"{m}_std"] = round(std[m][i], 4)
            row["gap"] = round(result["gap"][t][i], 6)
            row["attention_on_digit_cell"] = "" if on_cell is None else round(on_cell[i], 4)
            out.append(row)
    return out


def text_table(result: dict[str, Any]) -> str:
    head = [
        "task",
        "fraction",
        "train images",
        "CNN acc %",
        "attention acc %",
        "gap (points)",
        "attention on digit's cell",
    ]
    body = [
        [
            r["task"],
            f"{r['fraction']:.0%}",
            str(r["train_images"]),
            f"{100 * r['cnn_mean']:.1f} ± {100 * r['cnn_std']:.1f}",
            f"{100 * r['attention_mean']:.1f} ± {100 * r['attention_std']:.1f}",
            f"{100 * r['gap']:+.1f}",
            "" if r["attention_on_digit_cell"] == "" else f"{r['attention_on_digit_cell']:.0%}",
        ]
        for r in rows(result)
    ]
    return markdown_table(head, body)


def catch_up_text(result: dict[str, Any]) -> str:
    c = result["catch_up"]
    return "; ".join(
        f"{t}: attention "
        + ("never catches up" if c[t] is None else f"catches up from {c[t]:.0%} of the data on")
        for t in result["tasks"]
    )



def verdict_line(result: dict[str, Any]) -> str:
    return (
        f"reported: {catch_up_text(result)} (caught up = the mean gap stays below 2 points "
        f"from there on)\nverdict: {result['verdict']}"
    )


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print budgets, the table and the verdict; write the files."""
    u, p = result["updates"], result["parameters"]
    say(
        f"same updates at every fraction: {u['steps']} Adam steps of {u['batch_size']} (lr "
        f"{u['lr']}, clip {u['clip']}), same batches for both models; parameters: "
        + "; ".join(
            f"{t}: CNN {p[t]['cnn']:,}, attention {p[t]['attention']:,}" for t in result["tasks"]
        )
        + f"; seeds {result['seeds']}; test images: "
        + ", ".join(f"{t} {n}" for t, n in result["test_images"].items())
    )
    say(text_table(result))
    say(checks_table(result["checks"]))
    paths = write_outputs(
        NAME,
        rows(result),
        result,
        plot,
        out,
        say,
        extra=[lambda d: plot_maps(result, d / f"{NAME}-maps.png")],
    )
    say(
        f"total {result['total_seconds']:.0f}s ({result['train_seconds']:.0f}s of training "
        "summed over runs)"
    )
    say(verdict_line(result))
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """One panel per task: test accuracy vs training images (log x), mean ± std over seeds."""
    plt = pyplot()

    tasks = result["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, t in zip(axes[0], tasks, strict=True):
        n = result["train_images"][t]
        for m, mark in zip(LABELS, "os", strict=True):
            mean = [100 * a for a in result["mean"][t][m]]
            std = [100 * s for s in result["std"][t][m]]
            ax.errorbar(
                n,
                mean,
                yerr=std,
                fmt=mark + "-",
                capsize=3,
                label=f"{LABELS[m]} ({result['parameters'][t][m]:,} params)",
            )
        ax.axhline(10, color="grey", lw=0.8, ls=":", label="chance")
        ax.set(
            xscale="log",
            ylim=(0, 102),
            xlabel="training images (log scale)",
            ylabel="test accuracy (%)",
            title=f"{t}: {result['updates']['steps']} updates at every size",
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    return save_figure(fig, path)


def plot_maps(result: dict[str, Any], path: Path) -> Path:
    """Per task, a row of test images and a row of the class token's attention upsampled onto
    them (each patch's weight on its P×P pixels), from the first seed's largest-data model."""
    plt = pyplot()
    import numpy as np
    import torch

    tasks = result["tasks"]
    k = max(len(result["maps"][t]["labels"]) for t in tasks)
    fig, axes = plt.subplots(
        2 * len(tasks), k, figsize=(max(1.6 * k, 5), 3.4 * len(tasks)), squeeze=False
    )
    for j, t in enumerate(tasks):
        m = result["maps"][t]
        for i in range(k):
            top, bottom = axes[2 * j, i], axes[2 * j + 1, i]
            top.axis("off")
            bottom.axis("off")
            if i >= len(m["labels"]):
                continue
            image = np.asarray(m["images"][i])  # (S, S)
            patch = m["patch"]
            heat = upsample(torch.tensor(m["maps"][i])[None], patch)[0].numpy()  # (S, S)
            top.imshow(image, cmap="gray_r", vmin=0, vmax=1)
            top.set_title(f"{t}: {m['labels'][i]} → {m['predicted'][i]}", fontsize=8)
            bottom.imshow(image, cmap="gray_r", vmin=0, vmax=1)
            bottom.imshow(heat, cmap="inferno", alpha=0.6)
            bottom.set_title("class-token attention", fontsize=7)
    fig.suptitle(
        "where the attention model's class token looks\n(last layer, heads averaged)", fontsize=9
    )
    return save_figure(fig, path)


__all__ = ["catch_up_text", "plot", "plot_maps", "report", "rows", "text_table",
           "verdict_line"]
