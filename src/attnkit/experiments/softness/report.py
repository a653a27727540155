"""The softness experiment's outputs: a Markdown table per task (Deng 2018 / Xu 2015 Table 1
style), the reduction's cost, CSV, JSON and a PNG of quality, perplexity and entropy per row."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, pyplot, save_figure, write_outputs


def _num(x: Any, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One CSV row per task and row: every measure's mean and seed std, and the budgets."""
    out = []
    for task, summary in result["summary"].items():
        for row, s in summary.items():
            out.append({"task": task, "row": row, "metric": result["metrics"][task],
                        **{k: s[k] for k in s if k not in ("updates",)},
                        "updates": "/".join(map(str, s["updates"]))})  # fmt: skip
    return out


def _ms(x: Any, fmt: str) -> str:
    return _num(None if x is None else 1e3 * x, fmt)


def text_table(result: dict[str, Any], task: str) -> str:
    """The task's table; a column no row has a number for (AER on captions, attention on the
    named digit on toy-ko, BLEU twice) is left out."""
    metric = result["metrics"][task]
    summary = result["summary"][task]
    cols: list[tuple[str, str, Any]] = [
        ("row", "", None),
        (metric, "quality", lambda s: f"{_num(s['quality'], '.1f')} ± "
                                      f"{_num(s['quality_std'], '.1f')}"),
        ("exact %", "exact", lambda s: _num(s["exact"], ".1f")),
        ("valid exact %", "valid_exact", lambda s: _num(s.get("valid_exact"), ".1f")),
        ("BLEU", "bleu", lambda s: _num(s.get("bleu"), ".1f")),
        ("PPL", "ppl", lambda s: "—" if s["ppl"] is None else
                                 f"{_num(s['ppl'], '.3f')} ± {_num(s['ppl_std'], '.3f')}"),
        ("PPL bound (q)", "ppl_bound", lambda s: _num(s["ppl_bound"], ".3f")),
        ("entropy", "entropy", lambda s: f"{_num(s['entropy'], '.3f')} ± "
                                         f"{_num(s['entropy_std'], '.3f')}"),
        ("AER", "aer", lambda s: _num(s["aer"], ".3f")),
        ("α on named digit", "in_cell", lambda s: _num(s.get("in_cell"), ".3f")),
        ("ms / update", "step_seconds", lambda s: _ms(s["step_seconds"], ".1f")),
        ("ms / sentence", "decode_seconds", lambda s: _ms(s["decode_seconds"], ".2f")),
        ("grad rel. var", "grad_variance", lambda s: _num(s["grad_variance"], ".3g")),
        ("parameters", "", lambda s: f"{s['parameters']:,}"),
        ("updates", "", lambda s: "/".join(map(str, s["updates"]))),
    ]  # fmt: skip
    twice = {"BLEU": "bleu", "exact %": "exact"}.get(metric)  # the metric's column is there
    keep = [(h, k, f) for h, k, f in cols
            if k != twice and not (h != metric and k and k not in ("ppl_bound", "grad_variance")
                                   and all(s.get(k) is None for s in summary.values()))]
    body = [[row] + [f(s) for _, _, f in keep[1:]] for row, s in summary.items()]
    return markdown_table([h for h, _, _ in keep], body)


def cost_lines(result: dict[str, Any]) -> list[str]:
    """What hard attention's reduction saves and what the scores still cost, measured."""
    c = result["reduction_cost"]
    s, f = c["seconds"], c["flops"]
    return [
        f"one decoder step, B={c['batch']} S={c['keys']} D={c['dim']} A={c['width']}: scores "
        f"{f['scores']:,} FLOPs ({1e6 * s['scores']:.0f} µs, every softness); soft reduction "
        f"{f['soft']:,} FLOPs, {c['values_read']['soft']:,} value vectors read "
        f"({1e6 * s['soft_reduce']:.0f} µs); hard reduction by gather 0 FLOPs, "
        f"{c['values_read']['hard']:,} vectors ({1e6 * s['hard_gather']:.0f} µs); hard as "
        f"one_hot @ V (attnkit.mechanisms.hard.SampleReduce) {1e6 * s['hard_one_hot']:.0f} µs",
    ]


def verdict_line(result: dict[str, Any]) -> str:
    return f"verdict: {result['verdict']}"


def _ci(g: dict[str, Any], fmt: str) -> str:
    if g["mean"] is None:
        return "—"
    ci = "" if g["ci"] is None else f" [{g['ci'][0]:{fmt}}, {g['ci'][1]:{fmt}}]"
    return f"{g['mean']:{fmt}}{ci}"


def check_lines(result: dict[str, Any]) -> list[str]:
    """The contract's checks (each with its interval and outcome) and what is reported beside
    them: the entropy order, and each row's paired gaps to soft in BLEU and perplexity."""
    lines = [f"check ({c['kind']}, {c['outcome']}): {c['reason']}" for c in result["checks"]]
    for task, rep in result.get("reported", {}).items():
        lines.append(f"{task}: entropy order (reported, not checked), sharpest first: "
                     + " < ".join(rep["entropy_order"]))  # fmt: skip
        for key, label, fmt in (("ppl_gaps_vs_soft", "PPL", ".4f"),
                                ("bleu_gaps_vs_soft", "BLEU", ".2f")):  # fmt: skip
            gaps = rep[key]
            lines.append(f"{task}: {label} − soft's, per-seed paired, mean [95% t interval]: "
                         + "; ".join(f"{r} {_ci(g, fmt)}" for r, g in gaps.items()))  # fmt: skip
    return lines


def curves(result: dict[str, Any], task: str = "digit-captions") -> dict[str, list[float]]:
    """row -> the validation exact match (%) after each epoch, the mean over seeds (the runs'
    ``curve``); empty when the task has no curves."""
    per: dict[str, list[list[float]]] = {}
    for r in result["runs"]:
        if r["task"] == task and r.get("curve"):
            per.setdefault(r["row"], []).append(r["curve"])
    return {row: [sum(c[i] for c in cs) / len(cs) for i in range(min(map(len, cs)))]
            for row, cs in per.items()}  # fmt: skip


def curve_lines(
    result: dict[str, Any], task: str = "digit-captions", points: int = 10
) -> list[str]:
    """The learning curves as a table: mean valid exact match per row at ``points`` epochs."""
    mean = curves(result, task)
    if not mean:
        return []
    epochs = min(map(len, mean.values()))
    per_epoch = result["task_updates"][task] // max(result["config"]["caption_epochs"], 1)
    at = sorted({max(1, round(epochs * (i + 1) / points)) for i in range(min(points, epochs))})
    table = markdown_table(["row"] + [f"{e * per_epoch}" for e in at],
                           [[row] + [f"{c[e - 1]:.1f}" for e in at] for row, c in mean.items()])
    return [f"{task}: valid exact match (%, mean over seeds) after this many updates:", table]


def cnn_lines(result: dict[str, Any]) -> list[str]:
    c = result.get("caption_cnn")
    if not c:
        return []
    ceiling = ("" if c.get("valid_canvas_accuracy") is None else
               f"; canvases with every patch right (the features' ceiling of exact match) "
               f"train {100 * c['train_canvas_accuracy']:.2f}%, valid "
               f"{100 * c['valid_canvas_accuracy']:.2f}%")  # fmt: skip
    return [f"digit-captions: the frozen CNN, trained once as a patch digit classifier "
            f"({c['updates']} updates): patch accuracy train {c['train_accuracy']:.4f}, "
            f"valid {c['valid_accuracy']:.4f}{ceiling}"]  # fmt: skip


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print a table per task, the reduction's cost and the verdict; write
    softness.{csv,json,png}."""
    say(f"seeds per task {result.get('task_seeds', result['seeds'])}; toy-ko PPL exact (the "
        "marginal over the alignment for exact, hard, gumbel, variational); digit-captions "
        "PPL exact for soft, mean, variational, none for hard and gumbel (not enumerable, "
        "captions.py); valid exact = the last epoch's; entropy in nats of the force-decoded "
        "attention (the prior p); α on named digit = attention mass on the digit's cell when it"
        " was named right; grad rel. var = Σ Var / Σ mean² of the attention parameters' "
        "gradient over draws on one batch")  # fmt: skip
    updates = result.get("task_updates", {})
    for task in result["summary"]:
        say(f"\n{task} ({updates.get(task, result['updates'])} updates per run):")
        say(text_table(result, task))
    for line in cnn_lines(result) + curve_lines(result) + cost_lines(result) + check_lines(result):
        say(line)
    paths = write_outputs("softness", rows(result), result, plot, out, say)
    say(f"total {result['total_seconds']:.0f}s (training and scoring)")
    say(verdict_line(result))
    return paths


def _epochs(result: dict[str, Any], task: str) -> int:
    """The cap of epochs of ``task``'s runs, from the config (older results: captions')."""
    c = result["config"]
    key = {"digit-captions": "caption_epochs", "multi30k": "multi30k_epochs"}.get(task, "epochs")
    return int(c.get(key, c["caption_epochs"]))


def plot(result: dict[str, Any], path: Path) -> Path:
    """Per task row, four panels: quality, perplexity and entropy (mean ± seed std), and the
    learning curves (captions: valid exact match; translation: valid perplexity, exact, after
    each epoch), one line a seed."""
    plt = pyplot()

    tasks = list(result["summary"])
    fig, axes = plt.subplots(len(tasks), 4, figsize=(17, 3.6 * len(tasks)), squeeze=False)
    for i, task in enumerate(tasks):
        ax = axes[i][3]
        per_epoch = result["task_updates"][task] // max(_epochs(result, task), 1)
        key, ylabel = (("curve", "valid exact match %") if task == "digit-captions" else
                       ("valid_curve", "valid perplexity (exact)"))  # fmt: skip
        runs = [r for r in result["runs"] if r["task"] == task and r.get(key)]
        if not runs:
            ax.axis("off")
        colours = {row: f"C{k}" for k, row in enumerate(result["summary"][task])}
        for r in runs:
            ys = r[key] if key == "curve" else [math.exp(v) for v in r[key]]
            xs = [per_epoch * (e + 1) for e in range(len(ys))]
            ax.plot(xs, ys, color=colours[r["row"]], alpha=0.6, lw=1,
                    label=r["row"] if r["seed"] == min(x["seed"] for x in runs) else None)
        if runs:
            ax.set(title=f"{task}: learning curves (each seed)", xlabel="updates",
                   ylabel=ylabel)  # fmt: skip
            if key == "curve":
                ax.set_ylim(0, 100)
            ax.legend(fontsize=7)
        summary = result["summary"][task]
        names = list(summary)
        for j, (key, label) in enumerate(
            (("quality", result["metrics"][task]), ("ppl", "test perplexity (exact)"),
             ("entropy", "attention entropy (nats)"))  # fmt: skip
        ):
            ax = axes[i][j]
            vals = [summary[n][key] or 0.0 for n in names]  # 0 = none (hard's caption PPL)
            errs = [summary[n][f"{key}_std"] or 0.0 for n in names]
            ax.bar(range(len(names)), vals, yerr=errs, color="tab:blue", capsize=3)
            ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
            ax.set_title(f"{task}: {label}")
    seeds = result.get("task_seeds", {t: result["seeds"] for t in tasks})
    title = "softness (" + "; ".join(
        f"{t}: {result['task_updates'][t]} updates, {len(seeds[t])} seeds" for t in tasks
    ) + f"): {result['verdict'][:90]}"
    fig.suptitle(title, fontsize=9)
    return save_figure(fig, path)


__all__ = ["check_lines", "cnn_lines", "cost_lines", "curve_lines", "curves", "plot", "report",
           "rows", "text_table", "verdict_line"]
