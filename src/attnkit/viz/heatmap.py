"""Attention heatmaps as matplotlib figures: tokens on the axes, one panel per head, gold
alignments marked.

    fig = heatmap(weights, query_tokens, key_tokens, gold=[(0, 0), (1, 2)], path="attn.png")

Legend: L layers, H heads, Tq queries (rows, target tokens), Tk keys (columns, source tokens).
Drawn with the Agg canvas and no pyplot, so it works headless and leaves pyplot's state alone.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .._checks import as_stack
from ..eval.alignment import GoldAlignment, Link, split_gold
from ._figure_file import save_figure
from ._weights import check_tokens
from .fonts import font_rc


def _select_heads(n_heads: int, heads: int | Sequence[int] | str | None) -> list[int | None]:
    """None = every head (one panel each); "mean" = their average; int or list = those."""
    if heads is None:
        return list(range(n_heads))
    if heads == "mean":
        return [None]
    if isinstance(heads, str):
        raise ValueError(f"heads={heads!r}: pass None (every head), 'mean', an int or a list")
    chosen: list[int] = [heads] if isinstance(heads, int) else [int(h) for h in heads]
    for h in chosen:
        if not -n_heads <= h < n_heads:
            raise ValueError(f"head {h!r} out of range: the weights have {n_heads} head(s)")
    return [h % n_heads for h in chosen]


def _mark_gold(ax: Any, sure: set[Link], possible: set[Link]) -> None:
    for links, style in ((sure, "-"), (possible, "--")):
        for s, t in sorted(links):
            box = Rectangle((s - 0.5, t - 0.5), 1, 1, fill=False, ec="red", lw=1.6, ls=style)
            ax.add_patch(box)


class AttentionFigure(Figure):
    """A matplotlib Figure that draws itself as a PNG where rich output is shown (Jupyter),
    with or without pyplot's inline backend."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png")
        return buf.getvalue()


def heatmap(
    weights: Any,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    layer: int = -1,
    heads: int | Sequence[int] | str | None = None,
    gold: Iterable[Link] | GoldAlignment | None = None,
    path: str | Path | None = None,
    title: str | None = None,
    annotate: bool = False,
    cmap: str = "Blues",
    fonts: list[str] | None = None,
    cell: float = 0.42,
    dpi: int = 150,
) -> Figure:
    """A Figure of attention weights; saved to ``path`` (PNG, SVG, PDF by suffix) if given.

    weights (Tq, Tk) | (H, Tq, Tk) | (L, H, Tq, Tk), torch or numpy. ``layer`` picks one layer
    of a stack (default: the last). ``heads``: None = a grid with one panel per head,
    "mean" = the average over heads, an int or list = those heads. key_tokens None =
    self-attention (keys are the queries). ``gold``: (src, tgt) links, boxed in red (possible
    links of a GoldAlignment dashed). ``annotate`` writes each weight in its cell. ``fonts``:
    font families tried before the built-in fallback (DejaVu Sans, then NanumGothic).
    """
    stack = as_stack(weights)
    n_layers, n_heads, tq, tk = stack.shape
    if not -n_layers <= layer < n_layers:
        raise ValueError(f"layer {layer} out of range: the weights have {n_layers} layer(s)")
    mats = stack[layer]  # (H, Tq, Tk)
    queries = check_tokens(query_tokens, tq, "query tokens", "queries")
    if key_tokens is None and tq != tk:
        raise ValueError(f"self-attention needs square weights; got {tq}x{tk}: pass key_tokens")
    keys = queries if key_tokens is None else check_tokens(key_tokens, tk, "key tokens", "keys")
    panels = _select_heads(n_heads, heads)
    sure, possible = split_gold(gold, tq, tk)

    ncols = min(len(panels), 4)
    nrows = math.ceil(len(panels) / ncols)
    width = max(3.0, cell * tk + 1.6) * ncols + 0.8
    height = max(2.5, cell * tq + 1.4) * nrows + (0.5 if title else 0.0)
    with matplotlib.rc_context(font_rc(fonts)):
        fig = AttentionFigure(figsize=(width, height), dpi=dpi, layout="constrained")
        FigureCanvasAgg(fig)
        axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
        vmax = max(float(mats.max()), 1e-12)
        image: Any = None
        for ax, h in zip(axes, panels, strict=False):
            mat = mats.mean(axis=0) if h is None else mats[h]  # (Tq, Tk)
            image = ax.imshow(mat, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
            ax.set_xticks(range(tk), keys, rotation=60, ha="right", rotation_mode="anchor")
            ax.set_yticks(range(tq), queries)
            ax.tick_params(length=0)
            if n_heads > 1:
                ax.set_title("mean of heads" if h is None else f"head {h}", fontsize=9)
            if annotate:
                for (i, j), w in np.ndenumerate(mat):
                    colour = "white" if w > 0.6 * vmax else "black"
                    ax.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=7, c=colour)
            _mark_gold(ax, sure, possible)
        for ax in axes[len(panels) :]:
            ax.set_axis_off()
        fig.colorbar(image, ax=list(axes[: len(panels)]), shrink=0.8, label="weight")
        label = title or ""
        if n_layers > 1:
            label = f"{label}  (layer {layer % n_layers})".strip()
        if label:
            fig.suptitle(label)
        if path is not None:
            save_figure(fig, path)
    return fig


__all__ = ["AttentionFigure", "heatmap"]
