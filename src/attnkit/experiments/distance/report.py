"""The distance experiment's outputs: per task a Markdown table of updates-to-criterion and
held-out accuracy by Δ, the checks, distance.csv, distance.json and distance.png
(updates-to-criterion vs Δ per task; the initial gradient norm vs Δ)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from ...models.sequence_classifiers import MODELS
from ..base import Say, markdown_table, pyplot, save_figure, write_outputs
from ..evidence import checks_table
from .checks import caps_of

LABELS = {"lstm": "LSTM", "gru": "GRU", "cnn": "CNN", "attention": "attention"}


def geomean(xs: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs))


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (task, model, Δ): updates-to-criterion (geometric mean over seeds, the
    censored ones at the cap), censored runs, held-out accuracy where training stopped, and
    the gradient norms (at initialisation: the task-independent probe)."""
    out = []
    for t in result["tasks"]:
        for m in MODELS:
            for i, d in enumerate(result["deltas"]):
                u = result["updates"][t][m][i]
                g_init = statistics.fmean(g[i] for g in result["grad_init"][m])
                g_trained = statistics.fmean(result["grad_trained"][t][m][i])
                row = {
                    "task": t, "model": m, "delta": d, "length": result["length"],
                    "cap": caps_of(result)[t][m],
                    "updates_geomean": round(geomean(u), 1),
                    "updates_per_seed": " ".join(str(x) for x in u),
                    "censored": sum(result["censored"][t][m][i]),
                    "seeds": len(u),
                    "accuracy_end": round(statistics.fmean(result["accuracy_end"][t][m][i]), 4),
                    "grad_init": float(f"{g_init:.4g}"),
                    "grad_trained": float(f"{g_trained:.4g}"),
                }  # fmt: skip
                sv = result["survival"][t][m][i]
                row.update({
                    "km_median": "" if sv["km_median"] is None else sv["km_median"],
                    "rmst": round(sv["rmst"], 1), "rmst_lo": round(sv["rmst_ci"][0], 1),
                    "rmst_hi": round(sv["rmst_ci"][1], 1),
                })  # fmt: skip
                out.append(row)
    return out


def text_table(result: dict[str, Any], task: str) -> str:
    """Δ by model: updates-to-criterion (geometric mean; "+k" k runs censored at the cap)
    and the held-out accuracy where training stopped."""
    by = {(r["model"], r["delta"]): r for r in rows(result) if r["task"] == task}
    head = ["Δ"] + [f"{LABELS[m]} updates" for m in MODELS]
    head += [f"{LABELS[m]} acc %" for m in MODELS]
    body = []
    for d in result["deltas"]:
        cells = [str(d)]
        for m in MODELS:
            r = by[(m, d)]
            cells.append(f"{r['updates_geomean']:.0f}"
                         + (f" ({r['censored']}/{r['seeds']} at cap)" if r["censored"] else ""))
        cells += [f"{100 * by[(m, d)]['accuracy_end']:.1f}" for m in MODELS]
        body.append(cells)
    return markdown_table(head, body)


def survival_table(result: dict[str, Any], task: str) -> str:
    """Δ by model: the Kaplan-Meier median of updates-to-criterion ("> cap" when more than half
    the runs are censored) and the mean restricted to the cap with its 95% t-interval."""
    caps = caps_of(result)[task]
    head = ["Δ"] + [f"{LABELS[m]} KM median; RMST [95% CI]" for m in MODELS]
    body = []
    for i, d in enumerate(result["deltas"]):
        cells = [str(d)]
        for m in MODELS:
            sv = result["survival"][task][m][i]
            med = f"> {caps[m]}" if sv["km_median"] is None else f"{sv['km_median']:.0f}"
            cells.append(f"{med}; {sv['rmst']:.0f} [{sv['rmst_ci'][0]:.0f}, "
                         f"{sv['rmst_ci'][1]:.0f}]" + (f" ({sv['censored']}/{sv['seeds']} "
                                                       "censored)" if sv["censored"] else ""))
        body.append(cells)
    return markdown_table(head, body)


def gradient_table(result: dict[str, Any]) -> str:
    """Δ by model: ‖∂ℓ/∂e_{t−Δ}‖ at initialisation (mean over seeds; one sequence length)."""
    head = ["Δ"] + [f"{LABELS[m]} ‖∂ℓ/∂e‖ init" for m in MODELS]
    body = [[str(d)] + [f"{statistics.fmean(g[i] for g in result['grad_init'][m]):.2g}"
                        for m in MODELS] for i, d in enumerate(result["deltas"])]  # fmt: skip
    return markdown_table(head, body)


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print budgets, the tables, the checks and the verdict; write distance.{csv,json,png}."""
    u, params, widths = result["updates_rule"], result["parameters"], result["widths"]
    say(f"same updates: Adam (lr {u['lr']}, clip {u['clip']}), batches of {u['batch_size']}, "
        f"the same batches per (task, Δ, seed); criterion {result['criterion']:.0%} over "
        f"{u['window']} fresh batches; parameters: "
        + ", ".join(f"{LABELS[m]} {params[m]:,} (width {widths[m]})" for m in MODELS))  # fmt: skip
    say(f"chance {100 * result['chance']:.1f}%; every Δ in sequences of {result['length']} "
        f"tokens; seeds {result['seeds']}")
    cal = result.get("calibration")
    if cal:
        say(f"caps calibrated on seed {cal['seed']} (not a verdict seed): "
            f"{cal['cap_factor']}x{cal['cap_margin']} each model's own u(Δmin) there"
            + ("" if cal["scale"] >= 1 else f", scaled by {cal['scale']:.2f} to the budget of "
               f"{cal['budget_minutes']:g} min") + f"; worst case {cal['worst_minutes']:g} min")
    for t in result["tasks"]:
        say(f"caps ({t}): " + ", ".join(f"{LABELS[m]} {c}" for m, c in caps_of(result)[t].items()))
    for t in result["tasks"]:
        say(f"\ntask {t}: updates-to-criterion (geometric mean over seeds; a censored run "
            f"counts as the cap) and held-out accuracy where training stopped")
        say(text_table(result, t))
        say("censoring-aware: Kaplan-Meier median and mean restricted to each model's cap")
        say(survival_table(result, t))
        say("slope of log updates vs log Δ (reported, not checked; 95% t-interval): " + ", ".join(
            f"{LABELS[m]} {v:.2f} [{lo:.2f}, {hi:.2f}]"
            for m, (v, lo, hi) in result["slope"][t].items()))  # fmt: skip
    say("\ngradient w.r.t. the input Δ back at initialisation (mean over seeds)")
    say(gradient_table(result))
    say("\nreported, not checked (thresholds the paper does not set):")
    say(checks_table(result["reported_checks"]))
    say("\n" + checks_table(result["checks"]))
    paths = write_outputs("distance", rows(result), result, plot, out, say)
    say(f"total {result['total_seconds']:.0f}s wall; the runs' CPU time "
        f"{result['cpu_seconds']:.0f}s (training {result['train_seconds']:.0f}s wall, summed)")
    say(f"verdict: {result['verdict']}")
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """Left: updates-to-criterion vs Δ (one panel per task; log-log, each model's cap dotted in
    its colour);
    right: ‖∂ℓ/∂e_{t−Δ}‖ at initialisation vs Δ."""
    plt = pyplot()

    d, tasks = result["deltas"], result["tasks"]
    fig, axes = plt.subplots(1, len(tasks) + 1, figsize=(4.6 * (len(tasks) + 1), 4))
    for ax, t in zip(axes, tasks, strict=False):
        for m, mark in zip(MODELS, "osD^", strict=True):
            u = result["updates"][t][m]
            line, = ax.plot(d, [geomean(x) for x in u], mark + "-", label=LABELS[m])
            ax.axhline(caps_of(result)[t][m], color=line.get_color(), lw=0.8, ls=":")
        ax.set(xscale="log", yscale="log", xlabel="distance Δ",
               ylabel=f"updates to {result['criterion']:.0%} (geometric mean)",
               title=f"task {t}: learnt from scratch at each Δ (caps dotted)")  # fmt: skip
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    bx = axes[-1]
    for m, mark in zip(MODELS, "osD^", strict=True):
        g = [statistics.fmean(s[i] for s in result["grad_init"][m]) for i in range(len(d))]
        bx.plot(d, [max(x, 1e-300) for x in g], mark + "-", label=LABELS[m])
    bx.set(xscale="log", yscale="log", xlabel="distance Δ",
           ylabel="‖∂ loss / ∂ input embedding at t − Δ‖",
           title="gradient at initialisation")  # fmt: skip
    bx.grid(alpha=0.3)
    bx.legend(fontsize=8)
    return save_figure(fig, path)


__all__ = ["gradient_table", "report", "rows", "survival_table", "text_table"]
