"""An interactive attention page: ONE self-contained HTML file (no network, opens from disk).

    write_attention_page("attn.html", weights, tgt_tokens, src_tokens)

Hover or click a target (query) token and the source (key) tokens light up by weight; a
matrix view below; switches for layer and head (or the mean of heads). Works for
cross-attention (two token lists) and self-attention (key_tokens=None).

Safety: the weights and tokens travel as JSON inside <script type="application/json"> (with
``<``, ``>`` and ``&`` escaped, so no token can close the element) and the page script puts
them into the document with ``textContent`` only, never ``innerHTML``: tokens are data, not
markup. A Content-Security-Policy forbids every network fetch.

Legend: L layers, H heads, Tq queries (target tokens), Tk keys (source tokens).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .._checks import as_stack
from ..eval.alignment import GoldAlignment, Link, split_gold
from ._page_assets import BODY, CSS, JS
from ._weights import check_tokens

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


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


def page_data(
    weights: Any,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "attention",
    gold: Iterable[Link] | GoldAlignment | None = None,
    digits: int = 6,
) -> dict[str, Any]:
    """The JSON the page renders: tokens, kind ("cross" or "self"), weights (L, H, Tq, Tk)
    rounded to ``digits`` decimals, gold links [src, tgt, "sure" | "possible"]."""
    stack = as_stack(weights)  # (L, H, Tq, Tk)
    _, _, tq, tk = stack.shape
    queries = check_tokens(query_tokens, tq, "query tokens", "queries")
    if key_tokens is None and tq != tk:
        raise ValueError(f"self-attention needs square weights; got {tq}x{tk}: pass key_tokens")
    keys = queries if key_tokens is None else check_tokens(key_tokens, tk, "key tokens", "keys")
    return {
        "gold": _gold_links(gold, tq, tk),
        "title": str(title),
        "kind": "self" if key_tokens is None else "cross",
        "queries": queries,
        "keys": keys,
        "weights": stack.round(digits).tolist(),
    }


def attention_page(
    weights: Any,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "attention",
    gold: Iterable[Link] | GoldAlignment | None = None,
) -> str:
    """The page as a string. weights (Tq, Tk) | (H, Tq, Tk) | (L, H, Tq, Tk), torch or numpy;
    key_tokens None = self-attention; gold (src, tgt) links are outlined in the matrix."""
    data = page_data(weights, query_tokens, key_tokens, title=title, gold=gold)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>attention</title>\n"
        f"<style>\n{CSS}</style>\n</head>\n<body>\n"
        f"{BODY}"
        f'<script type="application/json" id="attn-data">{embed_json(data)}</script>\n'
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
) -> Path:
    """Write the page to ``path`` (UTF-8) and return the path."""
    out = Path(path)
    html = attention_page(weights, query_tokens, key_tokens, title=title, gold=gold)
    out.write_text(html, "utf-8")
    return out


__all__ = ["attention_page", "embed_json", "page_data", "write_attention_page"]
