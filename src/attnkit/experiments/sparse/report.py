"""The sparse experiment's outputs: the runs (updates, plateau), bpc and bits per copied name
letter by alignment (fixed against dense checked, the others reported), the
one-layer cost by alignment and n with its slopes, the checks, a CSV (cost grid and learning
curves), the JSON and a PNG (learning curves; memory and time against n)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, plot_bpc_curves, pyplot, runs_text, save_figure
from ..evidence import conclude

CURVE = ("seed", "updates", "valid_bpc")  # the learning-curve rows' own columns


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Part "cost": one row per (arm, n) of the cost grid, with the arm's test bpc (mean of
    seeds); part "curve": one row per (arm, seed, validation), the valid bpc after
    ``updates`` updates (the learning curves). A column not of its part is empty."""
    out = []
    for arm, by_n in result["numbers"]["cost"].items():
        for n, c in by_n.items():
            out.append({"part": "cost", "arm": arm, "n": int(n),
                        "saved_mib": round(c["saved_bytes"] / 2**20, 3),
                        "ms_median": round(1000 * statistics.median(c["seconds"]), 2),
                        "bpc": (round(statistics.fmean(result["bpc"][arm]), 4)
                                if arm in result["bpc"] else ""),  # not trained: cost only
                        **dict.fromkeys(CURVE, "")})  # fmt: skip
    per = result["updates_per_epoch"]
    for arm, by_seed in result["numbers"]["curves"].items():
        for seed, curve in zip(result["seeds"], by_seed, strict=True):
            out.extend({"part": "curve", "arm": arm, "n": result["config"]["segment"],
                        "saved_mib": "", "ms_median": "", "bpc": "", "seed": seed,
                        "updates": (k + 1) * per, "valid_bpc": b}
                       for k, b in enumerate(curve))  # fmt: skip
    return out



def quality_text(result: dict[str, Any]) -> str:
    """Arms as rows: test bpc and bits per copied name letter of each seed, and the gap to
    dense (mean over seeds, 95% t-interval): checked for fixed, reported for the others."""
    head = ["arm", "test bpc (seeds)", "bits per copied name letter (seeds)",
            "bpc - dense [95%]", "role"]  # fmt: skip
    checked = {c["name"]: c for c in result["checks"]}
    body = []
    for arm, bpc in result["bpc"].items():
        if arm == "dense":
            gap, role = "", "compared"
        elif arm == "fixed":
            c = checked["fixed bpc - dense bpc"]
            gap, role = f"{c['value']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}]", "compared"
        else:
            g = result["reported"].get(arm, {}).get("gap")
            gap = "" if g is None else f"{g[0]:+.3f} [{g[1]:+.3f}, {g[2]:+.3f}]"
            role = "reported"
        body.append([arm, " ".join(f"{x:.3f}" for x in bpc),
                     " ".join(f"{x:.2f}" for x in result["name_bits"][arm]), gap, role])
    return markdown_table(head, body)


def cost_text(result: dict[str, Any]) -> str:
    """Arms as rows: saved MiB and median ms at each n, then the slopes."""
    cost = result["numbers"]["cost"]
    ns = list(next(iter(cost.values())))
    head = ["arm", "test bpc (seeds)",
            *(f"n={n}: MiB / ms" for n in ns), "memory p", "time p [95%]"]  # fmt: skip
    body = []
    for arm, by_n in cost.items():
        t = result["slopes"][arm]["time"]
        trained = result["bpc"].get(arm)  # the cost grid measures arms --arms did not train
        body.append([arm, "-" if trained is None else " ".join(f"{x:.3f}" for x in trained),
                     *(f"{by_n[n]['saved_bytes'] / 2**20:.1f} / "
                       f"{1000 * statistics.median(by_n[n]['seconds']):.0f}" for n in ns),
                     f"{result['slopes'][arm]['memory']:.2f}",
                     f"{t[0]:.2f} [{t[1]:.2f}, {t[2]:.2f}]"])  # fmt: skip
    return markdown_table(head, body)


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    params = ", ".join(f"{k} {v:,}" for k, v in result["parameters"].items())
    secs, cfg = sum(result["train_seconds"].values()), result["config"]
    say(f"parameters: {params}; stride l = {result['stride']}; early stopping after "
        f"{cfg['patience']} validations without a lower valid bpc (one per epoch of "
        f"{result['updates_per_epoch']} updates), cap {result['updates_cap']} updates, every "
        f"arm; {secs:.0f}s of training; {result['segments']} test segments per seed")
    say(runs_text(result))
    say(f"unigram bpc of the test text: {statistics.fmean(result['numbers']['unigram']):.3f}; "
        f"copied name letters per seed: {result['numbers']['copied_letters']}")
    say(quality_text(result))
    say(cost_text(result))
    return conclude("sparse", result, rows, plot, out, say, "training and measuring")


def plot(result: dict[str, Any], path: Path) -> Path:
    """The learning curves (valid bpc against updates, one line per arm and seed, a dot at
    each run's lowest), then saved MiB and median time of one attention against n
    (log-log), one line per arm."""
    plt = pyplot()

    fig, (curves, *axes) = plt.subplots(1, 3, figsize=(15, 4))
    plot_bpc_curves(curves, result)
    curves.set_title(f"early stopping, patience {result['config']['patience']} epochs", fontsize=9)
    for i, (arm, by_n) in enumerate(result["numbers"]["cost"].items()):
        ns = [int(n) for n in by_n]
        axes[0].plot(ns, [by_n[str(n)]["saved_bytes"] / 2**20 for n in ns], "o-",
                     color=f"C{i}", label=arm)  # fmt: skip
        axes[1].plot(ns, [1000 * statistics.median(by_n[str(n)]["seconds"]) for n in ns], "o-",
                     color=f"C{i}", label=arm)  # fmt: skip
    for ax, label in zip(axes, ("saved for backward (MiB)", "forward + backward (ms)"),
                         strict=True):  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    return save_figure(fig, path)


__all__ = ["cost_text", "plot", "quality_text", "report", "rows", "runs_text"]
