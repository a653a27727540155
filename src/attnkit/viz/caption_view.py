"""Where a captioner looked: one panel per generated word, the attention over the patch grid
upsampled onto the image (as in the figures of Xu et al. 2015), as a PNG and as one
self-contained HTML page (the panels travel inside it as data: URIs; nothing is fetched).

    caption_figure(image, words, weights, grid, patch, path="caption.png")
    write_caption_page("caption.html", image, words, weights, grid, patch, reference=[...])

Legend: H/W image height/width in pixels, (r, c) the patch grid, L = r·c patches,
T generated words, p pixels per patch side.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ._figure_file import save_figure
from ._html import write_html
from ._page_fonts import FONT_SRC, page_font_css
from .fonts import font_rc

CSP = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; {FONT_SRC}"


def upsample(weights: np.ndarray, grid: tuple[int, int], patch: int) -> np.ndarray:
    """One step's attention over L patches (L,) -> a map over the image's pixels
    (r·p, c·p), bilinear, scaled so that it sums to the same total as the weights."""
    r, c = grid
    w = np.asarray(weights, dtype=np.float32)
    if w.shape != (r * c,):
        raise ValueError(f"weights of shape {w.shape} for a {r}x{c} grid of patches")
    small = torch.from_numpy(w.reshape(1, 1, r, c))  # (1, 1, r, c)
    big = F.interpolate(small, scale_factor=patch, mode="bilinear", align_corners=False)
    out = big[0, 0].numpy()  # (r·p, c·p)
    total = float(out.sum())
    return out * (float(w.sum()) / total) if total > 0 else out


def _check(words: Sequence[str], weights: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim != 2 or w.shape[1] != grid[0] * grid[1]:
        raise ValueError(f"weights must be (T, {grid[0] * grid[1]}), got {w.shape}")
    if w.shape[0] < len(words):
        raise ValueError(f"{len(words)} words but attention for {w.shape[0]} steps")
    return w


def _panel(ax: object, image: np.ndarray, heat: np.ndarray | None, title: str) -> None:
    ax.imshow(image, cmap="gray", vmin=0, vmax=1, interpolation="nearest")  # type: ignore[attr-defined]
    if heat is not None:
        top = float(heat.max()) or 1.0
        ax.imshow(heat / top, cmap="inferno", alpha=0.55, vmin=0, vmax=1)  # type: ignore[attr-defined]
    family = font_rc()["font.family"]  # Hangul words in NanumGothic, not boxes
    ax.set_title(title, fontsize=9, fontfamily=family)  # type: ignore[attr-defined]
    ax.set_xticks([])  # type: ignore[attr-defined]
    ax.set_yticks([])  # type: ignore[attr-defined]


def caption_figure(
    image: np.ndarray,
    words: Sequence[str],
    weights: np.ndarray,
    grid: tuple[int, int],
    patch: int,
    *,
    path: str | Path | None = None,
    title: str | None = None,
    dpi: int = 120,
) -> Figure:
    """The image, then one panel per word with its step's attention (weights (T, L), the
    first len(words) steps used) upsampled onto it. Saved to ``path`` if given."""
    w = _check(words, weights, grid)
    image = np.asarray(image, dtype=np.float32)  # (H, W)
    h, wd = grid[0] * patch, grid[1] * patch
    n = len(words) + 1
    fig = Figure(figsize=(1.6 * n, 1.9))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, n, squeeze=False)[0]
    _panel(axes[0], image[:h, :wd], None, "image")
    for k, word in enumerate(words):
        _panel(axes[k + 1], image[:h, :wd], upsample(w[k], grid, patch), word)
    if title:
        fig.suptitle(title, fontsize=10, fontfamily=font_rc()["font.family"])
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=dpi)
    return fig


def _png_uri(fig: Figure, dpi: int) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def write_caption_page(
    path: str | Path,
    image: np.ndarray,
    words: Sequence[str],
    weights: np.ndarray,
    grid: tuple[int, int],
    patch: int,
    *,
    reference: Sequence[str] | None = None,
    title: str = "caption attention",
    dpi: int = 100,
) -> Path:
    """One HTML file: the generated caption (and the reference), then a panel per word with
    its attention upsampled onto the image and the patch it weighted most. Self-contained:
    the panels are inline PNGs, a Content-Security-Policy forbids every fetch, words are
    HTML-escaped (text, never markup) and their Hangul glyphs are embedded (``_page_fonts``)."""
    w = _check(words, weights, grid)
    image = np.asarray(image, dtype=np.float32)
    h, wd = grid[0] * patch, grid[1] * patch
    cells = []
    for k, word in enumerate(["(image)", *words]):
        fig = Figure(figsize=(1.8, 1.8))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        heat = None if k == 0 else upsample(w[k - 1], grid, patch)
        _panel(ax, image[:h, :wd], heat, word)
        fig.tight_layout()
        note = ""
        if k:
            top = int(np.argmax(w[k - 1]))
            note = f"max α {w[k - 1][top]:.2f} at patch (row {top // grid[1]}, col {top % grid[1]})"
        cells.append(
            f'<figure><img alt="{html.escape(word)}" src="{_png_uri(fig, dpi)}">'
            f"<figcaption>{html.escape(word)}<br><small>{html.escape(note)}</small>"
            "</figcaption></figure>"
        )
    ref = (
        "" if reference is None else f"<p>reference: <b>{html.escape(' '.join(reference))}</b></p>"
    )
    fonts = page_font_css([title, *words, *(reference or [])])
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<title>{html.escape(title)}</title>
<style>{fonts}body{{margin:1.5em}} .panels{{display:flex;flex-wrap:wrap;gap:.6em}}
figure{{margin:0;text-align:center}} img{{width:180px;image-rendering:auto}}</style>
</head><body>
<h1>{html.escape(title)}</h1>
<p>generated: <b>{html.escape(" ".join(words))}</b></p>{ref}
<p>Each panel: the attention of the step that generated the word, over a {grid[0]}x{grid[1]}
grid of {patch}x{patch}-pixel patches, upsampled (bilinear) onto the image.</p>
<div class="panels">{"".join(cells)}</div>
</body></html>
"""
    return write_html(path, page)


__all__ = ["caption_figure", "upsample", "write_caption_page"]
