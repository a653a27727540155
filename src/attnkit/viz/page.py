"""An interactive attention page: ONE self-contained HTML file (no network, opens from disk).

    write_attention_page("attn.html", weights, tgt_tokens, src_tokens)

Hover or click a target (query) token and the source (key) tokens light up by weight; a
matrix view below; switches for layer and head (or the mean of heads). Works for
cross-attention (two token lists) and self-attention (key_tokens=None). ``more`` adds other
maps of the same model (name -> AttentionRecord, e.g. a Transformer's "enc-self" and
"dec-self" beside its "cross"), chosen by an "attention" switch; ``shown`` names the map the
page opens on.

Safety: the weights and tokens travel as JSON inside <script type="application/json"> (with
``<``, ``>`` and ``&`` escaped, so no token can close the element) and the page script puts
them into the document with ``textContent`` only, never ``innerHTML``: tokens are data, not
markup. A Content-Security-Policy forbids every network fetch; the glyphs of Hangul tokens travel
inside the page as an embedded font (``_page_fonts``), so they show on a machine without a
Korean font.

Legend: L layers, H heads, Tq queries (target tokens), Tk keys (source tokens).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._checks import as_stack
from ..eval.alignment import GoldAlignment, Link, split_gold
from ._html import write_html
from ._page_assets import BODY, CSS, JS
from ._page_fonts import FONT_SRC, page_font_css
from ._weights import check_tokens
from .weights_file import AttentionRecord

CSP = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; {FONT_SRC}"


def embed_json(data: Any) -> str:
    """JSON that is safe inside a <script> element: '<', '>' and '&' become \\u escapes (the
    same string after JSON.parse), so '</script>' in a token cannot end the element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(ch, esc)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _gold_links(gold: Iterable[Link] | GoldAlignment | None, tq: int, tk: int) -> list[Any]:
    sure, maybe = split_gold(gold, tq, tk)
    links = [[s, t, "sure"] for s, t in sure] + [[s, t, "possible"] for s, t in maybe]
    return sorted(links)


LABELS = {
    "enc-self": "encoder self-attention",
    "dec-self": "decoder self-attention (causal)",
    "cross": "cross-attention (decoder \u2192 encoder)",
}


def _view(
    name: str | None,
    weights: Any,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None,
    gold: Iterable[Link] | GoldAlignment | None,
    digits: int,
) -> dict[str, Any]:
    """One map of the page: name, label, kind ("cross" | "self"), tokens, weights
    (L, H, Tq, Tk) rounded to ``digits`` decimals, gold links [src, tgt, "sure" | "possible"]."""
    stack = as_stack(weights)  # (L, H, Tq, Tk)
    _, _, tq, tk = stack.shape
    queries = check_tokens(query_tokens, tq, "query tokens", "queries")
    if key_tokens is None and tq != tk:
        raise ValueError(f"self-attention needs square weights; got {tq}x{tk}: pass key_tokens")
    keys = queries if key_tokens is None else check_tokens(key_tokens, tk, "key tokens", "keys")
    kind = "self" if key_tokens is None else "cross"
    name = kind if name is None else str(name)
    return {
        "name": name,
        "label": LABELS.get(name, name),
        "gold": _gold_links(gold, tq, tk),
        "kind": kind,
        "queries": queries,
        "keys": keys,
        "weights": stack.round(digits).tolist(),
    }


def page_data(
    weights: Any,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "attention",
    gold: Iterable[Link] | GoldAlignment | None = None,
    digits: int = 6,
    name: str | None = None,
    more: Mapping[str, AttentionRecord] | None = None,
    shown: str | None = None,
) -> dict[str, Any]:
    """The JSON the page renders: the first map at the top level (name, label, kind "cross" or
    "self", queries, keys, weights (L, H, Tq, Tk), gold links), the title, the other maps
    under "more" (same fields; no gold) and "shown", the index of the map the page opens on
    (0 = the first, k = more[k-1])."""
    first = _view(name, weights, query_tokens, key_tokens, gold, digits)
    others = [
        _view(n, r.weights, _tokens_of(r, n), r.src_tokens, None, digits)
        for n, r in (more or {}).items()
    ]
    names = [first["name"], *(v["name"] for v in others)]
    if len(set(names)) != len(names):
        raise ValueError(f"two maps share a name: {names}; name each map once")
    if shown is not None and shown not in names:
        raise ValueError(f"shown={shown!r} is not one of the maps {names}")
    return {
        "title": str(title),
        **first,
        "more": others,
        "shown": 0 if shown is None else names.index(shown),
    }


def _tokens_of(record: AttentionRecord, name: str) -> list[str]:
    if record.tgt_tokens is None:
        raise ValueError(f"map {name!r} has no query tokens; pass tgt_tokens in its record")
    return record.tgt_tokens


def attention_page(
    weights: Any,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "attention",
    gold: Iterable[Link] | GoldAlignment | None = None,
    name: str | None = None,
    more: Mapping[str, AttentionRecord] | None = None,
    shown: str | None = None,
) -> str:
    """The page as a string. weights (Tq, Tk) | (H, Tq, Tk) | (L, H, Tq, Tk), torch or numpy;
    key_tokens None = self-attention; gold (src, tgt) links are outlined in the matrix;
    ``name``, ``more`` and ``shown`` as in ``page_data`` (more maps behind a switch)."""
    data = page_data(
        weights,
        query_tokens,
        key_tokens,
        title=title,
        gold=gold,
        name=name,
        more=more,
        shown=shown,
    )
    payload = embed_json(data)  # every token and label, as the page will show them
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>attention</title>\n"
        f"<style>\n{page_font_css([payload])}{CSS}</style>\n</head>\n<body>\n"
        f"{BODY}"
        f'<script type="application/json" id="attn-data">{payload}</script>\n'
        f"<script>\n{JS}</script>\n</body>\n</html>\n"
    )


def write_attention_page(
    path: str | Path,
    weights: Any,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "attention",
    gold: Iterable[Link] | GoldAlignment | None = None,
    name: str | None = None,
    more: Mapping[str, AttentionRecord] | None = None,
    shown: str | None = None,
) -> Path:
    """Write the page to ``path`` (UTF-8) and return the path."""
    html = attention_page(
        weights,
        query_tokens,
        key_tokens,
        title=title,
        gold=gold,
        name=name,
        more=more,
        shown=shown,
    )
    return write_html(path, html)


__all__ = ["attention_page", "embed_json", "page_data", "write_attention_page"]
