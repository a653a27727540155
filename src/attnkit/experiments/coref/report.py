"""The coref experiment's outputs: Markdown tables (per seed; every head of the first seed),
the checks, coref.csv (one row per seed, layer and head), coref.json, coref.png (every head's
test follows rate per seed, the chosen head and the untrained control marked; the pronoun
accuracy per seed, whole and with the chosen head or another head of its layer zeroed),
coref-famous.png (the first seed's chosen head on "... too tired" and "... too wide", side by
side, the right noun boxed) and coref.html (both pronoun rows in one matrix, and every head of
both sentences behind the page's switch). The famous two are figures, not the verdict."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..base import Say, markdown_table, pyplot, save_figure
from ..evidence import conclude
from .measure import margins

ADJECTIVES = ("tired", "wide")


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per seed, layer and head: the test margin (follows − anti-follows), follows
    and flips rates, mean mass on the right and the wrong noun, the validation margin and
    follows rate, the test pronoun accuracy with the head zeroed, and whether it is the
    chosen head."""
    out = []
    for r in result["seeds"]:
        t, v = r["heads"], r["valid_heads"]
        tm, vm = margins(t), margins(v)  # (L, H) each
        for layer, heads in enumerate(t["follows"]):
            for head in range(len(heads)):
                out.append({
                    "seed": r["seed"], "layer": layer, "head": head,
                    "margin": round(float(tm[layer, head]), 4),
                    "follows": round(t["follows"][layer][head], 4),
                    "flips": round(t["flips"][layer][head], 4),
                    "right": round(t["right"][layer][head], 4),
                    "wrong": round(t["wrong"][layer][head], 4),
                    "valid_margin": round(float(vm[layer, head]), 4),
                    "valid_follows": round(v["follows"][layer][head], 4),
                    "accuracy_zeroed": round(r["zeroed"][layer][head], 4),
                    "chosen": r["chosen"]["head"] == [layer, head],
                })  # fmt: skip
    return out


def _top(f: dict[str, Any]) -> str:
    """The chosen head's top noun on one famous sentence."""
    return f["tokens"][f["referent"] if f["right"] > f["wrong"] else f["other"]]


def seed_table(result: dict[str, Any]) -> str:
    head = ["seed", "updates (best)", "pronoun acc % (genders differ)", "pronoun acc % (all)",
            "chosen head", "margin: valid / test", "follows / flips test %",
            "acc %: chosen head zeroed / another of its layer", "control: margin / acc %",
            "famous: top noun phrase (tired / wide)"]  # fmt: skip
    body = []
    for r in result["seeds"]:
        c, sc, a, t = r["chosen"], r["scores"], r["ablation"], r["training"]
        (l, h) = c["head"]
        body.append([
            str(r["seed"]), f"{t['stop']} ({t['best']})" + (" censored" if t["censored"] else ""),
            f"{100 * sc['pronoun_differ']:.1f}", f"{100 * sc['pronoun']:.1f}", f"L{l}H{h}",
            f"{c['valid']:+.3f} / {c['margin']:+.3f}",
            f"{100 * c['follows']:.1f} / {100 * c['flips']:.1f}",
            f"{100 * a['zeroed']:.1f} / {100 * a['others_zeroed']:.1f}",
            f"{r['control']['margin']:+.3f} / "
            f"{100 * r['control']['scores']['pronoun_differ']:.1f}",
            " / ".join(_top(f) for f in r["famous"]),
        ])  # fmt: skip
    return markdown_table(head, body)


def head_table(result: dict[str, Any]) -> str:
    """Every head of the first seed, on the test pairs."""
    seed = result["seeds"][0]["seed"]
    body = [
        [f"L{r['layer']}H{r['head']}" + (" (chosen)" if r["chosen"] else ""),
         f"{r['valid_margin']:+.3f}", f"{r['margin']:+.3f}", f"{100 * r['follows']:.1f}",
         f"{100 * r['flips']:.1f}", f"{r['right']:.2f}", f"{r['wrong']:.2f}",
         f"{100 * r['accuracy_zeroed']:.1f}"]
        for r in rows(result) if r["seed"] == seed
    ]  # fmt: skip
    return markdown_table(["head", "margin valid", "margin test", "follows test %", "flips test %",
                           "mass on referent", "on other noun", "acc % zeroed"],
                          body)  # fmt: skip


def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
    """Print budgets, the tables, the checks and the verdict; write the files."""
    u, s, th = result["updates"], result["sentences"], result["thresholds"]
    say(
        f"Adam updates of {u['batch_size']} (lr {u['lr']}, clip {u['clip']}) to a validation "
        f"plateau (every {u['eval_every']} updates, patience {u['patience']} "
        f"validations without a loss lower by > {u.get('min_delta', 0)}, cap {u['cap']}); "
        f"{result['parameters']:,} parameters; {s['train']} training sentences, "
        f"{s['valid_pairs']} validation and {s['test_pairs']} test minimal pairs; a head whose "
        f"choice ignores the referent has margin 0 (a coin per sentence follows "
        f"{100 * th['coin_follows']:.0f}% of pairs and flips {100 * th['coin_flips']:.0f}%); "
        f"il / elle by chance {100 * th['pronoun_chance']:.0f}%"
    )
    say(seed_table(result))
    say(f"every head of seed {result['seeds'][0]['seed']} (test pairs):")
    say(head_table(result))
    famous_png = lambda d: famous_figure(result, d / "coref-famous.png")  # noqa: E731
    page = lambda d: famous_page(result, d / "coref.html")  # noqa: E731
    return conclude("coref", result, rows, plot, out, say, "training and scoring",
                    (famous_png, page))  # fmt: skip


def plot(result: dict[str, Any], path: Path) -> Path:
    """Left: every head's test margin per seed (the chosen head and the untrained
    control marked); right: test pronoun accuracy per seed, whole and with the chosen head or
    another head of its layer zeroed."""
    plt = pyplot()

    th = result["thresholds"]
    seeds = result["seeds"]
    x = range(len(seeds))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    for i, r in enumerate(seeds):
        h = r["heads"]
        rates = margins(h).flatten().tolist()
        ax.scatter([i] * len(rates), rates, s=14, color="grey", alpha=0.6,
                   label="heads" if i == 0 else None)  # fmt: skip
        ax.scatter([i], [r["chosen"]["margin"]], marker="*", s=120, color="C0",
                   label="chosen on valid pairs" if i == 0 else None)  # fmt: skip
        ax.scatter([i], [r["control"]["margin"]], marker="x", color="C3",
                   label="untrained control" if i == 0 else None)  # fmt: skip
    ax.axhline(0, color="grey", lw=0.8, ls=":", label="ignores the referent")
    ax.set_xticks(x, [str(r["seed"]) for r in seeds])
    ax.set(ylim=(-1.02, 1.02), xlabel="seed", ylabel="follows − anti-follows (test pairs)",
           title="top noun from 'it': referent in both sentences − other noun in both")
    ax.legend(fontsize=8)
    arms = (("trained", lambda r: r["scores"]["pronoun_differ"]),
            ("chosen head zeroed", lambda r: r["ablation"]["zeroed"]),
            ("another head zeroed", lambda r: r["ablation"]["others_zeroed"]))  # fmt: skip
    for k, (name, get) in enumerate(arms):
        bx.bar([i + (k - 1) * 0.27 for i in x], [100 * get(r) for r in seeds], 0.27,
               color=f"C{k + 1}", label=name)  # fmt: skip
    bx.axhline(100 * th["pronoun_chance"], color="grey", lw=0.8, ls=":", label="chance")
    bx.set_xticks(x, [str(r["seed"]) for r in seeds])
    bx.set(ylim=(0, 102), xlabel="seed", ylabel="il / elle right (%)",
           title="test, nouns of different gender")  # fmt: skip
    bx.legend(fontsize=8, loc="lower right")
    return save_figure(fig, path)


def _chosen_maps(result: dict[str, Any]) -> tuple[list[int], list[dict[str, Any]]]:
    first = result["seeds"][0]
    return first["chosen"]["head"], first["famous"]


def famous_figure(result: dict[str, Any], path: Path) -> Path:
    """The chosen encoder head (first seed) on both famous sentences, drawn by
    ``viz.heatmap`` one at a time and put side by side; the pronoun's right noun is boxed."""
    import matplotlib.image as mpimg
    import numpy as np

    from ...viz.heatmap import heatmap

    (layer, head), maps = _chosen_maps(result)
    images = []
    with tempfile.TemporaryDirectory() as tmp:
        for adj, f in zip(ADJECTIVES, maps, strict=True):
            png = Path(tmp) / f"{adj}.png"
            heatmap(f["weights"][layer][head], f["tokens"], gold=[(f["referent"], f["pronoun"])],
                    path=png, title=f"L{layer}H{head}: '... too {adj}' (it → "
                    f"{f['tokens'][f['referent']]}: {f['right_noun']:.2f})", dpi=100)  # fmt: skip
            images.append(mpimg.imread(png))
    h = max(im.shape[0] for im in images)
    padded = [np.pad(im, ((0, h - im.shape[0]), (0, 0), (0, 0)), constant_values=1.0)
              for im in images]  # fmt: skip
    mpimg.imsave(path, np.concatenate(padded, axis=1))
    return path


def famous_page(result: dict[str, Any], path: Path) -> Path:
    """One page (``viz.page``): the chosen head's pronoun rows of both sentences in one matrix
    (the right nouns outlined), then every head of each sentence behind the switch."""
    import torch

    from ...viz.page import write_attention_page
    from ...viz.weights_file import AttentionRecord

    (layer, head), maps = _chosen_maps(result)
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
        name=f"chosen head L{layer}H{head}: 'it' in both sentences", more=more,
    )  # fmt: skip


__all__ = ["famous_figure", "famous_page", "head_table", "plot", "report", "rows",
           "seed_table"]  # fmt: skip
