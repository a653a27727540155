"""The context experiment's outputs: bpc by model and evaluation memory, the evaluation
timing by context length, the checks, a CSV, the JSON and a PNG (bpc against the
evaluation memory; seconds per character and the speedup against the context length)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, plateau_text, pyplot, reported_table, save_figure
from ..evidence import conclude


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per measured setting: bpc by model and evaluation (mean over seeds, each
    seed), then seconds per character by context length (median over repeats)."""
    out = []
    for setting, per_seed in result["bpc"].items():
        out.append({"measure": "bpc", "setting": setting,
                    "value": round(statistics.fmean(per_seed), 4),
                    "each": " ".join(f"{x:.4f}" for x in per_seed)})  # fmt: skip
    for c, reps in result["numbers"]["timing"].items():
        for i, model in enumerate(("transformer-lm, recomputed", "transformer-xl, memory")):
            xs = [r[i] for r in reps]
            out.append({"measure": "seconds per character", "setting": f"{model}, C = {c}",
                        "value": statistics.median(xs),
                        "each": " ".join(f"{x:.3g}" for x in xs)})  # fmt: skip
    return out


def bpc_text(result: dict[str, Any]) -> str:
    seeds = result["seeds"]
    body = [[k, *(f"{x:.3f}" for x in v), f"{statistics.fmean(v):.3f}"]
            for k, v in result["bpc"].items()]  # fmt: skip
    return markdown_table(["test bpc", *(f"seed {s}" for s in seeds), "mean"], body)


def timing_text(result: dict[str, Any]) -> str:
    body = []
    for c, reps in result["numbers"]["timing"].items():
        v = statistics.median(r[0] for r in reps)
        x = statistics.median(r[1] for r in reps)
        body.append([c, f"{1e3 * v:.3f}", f"{1e3 * x:.4f}", f"{v / x:.0f}x"])
    return markdown_table(["context C", "vanilla, recomputed (ms/char)",
                           "XL, memory (ms/char)", "speedup"], body)  # fmt: skip


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    params = ", ".join(f"{k} {v:,}" for k, v in result["parameters"].items())
    secs = sum(result["train_seconds"].values())
    say(f"parameters: {params}; {secs:.0f}s of training; {plateau_text(result)}")
    say(bpc_text(result))
    say(timing_text(result))
    say(reported_table(result))
    return conclude("context", result, rows, plot, out, say, "training and measuring")


def plot(result: dict[str, Any], path: Path) -> Path:
    """Left: test bpc against XL's evaluation memory (seeds as dots), the vanilla LM's as
    lines. Right: seconds per character against the context length, both ways, log-log."""
    plt = pyplot()

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    bpc = result["bpc"]
    xl = {int(k.rsplit(" ", 1)[1]): v for k, v in bpc.items() if k.startswith("transformer-xl")}
    ms = sorted(xl)
    ax.plot(ms, [statistics.fmean(xl[m]) for m in ms], "o-", color="C0",
            label="transformer-xl (memory carried)")  # fmt: skip
    for m in ms:
        ax.plot([m] * len(xl[m]), xl[m], "k.", ms=4)
    for i, key in enumerate(("transformer-lm, sliding window", "transformer-lm, segments")):
        ax.axhline(statistics.fmean(bpc[key]), color=f"C{i + 1}", ls="--", label=key)
    ax.axvline(result["config"]["memory"], color="gray", ls=":", lw=0.8)
    ax.set_xlabel("evaluation memory length (training memory dotted)")
    ax.set_ylabel("test bits per character")
    ax.legend(fontsize=8)
    timing = result["numbers"]["timing"]
    cs = sorted(int(c) for c in timing)
    for i, label in enumerate(("transformer-lm, context recomputed", "transformer-xl, memory")):
        ys = [statistics.median(r[i] for r in timing[str(c)]) for c in cs]
        bx.loglog(cs, ys, "o-", color=f"C{1 - i}", label=label)
    bx.set_xlabel("context length C")
    bx.set_ylabel("seconds per predicted character")
    bx.legend(fontsize=8)
    return save_figure(fig, path)


__all__ = ["bpc_text", "plot", "report", "rows", "timing_text"]
