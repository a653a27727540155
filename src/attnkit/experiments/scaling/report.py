"""The scaling experiment's outputs: four Markdown tables ((a) random q, k, (b) trained q, k,
(c) trained models, the checks), scaling.csv, scaling.json and scaling.png (entropy and
gradient against d_k, test loss by width)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, pyplot, save_figure, write_outputs
from ..evidence import checks_table
from .config import SCORES

LABEL = {"dot": "unscaled qᵀk", "scaled_dot": "scaled qᵀk/√d_k"}
COLOR = {"dot": "C3", "scaled_dot": "C0"}
STATS = ("score_std", "entropy", "entropy_frac", "max_weight", "grad_scores_mean",
         "grad_scores_median", "grad_queries_mean", "grad_queries_median")  # fmt: skip
MODEL = ("parameters", "updates", "censored", "valid_loss", "test_loss", "test_bleu",
         "test_exact")  # fmt: skip


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One CSV row per (part, d_k, model, score): part "random" (no model) or "trained" (the
    q, k of the model trained with ``model``, scored with ``score``; the model's own numbers
    on the row where score == model)."""
    out = []
    for d, by_score in result["random"].items():
        for s in SCORES:
            row = {"part": "random", "seed": "", "heads": "", "d_k": int(d), "model": "",
                   "score": s}  # fmt: skip
            out.append(row | {k: by_score[s][k] for k in STATS} | dict.fromkeys(MODEL, ""))
    for r in result["trained"]:
        for s in SCORES:
            row = {"part": "trained", "seed": r["seed"], "heads": r["heads"], "d_k": r["d_k"],
                   "model": r["score"]}  # fmt: skip
            own = {k: r.get(k, "") if s == r["score"] else "" for k in MODEL}
            out.append(row | {"score": s} | {k: r["qk"][s][k] for k in STATS} | own)
    return out


def _g(x: float) -> str:
    return f"{x:.3g}"


def tables(result: dict[str, Any]) -> str:
    """(a), (b) and (c) as Markdown tables."""
    a_head = ["d_k", "std qᵀk", "H/log Tk unscaled", "H/log Tk scaled",
              "median ‖∂L/∂s‖ unscaled", "median ‖∂L/∂s‖ scaled", "mean ‖∂L/∂s‖ unscaled",
              "mean ‖∂L/∂s‖ scaled", "median ‖∂L/∂q‖ unscaled",
              "median ‖∂L/∂q‖ scaled"]  # fmt: skip
    a = [
        [d, _g(v["dot"]["score_std"])]
        + [f"{v[s]['entropy_frac']:.3f}" for s in SCORES]
        + [_g(v[s][k]) for k in ("grad_scores_median", "grad_scores_mean") for s in SCORES]
        + [_g(v[s]["grad_queries_median"]) for s in SCORES]
        for d, v in result["random"].items()
    ]
    b_head = ["heads x d_k", "seed", "q, k of", "std qᵀk", "H/log Tk unscaled", "H/log Tk scaled",
              "median ‖∂L/∂s‖ unscaled", "median ‖∂L/∂s‖ scaled"]  # fmt: skip
    b = [
        [f"{r['heads']}x{r['d_k']}", str(r["seed"]), f"{r['score']} model",
         _g(r["qk"]["dot"]["score_std"])]
        + [f"{r['qk'][s]['entropy_frac']:.3f}" for s in SCORES]
        + [_g(r["qk"][s]["grad_scores_median"]) for s in SCORES]
        for r in result["trained"]
    ]
    c_head = ["heads x d_k", "seed", "score", "parameters", "updates", "best valid loss",
              "test loss", "test BLEU", "test exact %"]  # fmt: skip
    c = [
        [
            f"{r['heads']}x{r['d_k']}",
            str(r["seed"]),
            r["score"],
            f"{r['parameters']:,}",
            f"{r['updates']}{' (cap)' if r.get('censored') else ''}",
            f"{r['valid_loss']:.3f}",
            f"{r['test_loss']:.3f}",
            f"{r['test_bleu']:.1f}",
            f"{r['test_exact']:.1f}",
        ]  # fmt: skip
        for r in result["trained"]
    ]
    return "\n\n".join(
        [
            "(a) random q, k with N(0, 1) components (H = softmax entropy, mean over rows; "
            "the first draw)",
            markdown_table(a_head, [[str(x) for x in row] for row in a]),
            "(b) trained q, k (encoder self- and decoder cross-attention, all heads)",
            markdown_table(b_head, b),
            "(c) Transformers trained both ways (same data, batches, init, seed, stopping "
            "rule; \"(cap)\": censored, cut by the cap before its plateau)",
            markdown_table(c_head, c),
            "checks (95% intervals)",
            checks_table(result["checks"], digits=3),
        ]
    )



def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print the tables and the verdict; write scaling.{csv,json,png}."""
    say(tables(result))
    paths = write_outputs("scaling", rows(result), result, plot, out, say)
    say(f"total {result['seconds']['total']:.0f}s")
    say(f"verdict: {result['verdict']}")
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """Entropy / log Tk and median gradient against d_k (random: lines; trained q, k of the
    scaled models of the first seed: markers), and test loss by width for both scores."""
    plt = pyplot()

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    dims = [int(d) for d in result["random"]]
    first = result["config"]["seed"]
    trained = [r for r in result["trained"] if r["score"] == "scaled_dot" and r["seed"] == first]
    for ax, key, title in (
        (axes[0], "entropy_frac", "softmax entropy / log Tk"),
        (axes[1], "grad_scores_median", "median ‖∂L/∂scores‖"),
    ):
        for s, style in zip(SCORES, ("o-", "s-"), strict=True):
            ys = [result["random"][str(d)][s][key] for d in dims]
            ax.plot(dims, ys, style, color=COLOR[s], label=f"{LABEL[s]}, random q, k")
            ax.plot([r["d_k"] for r in trained], [r["qk"][s][key] for r in trained],
                    style[0] + "--", color=COLOR[s], alpha=0.5,
                    label=f"{LABEL[s]}, trained q, k (scaled models)")  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=7)
    for s, style in zip(SCORES, ("o-", "s-"), strict=True):
        rs = [r for r in result["trained"] if r["score"] == s]
        ds = sorted({r["d_k"] for r in rs})
        for r in rs:
            axes[2].plot(r["d_k"], r["test_loss"], style[0], color=COLOR[s], alpha=0.4)
        means = [sum(r["test_loss"] for r in rs if r["d_k"] == d)
                 / sum(r["d_k"] == d for r in rs) for d in ds]  # fmt: skip
        axes[2].plot(ds, means, style, color=COLOR[s], label=f"{LABEL[s]} (mean over seeds)")
    axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel("d_k (heads x d_k Transformer)")
    cfg = result["config"]
    axes[2].set_title(f"test loss, early stopping (cap {cfg['steps']}), {cfg['task']}",
                      fontsize=10)  # fmt: skip
    axes[2].grid(alpha=0.3)
    axes[2].legend(fontsize=8)
    fig.suptitle("Why √d_k (Vaswani et al. 2017, Sec. 3.2.1)", fontsize=11)
    return save_figure(fig, path, dpi=100)


__all__ = ["plot", "report", "rows", "tables"]
