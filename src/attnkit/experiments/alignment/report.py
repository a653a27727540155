"""The alignment experiment's outputs: a Markdown table (the paper's AER beside ours), CSV,
JSON and a PNG of AER and BLEU per model (mean ± seed std, the paper's AER marked)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, write_outputs


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One CSV row per model: the paper's AER, ours and BLEU (mean, std), budgets."""
    return [
        {
            "model": m,
            "label": s["label"],
            "paper_aer": "" if s["paper_aer"] is None else s["paper_aer"],
            "aer_mean": round(s["aer_mean"], 4),
            "aer_std": round(s["aer_std"], 4),
            "aer_by_seed": " ".join(f"{a:.3f}" for a in s["aer_by_seed"]),
            "bleu_mean": round(s["bleu_mean"], 2),
            "bleu_std": round(s["bleu_std"], 2),
            "exact_mean": round(s["exact_mean"], 2),
            "parameters": s["parameters"],
            "updates": "/".join(map(str, s["updates"])),
            "seeds": s["seeds"],
            "seconds_mean": round(s["seconds_mean"], 1),
        }
        for m, s in result["summary"].items()
    ]


def text_table(result: dict[str, Any]) -> str:
    head = ["model", "paper AER (En-De)", "AER (toy-ko)", "AER by seed", "BLEU", "exact %",
            "parameters", "updates", "s / run"]  # fmt: skip
    body = [
        [r["label"], "—" if r["paper_aer"] == "" else f"{r['paper_aer']:.2f}",
         f"{r['aer_mean']:.3f} ± {r['aer_std']:.3f}", r["aer_by_seed"].replace(" ", " / "),
         f"{r['bleu_mean']:.1f} ± {r['bleu_std']:.1f}",
         f"{r['exact_mean']:.1f}", f"{r['parameters']:,}", r["updates"], f"{r['seconds_mean']:.0f}"]
        for r in rows(result)
    ]  # fmt: skip
    t = result["task"]
    body.append(["monotone diagonal guess", "—", f"{t['diagonal_aer']:.3f}", *[""] * 6])
    return markdown_table(head, body)


def verdict_line(result: dict[str, Any]) -> str:
    c = result["checks"]
    nums = f"{c['reordered_fraction']:.0%} of test sentences need reordering"
    if "best_local" in c:
        nums += (f"; best local {c['best_local']} AER {c['best_local_aer']:.3f} vs "
                 f"global (location) {c['global_aer']:.3f} (gap {c['aer_gap']:+.3f}, "
                 f"seed std {c['aer_margin']:.3f})")  # fmt: skip
    low = min(c["bleu_mean"].values())
    nums += f"; lowest mean BLEU {low:.1f} (floor {c['bleu_floor']:.0f})"
    return f"verdict: {result['verdict']}. {nums}"


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print the table and the verdict; write alignment.{csv,json,png}."""
    say(f"{len(result['seeds'])} seeds {result['seeds']}, {result['updates']} updates per run; "
        f"AER of the argmax of the force-decoded attention on {result['task']['sentences']} "
        "test sentences (paper: Luong et al. 2015, Table 6, RWTH En-De)")  # fmt: skip
    say(text_table(result))
    paths = write_outputs("alignment", rows(result), result, plot, out, say)
    say(f"total {result['total_seconds']:.0f}s (training and scoring)")
    say(verdict_line(result))
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """Two panels: AER (ours, mean ± std over seeds; the paper's as a marker) and BLEU."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = rows(result)
    x = list(range(len(rs)))
    labels = [r["label"].replace(" (", "\n(") for r in rs]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4.2))
    a.bar(x, [r["aer_mean"] for r in rs], yerr=[r["aer_std"] for r in rs], capsize=4,
          color="tab:blue", label="toy-ko (ours)")  # fmt: skip
    paper = [(i, r["paper_aer"]) for i, r in enumerate(rs) if r["paper_aer"] != ""]
    if paper:
        a.plot(*zip(*paper, strict=True), "r_", markersize=28, mew=3,
               label="Luong 2015, Table 6 (En-De)")  # fmt: skip
    a.axhline(result["task"]["diagonal_aer"], ls=":", c="gray", label="monotone guess")
    a.set_ylabel("AER (lower is better)")
    a.set_ylim(0, 1)
    a.legend(fontsize=8)
    b.bar(x, [r["bleu_mean"] for r in rs], yerr=[r["bleu_std"] for r in rs], capsize=4,
          color="tab:green")  # fmt: skip
    b.axhline(result["checks"]["bleu_floor"], ls=":", c="gray", label="floor")
    b.set_ylabel("greedy BLEU")
    b.set_ylim(0, 100)
    b.legend(fontsize=8)
    for ax in (a, b):
        ax.set_xticks(x, labels, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"toy-ko, {len(result['seeds'])} seeds x {result['updates']} updates "
                 "(cf. Luong et al. 2015, Table 6)", fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["plot", "report", "rows", "text_table", "verdict_line"]
