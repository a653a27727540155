"""The RoPE part's outputs (``--part rope``): bpc by arm, fine-tuning budget and evaluation
length k·L, the checks, OUT/extrapolation-rope.{csv,json,png} (the PNG: bpc against the
evaluation length, one colour per scaling, one line style per budget)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, pyplot, save_figure
from ..evidence import conclude

NAME = "extrapolation-rope"
LABELS = {"linear": "PI", "ntk": "NTK-aware", "yarn": "YaRN", "none": "direct"}
"""How a scaling is named in the tables (none: plain RoPE fine-tuned at k·L, Chen 2023's
"direct fine-tuning")."""


def arms(result: dict[str, Any]) -> list[tuple[str, int, str, dict[str, list[float]]]]:
    """(arm, budget, label, {k: [seed] bpc}) for every row of the tables: plain RoPE as
    trained, the control at L, each scaling after each budget."""
    bpc, steps = result["bpc"], [str(t) for t in result["finetune"]["steps"]]
    rows = [("RoPE", 0, "RoPE, as trained", bpc["base"])]
    rows += [("control", int(t), f"control at L, +{t}", {"1": bpc["continued"][t]})
             for t in steps[1:]]  # fmt: skip
    for m, by_k in bpc["scaled"].items():
        rows += [(LABELS.get(m, m), int(t), f"{LABELS.get(m, m)}, +{t}",
                  {k: by_t[t] for k, by_t in by_k.items()}) for t in steps]  # fmt: skip
    return rows


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One CSV row per (arm, fine-tune updates, k): the mean bpc over seeds and each seed's."""
    length = result["config"]["segment"]
    return [{"arm": arm, "finetune_updates": t, "k": int(k), "length": int(k) * length,
             "bpc": round(statistics.fmean(v), 4), "each": " ".join(f"{x:.4f}" for x in v)}
            for arm, t, _, by_k in arms(result) for k, v in by_k.items()]  # fmt: skip


def bpc_text(result: dict[str, Any]) -> str:
    """Arms (after each budget) as rows, evaluation lengths as columns: the mean test bpc over
    seeds ("" where an arm is not read at that length)."""
    length = result["config"]["segment"]
    ks = list(result["bpc"]["base"])
    body = [[label, *(f"{statistics.fmean(by_k[k]):.3f}" if k in by_k else "" for k in ks)]
            for _, _, label, by_k in arms(result)]  # fmt: skip
    head = ["test bpc (mean of seeds), + fine-tune updates", *(f"{k}L = {int(k) * length}"
                                                                for k in ks)]  # fmt: skip
    return markdown_table(head, body)


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    ft = result["finetune"]
    secs = sum(result["train_seconds"].values()) + sum(result["finetune_seconds"].values())
    say(f"parameters {result['parameters']:,}; {result['updates']} training updates at L, "
        f"fine-tunes of {ft['steps'][-1]} updates of {ft['characters_per_update']} characters "
        f"(read after {', '.join(str(t) for t in ft['steps'])}); {secs:.0f}s of training; "
        f"{result['blocks']} test blocks per seed")  # fmt: skip
    say(f"unigram bpc of the test text: {statistics.fmean(result['numbers']['unigram']):.3f}")
    say(bpc_text(result))
    return conclude(NAME, result, rows, plot, out, say, "training, fine-tuning and measuring")


def plot(result: dict[str, Any], path: Path) -> Path:
    """Test bpc against the evaluation length k·L (log2 axis): plain RoPE as trained (black),
    each scaling before the fine-tune (dotted), after the small budget (dashed) and the full
    one (solid); the control at L after the full budget as a cross; the training length
    dotted."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    length, steps = result["config"]["segment"], result["finetune"]["steps"]
    bpc = result["bpc"]
    ks = [int(k) for k in bpc["base"]]
    ax.plot([k * length for k in ks], [statistics.fmean(bpc["base"][str(k)]) for k in ks],
            "o-", color="black", label="RoPE, as trained")  # fmt: skip
    styles = [":", "--", "-"]
    for i, (m, by_k) in enumerate(bpc["scaled"].items()):
        ksm = [int(k) for k in by_k]
        for t, style in zip(steps, styles, strict=True):
            ax.plot([k * length for k in ksm], [statistics.fmean(by_k[str(k)][str(t)])
                                                for k in ksm], style, marker=".",
                    color=f"C{i}", label=f"{LABELS.get(m, m)} +{t}")  # fmt: skip
    control = statistics.fmean(bpc["continued"][str(steps[-1])])
    ax.plot([length], [control], "x", color="gray", ms=9, label=f"control at L +{steps[-1]}")
    ax.axvline(length, color="gray", ls=":", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(f"evaluation length (characters; trained at L = {length}, dotted)")
    ax.set_ylabel("test bits per character (log)")
    ax.legend(fontsize=7, ncol=2)
    return save_figure(fig, path)


__all__ = ["LABELS", "NAME", "arms", "bpc_text", "plot", "report", "rows"]
