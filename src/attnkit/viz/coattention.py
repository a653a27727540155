"""Both maps of a co-attention model on one question about one canvas: the weights over the
image patches (upsampled onto the canvas) and over the question words (bars).

    maps = attnkit.tasks.qa.coattention_maps(model, example, src_vocab, tgt_vocab)
    coattention_figure(maps, path="qa.png")        # a PNG (or SVG/PDF by suffix)
    write_coattention_page("qa.html", maps)        # ONE self-contained HTML file

Legend: T question words, h × w patch grid, H × W canvas pixels.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ._figure_file import save_figure
from ._html import write_html
from ._page_fonts import FONT_SRC, page_font_css
from .fonts import font_rc

CSP = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; {FONT_SRC}"


@dataclass
class CoAttentionMaps:
    """One example seen by a model: canvas pixels (H, W), question words, weights over the
    words (T,) (None for stacked attention, which reads the question as one vector) and over
    the patches (h, w), the first alternating step's question summary weights (T,) or None,
    the model's answer, the true answer and the template; for stacked attention every hop's
    weights over the patches (K, h, w), the last hop's being ``image_weights``."""

    canvas: np.ndarray
    words: list[str]
    question_weights: np.ndarray | None
    image_weights: np.ndarray
    summary_weights: np.ndarray | None
    predicted: str
    answer: str
    template: str
    variant: str
    hop_weights: np.ndarray | None = None

    @property
    def image_maps(self) -> list[tuple[str, np.ndarray]]:
        """(title, weights (h, w)) of each map over the image: one, or one per hop."""
        if self.hop_weights is None:
            return [("attention over the image patches", self.image_weights)]
        return [(f"hop {k + 1} over the image patches", w) for k, w in enumerate(self.hop_weights)]


def upsample(weights: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Patch weights (h, w) spread over the pixels (H, W) each patch covers (H, W multiples
    of h, w): every pixel of patch (i, j) gets weights[i, j]."""
    (h, w), (big_h, big_w) = weights.shape, shape
    if big_h % h or big_w % w:
        raise ValueError(f"a {big_h}x{big_w} canvas is not a whole number of {h}x{w} patches")
    return np.kron(weights, np.ones((big_h // h, big_w // w)))  # (H, W)


def coattention_figure(
    maps: CoAttentionMaps, path: str | Path | None = None, title: str | None = None
) -> Figure:
    """The canvas with the image weights over it (left) and the word weights as bars (right);
    for stacked attention, which has no word weights, one canvas per hop."""
    images = maps.image_maps
    bars = maps.question_weights is not None
    with matplotlib.rc_context(font_rc()):
        fig = Figure(figsize=(8.5, 3.6), dpi=150, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, 2, width_ratios=(1, 1.4)) if bars else fig.subplots(1, len(images))
        for ax, (name, weights) in zip(np.atleast_1d(axes), images, strict=False):
            heat = upsample(weights, maps.canvas.shape)  # (H, W)
            ax.imshow(maps.canvas, cmap="gray_r", vmin=0, vmax=1)
            shown = ax.imshow(heat, cmap="Reds", alpha=0.55, vmin=0, vmax=max(heat.max(), 1e-12))
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(name, fontsize=9)
            fig.colorbar(shown, ax=ax, shrink=0.8, label="weight")
        if maps.question_weights is not None:  # stacked attention has no word bars
            _word_bars(np.atleast_1d(axes)[-1], maps, maps.question_weights)
        mark = "right" if maps.predicted == maps.answer else "wrong"
        fig.suptitle(
            title or f"{maps.variant}: {' '.join(maps.words)}?  model: {maps.predicted}  "
            f"(answer {maps.answer}, {mark})",
            fontsize=10,
        )
        if path is not None:
            save_figure(fig, path)
    return fig


def _word_bars(ax: Any, maps: CoAttentionMaps, weights: np.ndarray) -> None:
    """The weights over the words (T,) as bars, beside the summary step's when there is one."""
    x = np.arange(len(maps.words))
    if maps.summary_weights is not None:
        ax.bar(x - 0.2, maps.summary_weights, 0.4, color="#bbbbbb", label="summary (step 1)")
        ax.bar(x + 0.2, weights, 0.4, color="#c0392b", label="final (step 3)")
        ax.legend(fontsize=7)
    else:
        ax.bar(x, weights, 0.6, color="#c0392b")
    ax.set_xticks(x, maps.words, rotation=40, ha="right", rotation_mode="anchor")
    ax.set_ylim(0, 1)
    ax.set_title("attention over the question words", fontsize=9)


def _shade(weight: float, top: float) -> str:
    alpha = 0.0 if top <= 0 else weight / top
    return f"background: rgba(192, 57, 43, {alpha:.3f})"


def coattention_page(maps: CoAttentionMaps, title: str | None = None) -> str:
    """A self-contained HTML page (no script, no network): the figure as an inline PNG, the
    words shaded by weight and the patch weights as a grid, each with its number; the glyphs
    of Hangul words embedded (``_page_fonts``)."""
    buf = io.BytesIO()
    coattention_figure(maps, title=title).savefig(buf, format="png")
    png = base64.b64encode(buf.getvalue()).decode("ascii")
    if maps.question_weights is None:
        words = (" ".join(f'<span class="w">{html.escape(t)}</span>' for t in maps.words)
                 + "<br>(no weights over the words: the question is read as one vector, its "
                 "LSTM's last states)")  # fmt: skip
    else:
        top_q = float(maps.question_weights.max())
        words = " ".join(
            f'<span class="w" style="{_shade(float(a), top_q)}" title="{a:.3f}">{html.escape(t)}'
            f"<small>{a:.2f}</small></span>"
            for t, a in zip(maps.words, maps.question_weights, strict=True)
        )
    tables = "".join(
        (f"<h3>{html.escape(name)}</h3>" if maps.hop_weights is not None else "")
        + "<table>" + "".join(
            "<tr>" + "".join(f'<td style="{_shade(float(a), float(weights.max()))}">{a:.3f}</td>'
                             for a in row) + "</tr>"
            for row in weights
        ) + "</table>"
        for name, weights in maps.image_maps
    )  # fmt: skip
    head = html.escape(title or f"{maps.variant} co-attention: {' '.join(maps.words)}?")
    verdict = html.escape(f"model: {maps.predicted}   answer: {maps.answer}   "
                          f"template: {maps.template}")  # fmt: skip
    return (
        f'<!doctype html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><title>{head}</title>'
        f"<style>{page_font_css([head, verdict, *maps.words])}"
        "body{margin:1.5em}.w{display:inline-block;padding:.3em;"
        "margin:.1em;border:1px solid #ccc}.w small{display:block;font-size:.7em;color:#333}"
        "td{width:3.2em;text-align:center;font-size:.75em;border:1px solid #ddd}</style>"
        f"</head><body><h1>{head}</h1><p>{verdict}</p>"
        f'<img alt="co-attention maps" src="data:image/png;base64,{png}" style="max-width:100%">'
        f"<h2>question words</h2><p>{words}</p>"
        f"<h2>image patches ({maps.image_weights.shape[0]} x {maps.image_weights.shape[1]}, "
        f"row by row)</h2>{tables}</body></html>"
    )


def write_coattention_page(
    path: str | Path, maps: CoAttentionMaps, title: str | None = None
) -> Path:
    """Write ``coattention_page`` to ``path``."""
    return write_html(path, coattention_page(maps, title))


def show_maps(maps: CoAttentionMaps, index: int, out: str | None, png: str | None) -> list[str]:
    """``attnkit view --checkpoint DIR --example N``: the question and answers as lines; the
    page (``out``) and the figure (``png``) written."""
    lines = [
        f"example {index} ({maps.template}): {' '.join(maps.words)}?",
        f"  model: {maps.predicted}   answer: {maps.answer}",
        "  question weights: " + (
            "none (the question is read as one vector)" if maps.question_weights is None
            else " ".join(f"{t}:{a:.2f}"
                          for t, a in zip(maps.words, maps.question_weights, strict=True))
        ),
    ]  # fmt: skip
    if out is not None:
        lines.append(f"wrote {write_coattention_page(out, maps)}: open it in a browser "
                     "(no network needed)")  # fmt: skip
    if png is not None:
        coattention_figure(maps, path=png)
        lines.append(f"wrote {png}")
    return lines


__all__ = [
    "CoAttentionMaps",
    "coattention_figure",
    "coattention_page",
    "show_maps",
    "upsample",
    "write_coattention_page",
]
