"""Word and sentence attention of one document, side by side (Yang 2016, Fig. 5 and 6): a bar
per sentence (its sentence weight α_i) beside the sentence's words shaded by their word weights
α_it. As terminal lines, a PNG (matplotlib) and a self-contained HTML page (no script, no
network; every token HTML-escaped). Feature-wise weights (Shen 2018) are shown as their mean
over features, which still sums to one over the words (sentences).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

import torch

from ._figure_file import save_figure
from ._html import write_html
from ._page_fonts import FONT_SRC, page_font_css

CSP = f"default-src 'none'; style-src 'unsafe-inline'; {FONT_SRC}"


@dataclass
class DocView:
    sentences: list[list[str]]
    word_weights: list[list[float]]  # per sentence, per word
    sentence_weights: list[float]
    key: int  # -1 when unknown
    label: str
    predicted: str
    title: str


def scalar_weights(w: torch.Tensor, features: bool) -> torch.Tensor:
    """Feature-wise weights (..., T, D) as their mean over features (..., T), which still sums
    to one over T; scalar weights as they are."""
    return w.mean(-1) if features else w


def hierarchy_lines(view: DocView, width: int = 20) -> list[str]:
    """One line per sentence: its weight as a bar, then its words with their weights."""
    lines = [view.title]
    for i, (words, ws, a) in enumerate(
        zip(view.sentences, view.word_weights, view.sentence_weights, strict=True)
    ):
        bar = "█" * round(a * width)
        mark = "*" if i == view.key else " "
        text = " ".join(f"{w}({x:.2f})" for w, x in zip(words, ws, strict=True))
        lines.append(f"{mark}{i:>2} {a:5.2f} {bar:<{width}} {text}")
    if view.key >= 0:
        lines.append("* key sentence (decides the label)")
    return lines


def write_png(path: str | Path, view: DocView) -> Path:
    """Sentence bars (left) beside the word heatmap (right), the key sentence's bar in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = len(view.sentences)
    t = max(len(s) for s in view.sentences)
    grid = np.full((n, t), np.nan)
    for i, ws in enumerate(view.word_weights):
        grid[i, : len(ws)] = ws
    fig, (bars, heat) = plt.subplots(
        1, 2, figsize=(2.5 + 1.0 * t, 0.6 * n + 1.4), gridspec_kw={"width_ratios": [1, 3.5]}
    )
    colours = ["tab:red" if i == view.key else "tab:blue" for i in range(n)]
    bars.barh(range(n), view.sentence_weights, color=colours)
    bars.set_xlim(1, 0)  # bars grow towards the words
    bars.set_ylim(n - 0.5, -0.5)
    bars.set_yticks(range(n), [f"s{i}" for i in range(n)])
    bars.set_xlabel("sentence attention")
    heat.imshow(grid, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    for i, words in enumerate(view.sentences):
        for j, w in enumerate(words):
            heat.text(j, i, w, ha="center", va="center", fontsize=8,
                      color="white" if grid[i, j] > 0.5 else "black")  # fmt: skip
    heat.set_xticks([])
    heat.set_yticks([])
    heat.set_xlabel("word attention")
    fig.suptitle(view.title, fontsize=9)
    fig.tight_layout()
    path = save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def page(view: DocView) -> str:
    """The page's HTML: one row per sentence, a bar and its weight, then the words shaded by
    weight (a tooltip gives each number). Static: no script runs; the glyphs of Hangul words
    are embedded (``_page_fonts``)."""
    esc = html.escape
    rows = []
    for i, (words, ws, a) in enumerate(
        zip(view.sentences, view.word_weights, view.sentence_weights, strict=True)
    ):
        cells = "".join(
            f'<span class="w" style="background:rgba(31,119,180,{x:.3f})" title="{x:.3f}">'
            f"{esc(w)}</span>"
            for w, x in zip(words, ws, strict=True)
        )
        key = ' class="key"' if i == view.key else ""
        rows.append(
            f'<tr{key}><td class="n">s{i}</td><td class="bar"><div style="width:{100 * a:.1f}%">'
            f'</div></td><td class="n">{a:.3f}</td><td>{cells}</td></tr>'
        )
    note = "<p>red row: the key sentence, which decides the label</p>" if view.key >= 0 else ""
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{esc(view.title)}</title><style>"
        f"{page_font_css([view.title, *(w for s in view.sentences for w in s)])}"
        "body{margin:1.5em}td{padding:2px 6px;vertical-align:middle}"
        ".bar{width:160px}.bar div{height:14px;background:#1f77b4;margin-left:auto}"
        "tr.key .bar div{background:#d62728}tr.key td.n{color:#d62728;font-weight:bold}"
        ".w{padding:1px 3px;margin:1px;border-radius:3px}.n{font-family:monospace}"
        f"</style></head><body><h3>{esc(view.title)}</h3>"
        "<p>sentence attention (bars) beside word attention (shading)</p>"
        f"<table>{''.join(rows)}</table>{note}</body></html>"
    )


def write_page(path: str | Path, view: DocView) -> Path:
    return write_html(path, page(view))


__all__ = ["DocView", "hierarchy_lines", "page", "scalar_weights", "write_page", "write_png"]
