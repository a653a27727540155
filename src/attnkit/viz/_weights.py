"""Shared input checks and text layout for the viewers (the weights themselves are checked by
``attnkit._checks.as_stack``).

Legend: L layers, H heads, Tq queries (target tokens), Tk keys (source tokens).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import numpy as np


def check_tokens(tokens: Sequence[str], n: int, name: str, axis: str) -> list[str]:
    """The token list for one axis, checked against the weights' length on that axis."""
    if isinstance(tokens, str):
        raise TypeError(f"{name} must be a list of tokens, not one string; use text.split()")
    out = [str(t) for t in tokens]
    if len(out) != n:
        raise ValueError(
            f"{len(out)} {name} but the weights have {n} {axis}; pass one token per {axis[:-1]}"
        )
    return out


def pick(stack: np.ndarray, layer: int, head: int | None) -> np.ndarray:
    """One matrix (Tq, Tk) of a (L, H, Tq, Tk) stack; head None = mean over heads."""
    n_layers, n_heads = stack.shape[:2]
    if not -n_layers <= layer < n_layers:
        raise ValueError(f"layer {layer} out of range: the weights have {n_layers} layer(s)")
    if head is None:
        return stack[layer].mean(axis=0)  # (Tq, Tk)
    if not -n_heads <= head < n_heads:
        raise ValueError(f"head {head} out of range: the weights have {n_heads} head(s)")
    return stack[layer, head]  # (Tq, Tk)


def display_width(text: str) -> int:
    """Terminal columns a string takes: East Asian wide/full-width characters take two,
    combining marks none."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def fit(text: str, width: int) -> str:
    """``text`` cut (with '…') and right-padded to exactly ``width`` terminal columns."""
    if display_width(text) > width:
        out = ""
        for ch in text:
            if display_width(out + ch) > width - 1:
                break
            out += ch
        text = out + "…"
    return text + " " * (width - display_width(text))
