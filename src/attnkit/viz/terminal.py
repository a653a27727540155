"""A compact terminal heatmap of an attention matrix: one row per query (target) token, two
columns of Unicode shading per key (source) token, key tokens written downwards on top.

    print(terminal_heatmap(weights, query_tokens, key_tokens, heads=0))

Legend: L layers, H heads, Tq queries, Tk keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import as_stack
from .._renamed import renamed_keywords
from .._text import printable
from ._weights import check_tokens, display_width, fit, pick

SHADES = " ░▒▓█"


def _shade(value: float, vmax: float, shades: str) -> str:
    level = 0 if vmax <= 0 else int(round(value / vmax * (len(shades) - 1)))
    return shades[min(max(level, 0), len(shades) - 1)] * 2  # one key = two columns


def _header(keys: list[str], depth: int, indent: int) -> list[str]:
    """Key tokens written downwards, one character (padded to two columns) per line."""
    lines = []
    for k in range(min(depth, max((len(t) for t in keys), default=0))):
        cells = [fit(t[k], 2) if k < len(t) and display_width(t[k]) <= 2 else "  " for t in keys]
        lines.append(" " * indent + "".join(cells).rstrip())
    return lines


@renamed_keywords(head="heads")
def terminal_heatmap(
    weights: Any,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    layer: int = -1,
    heads: int | None = None,
    shades: str = SHADES,
    vmax: float | None = None,
    label_width: int = 12,
    header_depth: int = 6,
) -> str:
    """The heatmap as a string (no colour codes, safe to print anywhere).

    weights (Tq, Tk) | (H, Tq, Tk) | (L, H, Tq, Tk); ``layer`` picks a layer of a stack,
    ``heads`` one head (None = mean over heads; ``head=`` until this release). key_tokens
    None = self-attention (keys are the queries). ``vmax``: the weight drawn as a full block
    (default: the matrix's maximum). Each row ends with the key it attends most and that weight.
    """
    if len(shades) < 2:
        raise ValueError("shades needs at least two characters, e.g. ' ░▒▓█'")
    stack = as_stack(weights)
    mat = pick(stack, layer, heads)  # (Tq, Tk)
    tq, tk = mat.shape
    queries = [printable(t) for t in check_tokens(query_tokens, tq, "query tokens", "queries")]
    keys = (
        queries
        if key_tokens is None
        else [printable(t) for t in check_tokens(key_tokens, tk, "key tokens", "keys")]
    )
    if key_tokens is None and tq != tk:
        raise ValueError(f"self-attention needs square weights; got {tq}x{tk}: pass key_tokens")
    top = float(mat.max()) if vmax is None else float(vmax)

    what = [f"layer {layer % stack.shape[0]}"] if stack.shape[0] > 1 else []
    if stack.shape[1] > 1:
        what.append("mean of heads" if heads is None else f"head {heads % stack.shape[1]}")
    legend = f"'{shades[0]}' = 0 … '{shades[-1]}' = {top:.2f}"
    lines = [", ".join([*what, legend])]
    lines += _header(keys, header_depth, label_width + 1)
    for i, q in enumerate(queries):
        row = mat[i]  # (Tk,)
        cells = "".join(_shade(float(w), top, shades) for w in row)
        j = int(np.argmax(row))
        best = f" {keys[j]} {row[j]:.2f}" if row[j] > 0 else ""
        lines.append(f"{fit(q, label_width)}│{cells}│{best}")
    return "\n".join(lines)


__all__ = ["SHADES", "terminal_heatmap"]
