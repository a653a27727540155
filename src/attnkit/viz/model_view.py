"""The model view: every layer × head of a model at once, as small maps, in one
self-contained HTML page (click a map to open it large, with its tokens) or one PNG grid whose
size stays readable however many layers and heads there are (bertviz's "model view").

    write_model_view("model.html", weights, tokens)               # self-attention
    write_model_view("model.html", weights, tgt_tokens, src_tokens)  # cross-attention
    model_view_png("model.png", weights, tokens)

Several maps of one model (a Transformer's encoder, decoder and cross attention) go in one page
as named sections: ``write_model_view(path, {"enc-self": record, ...})`` with
``attnkit.viz.AttentionRecord`` values.

Safety as in ``page.py``: weights and tokens travel as JSON inside a
``<script type="application/json">`` element, the page script writes tokens with
``textContent`` only, and a Content-Security-Policy forbids every fetch.

Legend: L layers, H heads, Tq queries (rows), Tk keys (columns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .._checks import as_stack
from ._figure_file import save_figure
from ._html import write_html
from ._page_fonts import page_font_css
from ._weights import check_tokens
from .fonts import font_rc
from .page import CSP, LABELS, embed_json
from .weights_file import AttentionRecord

__all__ = ["model_view_data", "model_view_page", "model_view_png", "write_model_view"]

# the PNG grid: each panel at most this many inches, the whole figure at most this wide/high,
# so 12 layers x 12 heads stays one screen and 2 x 2 stays legible
_PANEL_IN = 1.6
_MAX_IN = 16.0
_DPI = 110


def _section(name: str, weights: Any, queries: Sequence[str], keys: Sequence[str] | None,
             digits: int) -> dict[str, Any]:  # fmt: skip
    stack = as_stack(weights)  # (L, H, Tq, Tk)
    _, _, tq, tk = stack.shape
    q = check_tokens(queries, tq, "query tokens", "queries")
    if keys is None and tq != tk:
        raise ValueError(f"self-attention needs square weights; got {tq}x{tk}: pass key tokens")
    k = q if keys is None else check_tokens(keys, tk, "key tokens", "keys")
    return {
        "name": name,
        "label": LABELS.get(name, name),
        "queries": q,
        "keys": k,
        "weights": np.asarray(stack, dtype=np.float64).round(digits).tolist(),
    }


def _records(
    weights: Any, query_tokens: Sequence[str] | None, key_tokens: Sequence[str] | None
) -> dict[str, tuple[Any, Sequence[str], Sequence[str] | None]]:
    """name -> (weights, queries, keys or None), from one map or a mapping of records."""
    if isinstance(weights, Mapping):
        if query_tokens is not None or key_tokens is not None:
            raise ValueError("with a mapping of records, the tokens come from each record")
        out: dict[str, tuple[Any, Sequence[str], Sequence[str] | None]] = {}
        for name, rec in weights.items():
            if not isinstance(rec, AttentionRecord) or rec.tgt_tokens is None:
                raise ValueError(
                    f"map {name!r}: pass an AttentionRecord with its query tokens (tgt_tokens)"
                )
            keys = None if rec.src_tokens == rec.tgt_tokens else rec.src_tokens
            out[str(name)] = (rec.weights, rec.tgt_tokens, keys)
        if not out:
            raise ValueError("no maps to show: pass at least one record")
        return out
    if query_tokens is None:
        raise ValueError("pass the query tokens (and key tokens for cross-attention)")
    return {"self" if key_tokens is None else "cross": (weights, query_tokens, key_tokens)}


def model_view_data(
    weights: Any,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "attention: every layer and head",
    digits: int = 5,
) -> dict[str, Any]:
    """The JSON the page renders: the title and one section per map (name, label, queries,
    keys, weights (L, H, Tq, Tk))."""
    sections = [
        _section(name, w, q, k, digits)
        for name, (w, q, k) in _records(weights, query_tokens, key_tokens).items()
    ]
    return {"title": str(title), "sections": sections}


_CSS = """
body { font: 14px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; } h2 { font-size: 15px; margin: 18px 0 6px; }
table.grid { border-collapse: collapse; }
table.grid th { font-weight: normal; color: #666; font-size: 12px; padding: 2px 6px; }
canvas.thumb { border: 1px solid #ccc; cursor: pointer; display: block; }
canvas.thumb:hover, canvas.thumb.on { border-color: #d33; }
#big { margin-top: 16px; } #big table { border-collapse: collapse; }
#big td.cell { width: 22px; height: 22px; border: 1px solid #eee; }
#big th { font-weight: normal; font-size: 12px; padding: 0 4px; white-space: pre; }
#big thead th { writing-mode: vertical-rl; vertical-align: bottom; }
#caption { color: #444; margin: 4px 0; }
"""

_JS = r"""
const data = JSON.parse(document.getElementById("attn-data").textContent);
document.title = data.title;
document.getElementById("title").textContent = data.title;
const root = document.getElementById("sections");
const SIZE = 88;
function shade(w) { const v = Math.round(255 * (1 - Math.min(1, Math.max(0, w))));
  return "rgb(" + v + "," + v + ",255)"; }
function draw(canvas, m) {
  const ctx = canvas.getContext("2d"), tq = m.length, tk = m[0].length;
  const cw = SIZE / tk, ch = SIZE / tq;
  for (let i = 0; i < tq; i++) for (let j = 0; j < tk; j++) {
    ctx.fillStyle = shade(m[i][j]); ctx.fillRect(j * cw, i * ch, Math.ceil(cw), Math.ceil(ch)); }
}
function open(s, l, h, canvas) {
  document.querySelectorAll("canvas.thumb.on").forEach(c => c.classList.remove("on"));
  canvas.classList.add("on");
  const sec = data.sections[s], m = sec.weights[l][h], big = document.getElementById("big");
  big.replaceChildren();
  const cap = document.createElement("div"); cap.id = "caption";
  cap.textContent = sec.label + ": layer " + l + ", head " + h;
  big.appendChild(cap);
  const table = document.createElement("table"), head = document.createElement("thead");
  const hr = document.createElement("tr"); hr.appendChild(document.createElement("th"));
  sec.keys.forEach(k => { const th = document.createElement("th"); th.className = "key";
    th.textContent = k; hr.appendChild(th); });
  head.appendChild(hr); table.appendChild(head);
  const body = document.createElement("tbody");
  m.forEach((row, i) => { const tr = document.createElement("tr");
    const th = document.createElement("th"); th.className = "query";
    th.textContent = sec.queries[i]; tr.appendChild(th);
    row.forEach((w, j) => { const td = document.createElement("td"); td.className = "cell";
      td.dataset.i = i; td.dataset.j = j; td.dataset.w = w; td.style.background = shade(w);
      td.title = sec.queries[i] + " \u2192 " + sec.keys[j] + ": " + w.toFixed(3);
      tr.appendChild(td); });
    body.appendChild(tr); });
  table.appendChild(body); big.appendChild(table);
}
data.sections.forEach((sec, s) => {
  const h2 = document.createElement("h2"); h2.textContent = sec.label; root.appendChild(h2);
  const grid = document.createElement("table"); grid.className = "grid";
  const hr = document.createElement("tr"); hr.appendChild(document.createElement("th"));
  sec.weights[0].forEach((_, h) => { const th = document.createElement("th");
    th.textContent = "head " + h; hr.appendChild(th); });
  grid.appendChild(hr);
  sec.weights.forEach((layer, l) => {
    const tr = document.createElement("tr"), th = document.createElement("th");
    th.textContent = "layer " + l; tr.appendChild(th);
    layer.forEach((m, h) => { const td = document.createElement("td");
      const c = document.createElement("canvas"); c.className = "thumb";
      c.width = SIZE; c.height = SIZE; c.dataset.s = s; c.dataset.l = l; c.dataset.h = h;
      draw(c, m); c.addEventListener("click", () => open(s, l, h, c));
      td.appendChild(c); tr.appendChild(td); });
    grid.appendChild(tr); });
  root.appendChild(grid);
});
document.body.dataset.ready = "1";
"""


def model_view_page(
    weights: Any,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "attention: every layer and head",
) -> str:
    """The model view as one HTML string. weights (L, H, Tq, Tk) (or fewer leading axes) with
    its tokens (key_tokens None = self-attention), or a mapping name -> AttentionRecord for
    several maps of one model."""
    payload = embed_json(model_view_data(weights, query_tokens, key_tokens, title=title))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        "<title>attention</title>\n"
        f"<style>\n{page_font_css([payload])}{_CSS}</style>\n</head>\n<body>\n"
        '<h1 id="title"></h1>\n<p>Every layer (rows) and head (columns); click a map to '
        'open it with its tokens (rows: queries, columns: keys).</p>\n'
        '<div id="sections"></div>\n<div id="big"></div>\n'
        f'<script type="application/json" id="attn-data">{payload}</script>\n'
        f"<script>\n{_JS}</script>\n</body>\n</html>\n"
    )


def write_model_view(
    path: str | Path,
    weights: Any,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "attention: every layer and head",
) -> Path:
    """Write the model view page to ``path`` (UTF-8) and return the path."""
    return write_html(path, model_view_page(weights, query_tokens, key_tokens, title=title))


def model_view_png(
    path: str | Path,
    weights: Any,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "attention: every layer and head",
) -> Path:
    """Every layer × head of every map as one image: panels shrink as the grid grows so the
    figure stays at most 16 × 16 inches at 110 dpi (1,760 pixels a side); tokens label the
    panels' axes while a panel is large enough to read them."""
    sections = model_view_data(weights, query_tokens, key_tokens, title=title)["sections"]
    rows = sum(len(s["weights"]) for s in sections)
    cols = max(len(s["weights"][0]) for s in sections)
    panel = min(_PANEL_IN, _MAX_IN / cols, _MAX_IN / rows)
    longest = max(max(len(s["queries"]), len(s["keys"])) for s in sections)
    labelled = panel / max(longest, 1) >= 0.11  # about 8 points a token
    pad = 1.2 if labelled else 0.4
    with matplotlib.rc_context(font_rc()):
        fig = Figure(figsize=(cols * panel + pad, rows * panel + 0.6 + 0.3 * len(sections)))
        FigureCanvasAgg(fig)
        grid = fig.add_gridspec(rows, cols, hspace=0.35 if labelled else 0.15, wspace=0.1)
        row = 0
        for sec in sections:
            for layer, heads in enumerate(sec["weights"]):
                for h, m in enumerate(heads):
                    ax = fig.add_subplot(grid[row, h])
                    ax.imshow(np.asarray(m), cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
                    ax.set_xticks([])
                    ax.set_yticks([])
                    if labelled and h == 0:
                        ax.set_yticks(range(len(sec["queries"])), sec["queries"], fontsize=6)
                    if labelled and layer == len(sec["weights"]) - 1:
                        ax.set_xticks(range(len(sec["keys"])), sec["keys"], fontsize=6,
                                      rotation=90)  # fmt: skip
                    if row == 0 or layer == 0:
                        ax.set_title(f"head {h}", fontsize=7)
                    if h == 0:
                        name = sec["label"] if len(sections) > 1 else "layer"
                        label = f"{name} {layer}" if len(sections) > 1 else f"layer {layer}"
                        ax.set_ylabel(label, fontsize=7)
                row += 1
        fig.suptitle(title, fontsize=9)
        out = save_figure(fig, path, dpi=_DPI, bbox_inches="tight")
    return out

