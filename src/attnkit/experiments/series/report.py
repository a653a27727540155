"""The series experiment's outputs: MASE/MAE/RMSE by model and seed (compared arms first),
when each run stopped, the numbers reported beside the checks, where attention peaks by
forecast step, a CSV, the JSON, a PNG (MASE bars; mean attention weight by lag with the
period's multiples marked) and an example attention heatmap."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..base import Say, markdown_table, pyplot, reported_table, save_figure, write_output
from ..evidence import conclude

LABELS = {"attention": "attention (compared)", "none": "no attention (compared)",
          "seasonal": "seasonal-lag oracle", "naive": "seasonal naive",
          "mean": "window mean"}  # fmt: skip


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per model: each seed's MASE, then the means of MASE, MAE and RMSE, and for the
    trained models the median stopping point and how many runs the cap cut."""
    out = []
    for m, label in LABELS.items():
        s = result["scores"][m]
        ups = result["updates"].get(m)
        row: dict[str, Any] = {"model": label, "parameters": result["parameters"].get(m, 0),
                               "median_stop": result["median_stop"].get(m, ""),
                               "censored": sum(result["censored"][m]) if ups else ""}  # fmt: skip
        row |= {f"mase_seed{seed}": v for seed, v in zip(result["seeds"], s["mase"], strict=True)}
        row |= {f"{k}_mean": round(float(np.mean(s[k])), 4) for k in ("mase", "mae", "rmse")}
        out.append(row)
    return out


def text_table(result: dict[str, Any]) -> str:
    table = rows(result)
    seeds = [k for k in table[0] if k.startswith("mase_seed")]
    head = ["model", "params", *(f"MASE s{k[9:]}" for k in seeds), "MASE", "MAE", "RMSE",
            "median stop", "censored"]  # fmt: skip
    body = [[r["model"], f"{r['parameters']:,}" if r["parameters"] else "-",
             *(f"{r[k]:.3f}" for k in seeds),
             f"{r['mase_mean']:.3f}", f"{r['mae_mean']:.3f}", f"{r['rmse_mean']:.3f}",
             f"{r['median_stop']:.0f}" if r["median_stop"] != "" else "-",
             str(r["censored"]) if r["censored"] != "" else "-"]
            for r in table]  # fmt: skip
    return markdown_table(head, body)


def hits_table(result: dict[str, Any]) -> str:
    hits = result["hits_by_step"]
    return markdown_table(
        ["forecast step", *(f"t+{h}" for h in range(1, len(hits) + 1))],
        [["peak at k·period ±1", *(f"{100 * x:.0f}%" for x in hits)]],
    )



def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    secs = result["train_seconds"]
    ups = "; ".join(f"{m} {', '.join(map(str, u))}" for m, u in result["updates"].items())
    say(
        f"trained {len(secs)} models in {sum(secs.values()):.0f}s of training, stopped after "
        f"{ups} updates (cap {result['cap_updates']}); {result['test_windows']} test windows"
    )
    say(text_table(result))
    say(reported_table(result))
    say(hits_table(result))
    return conclude("series", result, rows, plot, out, say, "training and scoring",
                    extra=[lambda o: example(result, o)])  # fmt: skip


def plot(result: dict[str, Any], path: Path) -> Path:
    """Left: mean MASE per model (seeds as dots). Right: the attention model's mean weight at
    each lag, one line per period, with that period's multiples marked."""
    plt = pyplot()

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1, 2]})
    for i, m in enumerate(LABELS):
        v = result["scores"][m]["mase"]
        ax.bar(i, float(np.mean(v)), color=f"C{i}", alpha=0.6)
        ax.plot([i] * len(v), v, "k.", ms=6)
    names = [v.replace(" (", "\n(") for v in LABELS.values()]
    ax.set_xticks(range(len(LABELS)), names, fontsize=8)
    ax.set_ylabel("test MASE (lower is better)")
    ax.set_title(f"{len(result['seeds'])} seeds, early stopping", fontsize=10)
    for i, (p, w) in enumerate(result["weight_by_lag"].items()):
        lags = np.arange(1, len(w) + 1)
        bx.plot(lags, w, color=f"C{i}", label=f"period {p}")
        for k in range(int(p), len(w) + 1, int(p)):
            bx.axvline(k, color=f"C{i}", ls=":", lw=0.8)
    bx.set_xlabel("lag (steps back from the forecast time)")
    bx.set_ylabel("mean attention weight")
    bx.set_title("attention by lag; dotted: multiples of the period", fontsize=10)
    bx.legend(fontsize=8)
    return save_figure(fig, path)


def example(result: dict[str, Any], out: Path) -> Path:
    """The attention heatmap of the first test window of the first seed's attention model."""
    from ...tasks.forecast import predict
    from ...train import checkpoint
    from ...viz.forecast import show_window
    from . import SeriesConfig, csv_data

    cfg = SeriesConfig(**result["config"])
    seed = result["seeds"][0]
    if cfg.csv:
        test = csv_data(cfg, seed).splits.test
    else:
        from ...data.tasks import load_task

        test = load_task("series", seed=seed, train_size=cfg.epoch_steps * cfg.batch_size,
                         valid_size=cfg.valid_size, test_size=cfg.test_size).test  # fmt: skip
    ck = checkpoint.load(out / f"attention-s{seed}" / "best")
    forecast, weights = predict(ck.model, test[:1])
    assert weights is not None
    path = out / "series_example.png"
    with tempfile.TemporaryDirectory() as drawn:  # viz writes a file; write_output places it
        png = Path(drawn) / path.name
        show_window(test[0], forecast[0], weights[0], png=str(png),
                    title=f"series {test[0].series.id} (test window 0)")  # fmt: skip
        return write_output(path, png.read_bytes())


__all__ = ["hits_table", "plot", "report", "rows", "text_table"]
