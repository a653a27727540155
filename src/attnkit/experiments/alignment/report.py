"""The alignment experiment's outputs: per setting (ordering, D, reading) a Markdown table of
every row (the paper's AER beside ours, with its 95% interval over seeds, BLEU, the criterion,
where the argmax lands), the gaps, the checks; CSV, JSON and a PNG of AER per ordering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, save_figure, write_outputs
from ..evidence import checks_table


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One CSV row per (setting, model)."""
    out = []
    for name, st in result["settings"].items():
        for m, s in st["rows"].items():
            paper = result["rows"][m]["paper_aer"]
            out.append({
                "setting": name,
                "ordering": st["ordering"],
                "window": st["window"],
                "reversed": st["reversed"],
                "model": m,
                "paper_aer": "" if paper is None else paper,
                "aer_mean": round(s["aer_mean"], 4),
                "aer_lo": round(s["aer_ci"][0], 4),
                "aer_hi": round(s["aer_ci"][1], 4),
                "aer_by_seed": " ".join(f"{a:.3f}" for a in s["aer_by_seed"]),
                "aer_tolerant_mean": round(s["aer_tolerant_mean"], 4),
                "aer_tolerant_lo": round(s["aer_tolerant_ci"][0], 4),
                "aer_tolerant_hi": round(s["aer_tolerant_ci"][1], 4),
                "paper_row_shift": s["paper_row_shift"],
                "aer_paper_mean": round(s["aer_paper_mean"], 4),
                "aer_paper_lo": round(s["aer_paper_ci"][0], 4),
                "aer_paper_hi": round(s["aer_paper_ci"][1], 4),
                "aer_paper_by_seed": " ".join(f"{a:.3f}" for a in s["aer_paper_by_seed"]),
                "reached": sum(s["reached"]),
                "seeds": len(s["reached"]),
                "valid_bleu_min": round(min(s["valid_bleu_by_seed"]), 2),
                "test_bleu_mean": round(s["test_bleu_mean"], 2),
                "updates_mean": round(sum(s["updates_by_seed"]) / len(s["updates_by_seed"])),
                "argmax_at_gold_minus_1": round(s["offset_share"]["-1"], 4),
                "argmax_at_gold": round(s["offset_share"]["0"], 4),
                "argmax_at_gold_plus_1": round(s["offset_share"]["1"], 4),
                "parameters": s["parameters"],
                "cpu_seconds_mean": round(s["cpu_seconds_mean"], 1),
            })  # fmt: skip
    return out


def text_table(result: dict[str, Any]) -> str:
    head = ["setting", "model", "paper AER (En-De)", "AER [95% CI]",
            "shift-tolerant AER (±1 word) [95% CI]", "AER, footnote 14's rows [95% CI]",
            "reached BLEU 95", "min valid BLEU", "updates", "argmax at gold -1 / 0 / +1",
            "params"]  # fmt: skip
    body = [
        [r["setting"] + (" (claim)" if result["settings"][r["setting"]]["claim"] else ""),
         result["rows"][r["model"]]["label"],
         "—" if r["paper_aer"] == "" else f"{r['paper_aer']:.2f}",
         f"{r['aer_mean']:.3f} [{r['aer_lo']:.3f}, {r['aer_hi']:.3f}]",
         f"{r['aer_tolerant_mean']:.3f} [{r['aer_tolerant_lo']:.3f}, "
         f"{r['aer_tolerant_hi']:.3f}]",
         f"{r['aer_paper_mean']:.3f} [{r['aer_paper_lo']:.3f}, {r['aer_paper_hi']:.3f}]"
         + (" (row t+1)" if r["paper_row_shift"] else ""),
         f"{r['reached']}/{r['seeds']}", f"{r['valid_bleu_min']:.1f}", str(r["updates_mean"]),
         f"{r['argmax_at_gold_minus_1']:.0%} / {r['argmax_at_gold']:.0%} / "
         f"{r['argmax_at_gold_plus_1']:.0%}", f"{r['parameters']:,}"]
        for r in rows(result)
    ]  # fmt: skip
    return markdown_table(head, body)


def gap_table(result: dict[str, Any]) -> str:
    """AER(global-location) - AER(local) per setting and local row, 95% t-interval over paired
    seeds, under the strict and the shift-tolerant reading (both checked on the claim's
    setting), and under Luong 2015's footnote 14 (reported, never checked)."""

    def gap(g: dict[str, Any]) -> str:
        return f"{g['value']:+.3f} [{g['ci'][0]:+.3f}, {g['ci'][1]:+.3f}]"

    body = [[name, m, gap(g), gap(st["gaps_tolerant"][m]),
             "checked" if st["claim"] else "reported", gap(st["gaps_paper"][m]) + " (reported)"]
            for name, st in result["settings"].items() for m, g in st["gaps"].items()]  # fmt: skip
    return markdown_table(["setting", "local row", "AER(global-location) - AER(local) [95% CI, "
                           "seeds]", "the same, shift-tolerant AER", "",
                           "the same, footnote 14's rows"], body)  # fmt: skip


def task_table(result: dict[str, Any]) -> str:
    """Per ordering: how much it reorders, and how close local-m's centre p_t = t is to the
    gold alignment (runs of the earlier design lack the last two columns: "-")."""

    def share(t: dict[str, Any]) -> str:
        return f"{t['gold_on_diagonal']:.0%}" if "gold_on_diagonal" in t else "-"

    body = [[o, f"{t['reordered_fraction']:.0%}", f"{t['diagonal_aer']:.3f}", share(t),
             str(t.get("max_shift", "-")), f"{t['mean_src_len']:.1f}"]
            for o, t in result["tasks"].items()]  # fmt: skip
    return markdown_table(["ordering", "test sentences with crossing links",
                           "AER of the monotone diagonal guess (p_t = t)",
                           "words whose gold word is at p_t = t",
                           "largest |gold - t| (words)", "mean words"], body)  # fmt: skip


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print the tables and the verdict; write alignment.{csv,json,png}."""
    say(f"{len(result['seeds'])} seeds {result['seeds']}; AER of the argmax of the "
        f"force-decoded attention on the test set, each arm trained to greedy valid BLEU >= "
        f"{result['criterion']:g} (paper: Luong et al. 2015, Table 6, RWTH En-De)")  # fmt: skip
    say(task_table(result))
    say(text_table(result))
    say(gap_table(result))
    say(checks_table(result["checks"]))
    for comparison, verdict in result["verdicts"].items():
        say(f"{comparison}: {verdict}")
    paths = write_outputs("alignment", rows(result), result, plot, out, say)
    say(f"total {result['total_seconds']:.0f}s ({result['cpu_seconds']:.0f}s of CPU in the "
        "training processes)")  # fmt: skip
    say(f"verdict: {result['verdict']}")
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """AER per ordering, one bar per model (mean and 95% interval over seeds) at the claim's
    window and reading; the paper's Table 6 AER as markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    claim = next(st for st in result["settings"].values() if st["claim"])
    shown = {n: st for n, st in result["settings"].items()
             if st["window"] == claim["window"] and st["reversed"] == claim["reversed"]}
    models = list(result["rows"])
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.8 / len(models)
    for j, m in enumerate(models):
        xs = [i + (j - (len(models) - 1) / 2) * width for i in range(len(shown))]
        s = [st["rows"][m] for st in shown.values()]
        mean = [r["aer_mean"] for r in s]
        err = [[r["aer_mean"] - r["aer_ci"][0] for r in s], [r["aer_ci"][1] - r["aer_mean"]
                                                              for r in s]]  # fmt: skip
        ax.bar(xs, mean, width, yerr=err, capsize=3, label=result["rows"][m]["label"])
        paper = result["rows"][m]["paper_aer"]
        if paper is not None:
            ax.plot(xs, [paper] * len(xs), "k_", markersize=12, mew=2)
    ax.set_xticks(range(len(shown)), [st["ordering"] for st in shown.values()])
    ax.set_ylabel("AER (lower is better); black: the paper's (En-De)")
    ax.set_ylim(0, 1)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"D = {claim['window']}, source {'reversed' if claim['reversed'] else 'forward'}"
                 f", {len(result['seeds'])} seeds, 95% t-intervals (cf. Luong et al. 2015, "
                 "Table 6)", fontsize=9)  # fmt: skip
    return save_figure(fig, path)


__all__ = ["gap_table", "plot", "report", "rows", "task_table", "text_table"]
