"""Every view of one attention matrix at once, for commands: ``attnkit view`` calls it on a
weights file; ``view --checkpoint`` and ``translate --show`` can call it on a model's weights.

    show(weights, query_tokens, key_tokens, page_path="attn.html", png_path="attn.png",
         terminal=True)

Keywords as in the other viz functions (query_tokens, key_tokens, heads, ``*path``); the old
ones (tgt_tokens, src_tokens, head, out, png) still work, with a DeprecationWarning, for one
release.

``more`` (name -> AttentionRecord) puts other maps of the same model in the page, behind its
"attention" switch; the image and the terminal show ``weights`` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._renamed import renamed_keywords
from ..eval.alignment import GoldAlignment, Link
from .heatmap import heatmap
from .notebook import Shown
from .page import write_attention_page
from .terminal import terminal_heatmap
from .weights_file import AttentionRecord


@renamed_keywords(tgt_tokens="query_tokens", src_tokens="key_tokens", out="page_path",
                  png="png_path", head="heads")  # fmt: skip
def show(
    weights: Any,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    page_path: str | Path | None = None,
    png_path: str | Path | None = None,
    terminal: bool = False,
    layer: int = -1,
    heads: int | str | None = None,
    gold: Iterable[Link] | GoldAlignment | None = None,
    title: str = "attention",
    name: str | None = None,
    more: Mapping[str, AttentionRecord] | None = None,
    shown: str | None = None,
) -> Shown:
    """Write the page (``page_path``), the image (``png_path``) and/or build the terminal
    heatmap; returns the lines to print (a list, which in a Jupyter notebook also renders the
    interactive page inline, see notebook.py). weights (Tq, Tk) | (H, Tq, Tk) | (L, H, Tq, Tk);
    key_tokens None = self-attention; heads: an index, "mean", or None (image: every head,
    terminal: the mean); ``name``, ``more``, ``shown``: the page's maps
    (``attnkit.viz.page.page_data``)."""
    if isinstance(heads, str) and heads != "mean":
        raise ValueError(f"heads {heads!r}: pass a head index, 'mean' or None")
    gold_links = gold if isinstance(gold, GoldAlignment) or gold is None else list(gold)
    lines = []
    if page_path is not None:
        page = write_attention_page(
            page_path,
            weights,
            query_tokens,
            key_tokens,
            title=title,
            gold=gold_links,
            name=name,
            more=more,
            shown=shown,
        )
        lines.append(f"wrote {page}: open it in a browser (no network needed)")
    if png_path is not None:
        heatmap(
            weights,
            query_tokens,
            key_tokens,
            layer=layer,
            heads=heads,
            gold=gold_links,
            path=png_path,
            title=title,
        )
        lines.append(f"wrote {png_path}")
    if terminal:
        one = heads if isinstance(heads, int) else None
        lines.append(terminal_heatmap(weights, query_tokens, key_tokens, layer=layer, heads=one))
    args = {
        "weights": weights,
        "query_tokens": query_tokens,
        "key_tokens": key_tokens,
        "title": title,
        "gold": gold_links,
        "name": name,
        "more": more,
        "shown": shown,
    }
    return Shown(lines, args)


__all__ = ["show"]
