"""The coref experiment's outputs: Markdown tables (per seed; per layer and head), coref.csv,
coref.json, coref.png (attention mass from "it" on the right vs the wrong noun per head, and
accuracy by model and seed), coref-famous.png (the best head's maps of "... too tired" and
"... too wide" side by side, the right noun boxed) and coref.html (the same two pronoun rows
in one matrix, and every layer and head of both sentences behind the page's switch)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, write_outputs
from . import MODELS

LABELS = {"transformer": "Transformer", "lstm": "LSTM"}
ADJECTIVES = ("tired", "wide")


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per seed, layer and head: mean mass on the right and the wrong noun, share of
    held-out sentences where the right noun gets more, and whether it is the seed's best."""
    out = []
    for r in result["seeds"]:
        m = r["mass"]
        for layer, heads in enumerate(m["right"]):
            for head in range(len(heads)):
                out.append({
                    "seed": r["seed"], "layer": layer, "head": head,
                    "right": round(m["right"][layer][head], 4),
                    "wrong": round(m["wrong"][layer][head], 4),
                    "picks_right": round(m["picks_right"][layer][head], 4),
                    "best": r["best_head"] == [layer, head],
                })  # fmt: skip
    return out


def seed_table(result: dict[str, Any]) -> str:
    head = ["seed", "Transformer acc %", "LSTM acc %", "best head", "right / wrong (held out)"]
    head += [f"'too {a}' right / wrong" for a in ADJECTIVES]
    body = []
    for c in result["checks"]["per_seed"]:
        r = next(x for x in result["seeds"] if x["seed"] == c["seed"])
        l, h = c["best_head"]
        body.append(
            [str(c["seed"]), f"{100 * c['accuracy']:.1f}", f"{100 * r['lstm']['accuracy']:.1f}",
             f"L{l}H{h}", f"{c['right']:.2f} / {c['wrong']:.2f}"]
            + [f"{fr:.2f} / {fw:.2f}" for fr, fw in zip(c["famous_right"], c["famous_wrong"],
                                                         strict=True)]
        )  # fmt: skip
    return markdown_table(head, body)


def head_table(result: dict[str, Any]) -> str:
    """Every head of the first seed's Transformer."""
    seed = result["seeds"][0]["seed"]
    body = [
        [f"L{r['layer']}H{r['head']}" + (" (best)" if r["best"] else ""), f"{r['right']:.2f}",
         f"{r['wrong']:.2f}", f"{100 * r['picks_right']:.0f}"]
        for r in rows(result) if r["seed"] == seed
    ]  # fmt: skip
    return markdown_table(["head", "mass on right noun", "on wrong noun", "right > wrong %"], body)


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print budgets, the tables and the verdict; write the files."""
    p, u, first = result["parameters"], result["updates"], result["seeds"][0]
    say(
        f"same updates: {u['steps']} Adam steps of {u['batch_size']} (lr {u['lr']}, clip "
        f"{u['clip']}), same batches; parameters: Transformer {p['transformer']:,}, LSTM "
        f"{p['lstm']:,} (hidden {result['lstm_width']}); {result['train_sentences']} training "
        f"sentences, {result['test_sentences']} held out; a coin between the two nouns "
        f"scores {100 * result['chance']:.0f}%"
    )
    say(seed_table(result))
    say(f"attention from 'it', every head of seed {first['seed']} (held-out sentences):")
    say(head_table(result))
    famous_png = lambda d: famous_figure(result, d / "coref-famous.png")  # noqa: E731
    page = lambda d: famous_page(result, d / "coref.html")  # noqa: E731
    paths = write_outputs("coref", rows(result), result, plot, out, say, (famous_png, page))
    say(f"total {result['total_seconds']:.0f}s (training and scoring)")
    say(f"verdict: {result['verdict']}")
    return paths


def plot(result: dict[str, Any], path: Path) -> Path:
    """Left: mass on the right vs the wrong noun per head (first seed); right: accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = result["seeds"][0]
    own = [r for r in rows(result) if r["seed"] == first["seed"]]
    x = list(range(len(own)))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [2, 1]})
    ax.bar([i - 0.2 for i in x], [r["right"] for r in own], 0.4, label="right noun")
    ax.bar([i + 0.2 for i in x], [r["wrong"] for r in own], 0.4, label="wrong noun")
    ax.set_xticks(x, [f"L{r['layer']}H{r['head']}" + ("*" if r["best"] else "") for r in own])
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set(ylim=(0, 1), ylabel="mean attention from 'it'",
           title=f"held-out sentences, seed {first['seed']} (* best head)")  # fmt: skip
    ax.legend()
    seeds = [r["seed"] for r in result["seeds"]]
    for k, m in enumerate(MODELS):
        accs = [100 * r[m]["accuracy"] for r in result["seeds"]]
        bx.bar([i + (k - 0.5) * 0.4 for i in range(len(seeds))], accs, 0.4, label=LABELS[m])
    bx.axhline(100 * result["chance"], color="grey", lw=0.8, ls=":", label="coin: 1 of 2 nouns")
    bx.set_xticks(range(len(seeds)), [str(s) for s in seeds])
    bx.set(ylim=(0, 102), xlabel="seed", ylabel="held-out accuracy (%)",
           title="unseen (frame, nouns, adjective)")  # fmt: skip
    bx.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _best_maps(result: dict[str, Any]) -> tuple[list[int], list[dict[str, Any]]]:
    first = result["seeds"][0]
    return first["best_head"], first["famous"]


def famous_figure(result: dict[str, Any], path: Path) -> Path:
    """The best head (first seed) on both famous sentences, drawn by ``viz.heatmap`` one at a
    time and put side by side; the pronoun's right noun is boxed."""
    import matplotlib.image as mpimg
    import numpy as np

    from ...viz.heatmap import heatmap

    (layer, head), maps = _best_maps(result)
    images = []
    with tempfile.TemporaryDirectory() as tmp:
        for adj, f in zip(ADJECTIVES, maps, strict=True):
            png = Path(tmp) / f"{adj}.png"
            heatmap(f["weights"][layer][head], f["tokens"], gold=[(f["referent"], f["pronoun"])],
                    path=png, title=f"L{layer}H{head}: '... too {adj}' (it → "
                    f"{f['tokens'][f['referent']]}: {f['right']:.2f})", dpi=100)  # fmt: skip
            images.append(mpimg.imread(png))
    h = max(im.shape[0] for im in images)
    padded = [np.pad(im, ((0, h - im.shape[0]), (0, 0), (0, 0)), constant_values=1.0)
              for im in images]  # fmt: skip
    mpimg.imsave(path, np.concatenate(padded, axis=1))
    return path


def famous_page(result: dict[str, Any], path: Path) -> Path:
    """One page (``viz.page``): the best head's pronoun rows of both sentences in one matrix
    (the right nouns outlined), then every layer and head of each sentence behind the switch."""
    import torch

    from ...viz.page import write_attention_page
    from ...viz.weights_file import AttentionRecord

    (layer, head), maps = _best_maps(result)
    rows_ = [f["weights"][layer][head][f["pronoun"]] for f in maps]  # 2 × (S,)
    keys = [a if a == b else f"{a} / {b}" for a, b in zip(*(f["tokens"] for f in maps),
                                                        strict=True)]  # fmt: skip
    more = {
        f"'... too {adj}', every head": AttentionRecord(
            torch.tensor(f["weights"]), f["tokens"], None
        )  # fmt: skip
        for adj, f in zip(ADJECTIVES, maps, strict=True)
    }
    return write_attention_page(
        path, torch.tensor(rows_), [f"it (... too {a})" for a in ADJECTIVES], keys,
        title=f"coref: head L{layer}H{head} of seed {result['seeds'][0]['seed']}",
        gold=[(f["referent"], i) for i, f in enumerate(maps)],
        name=f"best head L{layer}H{head}: 'it' in both sentences", more=more,
    )  # fmt: skip


__all__ = ["famous_figure", "famous_page", "head_table", "plot", "report", "rows",
           "seed_table"]  # fmt: skip
