"""The explanation experiment's outputs: a table per task (accuracy of every model; τ, JSD and
top-token hits of the attention model; means with 95% t-intervals over seeds), the verdict of
each paper on each task, the checks; explanation.csv (one row per task and seed),
explanation.json and explanation.png (per task: τ of the three pairs, ε-max JSD against the
two initialisations' JSD, the W&P accuracies; a dot per seed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, pyplot, save_figure
from ..evidence import conclude
from .checks import PAPERS

ARMS = ("attention", "uniform", "again", "mlp-uniform", "mlp-transplanted", "mlp-attention")


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per task and seed."""
    out = []
    for task, t in result["tasks"].items():
        for s in t["seeds"]:
            row: dict[str, Any] = {"task": task, "seed": s["seed"]}
            for arm in ARMS:
                run = s["runs"][arm]
                row[f"acc_{arm}"] = round(run["test_accuracy"], 4)
                row[f"updates_{arm}"] = run["steps_run"]
                row[f"censored_{arm}"] = run["censored"]
            row |= {f"tau_{k}": round(v, 4) for k, v in s["tau"].items()}
            row |= {f"tau_untrained_{k}": round(v, 4) for k, v in s["tau_untrained"].items()}
            row |= {"adversarial_jsd": round(s["adversarial_jsd"], 4),
                    "adversary_found": round(s["adversary_found"], 4),
                    "seed_jsd": round(s["seed_jsd"], 4),
                    "max_attention": round(s["max_attention"], 4)}  # fmt: skip
            row |= {f"top_{k}": round(v, 4) for k, v in s["top_hits"].items()}
            row["top_chance"] = round(s["chance_hits"], 4)
            out.append(row)
    return out


def _ci(x: dict[str, float], scale: float = 1.0, digits: int = 3) -> str:
    f = f"{{:.{digits}f}}".format
    return f"{f(scale * x['mean'])} [{f(scale * x['lo'])}, {f(scale * x['hi'])}]"


def task_table(result: dict[str, Any]) -> str:
    tasks = list(result["tasks"])
    body = []
    for arm in ARMS:
        body.append([f"accuracy % {arm}", *(_ci(result["tasks"][t]["reported"]["accuracy"][arm],
                                                100, 1) for t in tasks)])  # fmt: skip
    for key, label in (("attn_grad", "τ(attention, gradient)"), ("attn_loo", "τ(attention, LOO)"),
                       ("grad_loo", "τ(gradient, LOO)")):  # fmt: skip
        body.append([label, *(_ci(result["tasks"][t]["reported"]["tau"][key]) for t in tasks)])
    for key, label in (("attn_grad", "untrained: τ(attention, gradient)"),
                       ("attn_loo", "untrained: τ(attention, LOO)"),
                       ("grad_loo", "untrained: τ(gradient, LOO)")):  # fmt: skip
        body.append([label, *(_ci(result["tasks"][t]["reported"]["tau_untrained"][key])
                              for t in tasks)])  # fmt: skip
    for key, label in (("adversarial_jsd", "ε-max adversarial JSD"),
                       ("seed_jsd", "JSD between two initialisations"),
                       ("adversary_found", "share of examples with an adversary within ε"),
                       ("max_attention", "largest attention weight")):  # fmt: skip
        body.append([label, *(_ci(result["tasks"][t]["reported"][key]) for t in tasks)])
    for key in ("attention", "gradient", "loo"):
        body.append([f"top token decides, {key} %",
                     *(_ci(result["tasks"][t]["reported"]["top_hits"][key], 100, 1)
                       for t in tasks)])  # fmt: skip
    body.append(["top token decides, a random pick %",
                 *(f"{100 * result['tasks'][t]['reported']['chance_hits']:.1f}" for t in tasks)])
    return markdown_table(["mean [95% interval] over seeds", *tasks], body)


def verdict_table(result: dict[str, Any]) -> str:
    body = [[task, PAPERS[p], v] for task, by in result["claims"].items() for p, v in by.items()]
    return markdown_table(["task", "paper", "verdict"], body)


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print the tables, the checks and the verdict; write the files."""
    say(task_table(result))
    say(verdict_table(result))
    return conclude("explanation", result, rows, plot, out, say, "training and measuring")


def plot(result: dict[str, Any], path: Path) -> Path:
    """Per task (a row): the three τ, the two JSD, the four W&P accuracies; a dot per seed."""
    plt = pyplot()
    tasks = list(result["tasks"])
    fig, axes = plt.subplots(len(tasks), 3, figsize=(13, 3.6 * len(tasks)), squeeze=False)
    for row, task in zip(axes, tasks, strict=True):
        seeds = result["tasks"][task]["seeds"]
        panels = [
            ("Kendall τ (attention model)", {"α, grad": [s["tau"]["attn_grad"] for s in seeds],
                                             "α, LOO": [s["tau"]["attn_loo"] for s in seeds],
                                             "grad, LOO": [s["tau"]["grad_loo"] for s in seeds]}),
            ("JSD from the learned attention", {
                "ε-max adversary": [s["adversarial_jsd"] for s in seeds],
                "other init": [s["seed_jsd"] for s in seeds]}),
            ("test accuracy", {a: [s["runs"][a]["test_accuracy"] for s in seeds]
                               for a in ("attention", "uniform", "mlp-uniform",
                                         "mlp-transplanted", "mlp-attention")}),
        ]  # fmt: skip
        for ax, (title, groups) in zip(row, panels, strict=True):
            for i, (_name, ys) in enumerate(groups.items()):
                ax.scatter([i] * len(ys), ys, s=16, color=f"C{i}")
                ax.hlines(sum(ys) / len(ys), i - 0.3, i + 0.3, color=f"C{i}")
            ax.set_xticks(range(len(groups)), list(groups), rotation=20, fontsize=8)
            ax.set_title(f"{task}: {title}", fontsize=9)
        row[1].axhline(0.6931, color="grey", lw=0.8, ls=":", label="ln 2 (the most)")
        row[1].legend(fontsize=7)
        row[2].axhline(0.5, color="grey", lw=0.8, ls=":", label="chance")
        row[2].legend(fontsize=7)
    return save_figure(fig, path)


__all__ = ["plot", "report", "rows", "task_table", "verdict_table"]
