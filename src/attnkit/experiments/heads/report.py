"""The heads experiment's outputs: a table per setting, the checks and the verdicts,
heads.csv, heads.json, heads.png (test BLEU, test perplexity and the heads' Jensen–Shannon
divergence against h) and heads-maps.png (one cross-attention map per head of one test
sentence, gold links boxed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..base import Say, markdown_table, pyplot, save_figure, write_outputs
from ..evidence import checks_table

MEASURES = (  # key, label, unit
    ("bleu", "test BLEU", ""),
    ("test_ppl", "test PPL", ""),
    ("valid_ppl", "valid PPL", ""),
    ("epochs", "epochs", ""),
    ("exact", "exact", "%"),
    ("aer", "AER (mean of heads)", "%"),
    ("aer_best_head", "AER (best head)", "%"),
    ("js", "JS between heads (nats)", ""),
)


def _cell(row: dict[str, Any], key: str) -> str:
    mean, std = row[f"{key}_mean"], row[f"{key}_std"]
    if mean is None or math.isnan(mean):
        return "—"
    digits = 3 if key == "js" else 2 if key.endswith("ppl") else 1
    spread = "" if std is None or math.isnan(std) else f" ± {std:.{digits}f}"
    return f"{mean:.{digits}f}{spread}"


def text_table(result: dict[str, Any], task: str) -> str:
    """One row per head count: d_k, parameters, runs on the plateau, then each measure as
    mean ± std over seeds."""
    dim = result["config"]["dim"]
    params = result["parameters"][task]
    head = ["h", "d_k", "parameters", "plateau", *(f"{label}{' ' + u if u else ''}"
                                                   for _, label, u in MEASURES)]  # fmt: skip
    body = [
        [
            str(r["heads"]),
            str(dim // r["heads"]),
            f"{params.get(str(r['heads']), 0):,}",
            f"{r['plateau']}/{r['seeds']}",
        ]
        + [_cell(r, key) for key, _, _ in MEASURES]
        for r in result["by_heads"]
        if r["task"] == task
    ]
    return markdown_table(head, body)


def verdict_lines(result: dict[str, Any]) -> list[str]:
    """The verdict of each checked setting, what each trend setting's checks read (not part
    of the verdict), then the experiment's verdict."""
    lines = [f"{task}: {v}" for task, v in result["verdicts"].items()]
    lines += [f"{task} (trend with data, not checked): {v}"
              for task, v in result.get("trend_verdicts", {}).items()]  # fmt: skip
    return [*lines, f"verdict: {result['verdict']}"]


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print the table of each task and the verdict; write the files."""
    out.mkdir(parents=True, exist_ok=True)
    tasks = list(dict.fromkeys(r["task"] for r in result["by_heads"]))
    cfg = result["config"]
    for task in tasks:
        say(f"\n{task}: trained to a plateau (patience {cfg['patience']} epochs, cap "
            f"{cfg['max_epochs']}), {cfg['seeds']} seeds; mean ± std over seeds")  # fmt: skip
        say(text_table(result, task))
    say(f"Multi30K: {result['multi30k']}")
    say("\nchecks (95% t-intervals over the per-seed gaps; design checks on the compared arms)")
    say(checks_table(result["checks"]))
    if result.get("reported_checks"):
        say("\nreported, not checked (arms not compared, half (ii) out of scope, trend settings)")
        say(checks_table(result["reported_checks"]))
    maps = lambda o: plot_maps(result["example"], o / "heads-maps.png")  # noqa: E731
    paths = write_outputs("heads", result["by_heads"], result, plot, out, say, extra=[maps])
    say(f"total {result['total_seconds']:.0f}s (training and scoring)")
    for line in verdict_lines(result):
        say(line)
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """BLEU, AER and JS against h (log scale), mean ± std over seeds; one line per task."""
    plt = pyplot()

    keys = (("bleu", "test BLEU (greedy)"), ("test_ppl", "test perplexity"), ("js", "JS (nats)"))
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    tasks = list(dict.fromkeys(r["task"] for r in result["by_heads"]))
    for task, style in zip(tasks, ("o-", "s--", "^:", "d-.", "v-", "x--"), strict=False):
        rows = [r for r in result["by_heads"] if r["task"] == task]
        hs = [r["heads"] for r in rows]
        for ax, (key, _) in zip(axes, keys, strict=True):
            y = np.array([np.nan if r[f"{key}_mean"] is None else r[f"{key}_mean"] for r in rows])
            err = np.array([0.0 if r[f"{key}_std"] is None else r[f"{key}_std"] for r in rows])
            if not np.isnan(y).all():
                ax.errorbar(hs, y, yerr=np.nan_to_num(err), fmt=style, capsize=3, label=task)
    for ax, (_, label) in zip(axes, keys, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("heads h (d_model fixed)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend()
    cfg = result["config"]
    fig.suptitle(
        f"Transformer d_model {cfg['dim']}, {cfg['layers']}+{cfg['layers']} layers, "
        f"to a plateau, {cfg['seeds']} seeds (cf. Vaswani et al. 2017, Table 3 A)",
        fontsize=10,
    )
    return save_figure(fig, path)


def plot_maps(example: dict[str, Any], path: Path) -> Path:
    """One panel per head of the last decoder layer's cross-attention on one test sentence,
    the gold links boxed (attnkit.viz.heatmap)."""
    from ...viz.heatmap import heatmap

    weights = np.array(example["weights"], dtype=np.float32)  # (H, T, S)
    heatmap(
        weights,
        example["tgt"],
        example["src"],
        gold=[tuple(x) for x in example["links"]],
        path=path,
        title=f"{example['task']}, h = {example['heads']}: cross-attention of the last layer, "
        f"one map per head (test sentence {example['index']}, seed {example['seed']}; "
        "red: gold links)",
        dpi=100,
    )
    return path


__all__ = ["plot", "plot_maps", "report", "text_table", "verdict_lines"]
