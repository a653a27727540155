"""The linear experiment's outputs: the cost grid with its slopes, the time per decoded
token with its slopes, the runs (updates, plateau) and bpc by attention with the gap to
softmax (linear checked, performer reported) beside the paper's, the checks, a CSV, the JSON
and a PNG (cost against n; time per token against t; learning curves)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, plot_bpc_curves, pyplot, runs_text, save_figure
from ..evidence import conclude


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per measured point: part "cost" (kernel, n: saved MiB, median ms), part
    "decode" (attention, t: median ms per token, state elements), part "curve" (arm, seed,
    updates: valid bpc). A column not of its part is empty."""
    empty = dict.fromkeys(("x", "saved_mib", "ms_median", "state", "seed", "updates",
                           "valid_bpc"), "")  # fmt: skip
    out: list[dict[str, Any]] = []
    for kernel, by_n in result["numbers"]["cost"].items():
        out.extend({**empty, "part": "cost", "arm": kernel, "x": int(n),
                    "saved_mib": round(c["saved_bytes"] / 2**20, 3),
                    "ms_median": round(1000 * statistics.median(c["seconds"]), 3)}
                   for n, c in by_n.items())  # fmt: skip
    for attention, by_t in result["numbers"]["decode"].items():
        out.extend({**empty, "part": "decode", "arm": attention, "x": int(t),
                    "ms_median": round(1000 * statistics.median(c["seconds"]), 4),
                    "state": c["state"]} for t, c in by_t.items())  # fmt: skip
    per = result["updates_per_epoch"]
    for arm, by_seed in result["numbers"]["curves"].items():
        for seed, curve in zip(result["seeds"], by_seed, strict=True):
            out.extend({**empty, "part": "curve", "arm": arm, "seed": seed,
                        "updates": (k + 1) * per, "valid_bpc": b}
                       for k, b in enumerate(curve))  # fmt: skip
    return [{"part": r.pop("part"), "arm": r.pop("arm"), **r} for r in out]


def cost_text(result: dict[str, Any]) -> str:
    """Kernels as rows: saved MiB and median ms at each n, then the slopes."""
    cost, slopes = result["numbers"]["cost"], result["reported"]["slopes"]
    ns = list(next(iter(cost.values())))
    head = ["attention", *(f"n={n}: MiB / ms" for n in ns), "memory p", "time p [95%]"]
    body = [[k, *(f"{by_n[n]['saved_bytes'] / 2**20:.1f} / "
                  f"{1000 * statistics.median(by_n[n]['seconds']):.1f}" for n in ns),
             f"{slopes[k]['memory']:.2f}",
             "{:.2f} [{:.2f}, {:.2f}]".format(*slopes[k]["time"])]
            for k, by_n in cost.items()]  # fmt: skip
    return markdown_table(head, body)


def decode_text(result: dict[str, Any]) -> str:
    """Attentions as rows: median ms per token and state elements at each t."""
    dec = result["numbers"]["decode"]
    ts = list(next(iter(dec.values())))
    head = ["decoding", *(f"t={t}: ms / state" for t in ts)]
    body = [[a, *(f"{1000 * statistics.median(by_t[t]['seconds']):.2f} / {by_t[t]['state']:,}"
                  for t in ts)] for a, by_t in dec.items()]  # fmt: skip
    return markdown_table(head, body)


def quality_text(result: dict[str, Any]) -> str:
    """Arms as rows: per-seed test bpc, the gap to softmax [95%], and the role."""
    gaps = result["reported"]["gaps"]
    head = ["arm", "test bpc (seeds)", "bpc - softmax [95%]", "role"]
    body = []
    for arm, bpc in result["bpc"].items():
        g = gaps.get(arm, {}).get("gap")
        gap = "" if g is None else f"{g[0]:+.4f} [{g[1]:+.4f}, {g[2]:+.4f}]"
        role = "compared" if arm in ("softmax", "linear") else "reported"
        body.append([arm, " ".join(f"{x:.3f}" for x in bpc), gap, role])
    return markdown_table(head, body)



def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    rep = result["reported"]
    say(cost_text(result))
    x = rep["crossover_vs_softmax"]
    say("linear faster than softmax SDPA from n ≈ "
        + ("never, in this range" if x is None else f"{x:.0f}"))  # fmt: skip
    say(decode_text(result))
    params = ", ".join(f"{k} {v:,}" for k, v in result["parameters"].items())
    say(f"parameters: {params}; cap {result['updates_cap']} updates "
        f"({result['updates_per_epoch']} per epoch), every arm")
    say(runs_text(result))
    say(quality_text(result))
    say(f"linear - softmax, relative: {100 * rep['relative_gap']:+.1f}% (paper, Table 1 MNIST: "
        f"{rep['paper_gap']:+.3f} bits/dim, {100 * rep['paper_relative_gap']:+.1f}%)")
    return conclude("linear", result, rows, plot, out, say, "measuring and training")


def plot(result: dict[str, Any], path: Path) -> Path:
    """Forward + backward time against n (log-log), time per token against t, and the
    learning curves (valid bpc against updates, a dot at each run's lowest)."""
    plt = pyplot()
    fig, (cost, dec, curves) = plt.subplots(1, 3, figsize=(15, 4))
    for i, (kernel, by_n) in enumerate(result["numbers"]["cost"].items()):
        ns = [int(n) for n in by_n]
        cost.plot(ns, [1000 * statistics.median(by_n[str(n)]["seconds"]) for n in ns], "o-",
                  color=f"C{i}", label=kernel)  # fmt: skip
    for i, (attention, by_t) in enumerate(result["numbers"]["decode"].items()):
        ts = [int(t) for t in by_t]
        dec.plot(ts, [1000 * statistics.median(by_t[str(t)]["seconds"]) for t in ts], "o-",
                 color=f"C{i}", label=attention)  # fmt: skip
    for ax, xlabel, ylabel in ((cost, "sequence length n", "forward + backward (ms)"),
                               (dec, "decoded position t", "ms per token")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    plot_bpc_curves(curves, result)
    return save_figure(fig, path)


__all__ = ["cost_text", "decode_text", "plot", "quality_text", "report", "rows", "runs_text"]
