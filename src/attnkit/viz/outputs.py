"""Every view of one attention matrix at once, for commands: ``attnkit view`` calls it on a
weights file; ``view --checkpoint`` and ``translate --show`` can call it on a model's weights.

    show(weights, tgt_tokens, src_tokens, out="attn.html", png="attn.png", terminal=True)

``more`` (name -> AttentionRecord) puts other maps of the same model in the page, behind its
"attention" switch; the image and the terminal show ``weights`` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..eval.alignment import GoldAlignment, Link
from .heatmap import heatmap
from .notebook import Shown
from .page import write_attention_page
from .terminal import terminal_heatmap
from .weights_file import AttentionRecord


def show(
    weights: Any,
    tgt_tokens: Sequence[str],
    src_tokens: Sequence[str] | None = None,
    *,
    out: str | Path | None = None,
    png: str | Path | None = None,
    terminal: bool = False,
    layer: int = -1,
    head: int | str | None = None,
    gold: Iterable[Link] | GoldAlignment | None = None,
    title: str = "attention",
    name: str | None = None,
    more: Mapping[str, AttentionRecord] | None = None,
    shown: str | None = None,
) -> Shown:
    """Write the page (``out``), the image (``png``) and/or build the terminal heatmap; returns
    the lines to print (a list, which in a Jupyter notebook also renders the interactive page
    inline, see notebook.py). weights (Tq, Tk) | (H, Tq, Tk) | (L, H, Tq, Tk); src_tokens None =
    self-attention; head: an index, "mean", or None (image: every head, terminal: the mean);
    ``name``, ``more``, ``shown``: the page's maps (``attnkit.viz.page.page_data``)."""
    if isinstance(head, str) and head != "mean":
        raise ValueError(f"head {head!r}: pass a head index, 'mean' or None")
    gold_links = gold if isinstance(gold, GoldAlignment) or gold is None else list(gold)
    lines = []
    if out is not None:
        page = write_attention_page(
            out,
            weights,
            tgt_tokens,
            src_tokens,
            title=title,
            gold=gold_links,
            name=name,
            more=more,
            shown=shown,
        )
        lines.append(f"wrote {page}: open it in a browser (no network needed)")
    if png is not None:
        heatmap(
            weights,
            tgt_tokens,
            src_tokens,
            layer=layer,
            heads=head,
            gold=gold_links,
            path=png,
            title=title,
        )
        lines.append(f"wrote {png}")
    if terminal:
        one = head if isinstance(head, int) else None
        lines.append(terminal_heatmap(weights, tgt_tokens, src_tokens, layer=layer, head=one))
    args = {
        "weights": weights,
        "query_tokens": tgt_tokens,
        "key_tokens": src_tokens,
        "title": title,
        "gold": gold_links,
        "name": name,
        "more": more,
        "shown": shown,
    }
    return Shown(lines, args)


__all__ = ["show"]
