"""Shared input checks for the viewers: weights of any rank become a (L, H, Tq, Tk) stack.

Legend: L layers, H heads, Tq queries (target tokens), Tk keys (source tokens).
Accepted weights: (Tq, Tk) one matrix, (H, Tq, Tk) heads, (L, H, Tq, Tk) stacked layers;
torch tensors or numpy arrays, any float dtype.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np


def as_stack(weights: Any) -> np.ndarray:
    """weights (Tq, Tk) | (H, Tq, Tk) | (L, H, Tq, Tk) -> float64 array (L, H, Tq, Tk)."""
    if hasattr(weights, "detach"):  # a torch tensor
        weights = weights.detach().to("cpu").double().numpy()
    arr = np.asarray(weights, dtype=np.float64)
    if arr.ndim == 2:
        arr = arr[None, None]  # (1, 1, Tq, Tk)
    elif arr.ndim == 3:
        arr = arr[None]  # (1, H, Tq, Tk)
    elif arr.ndim != 4:
        raise ValueError(
            f"weights must be (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk); got shape "
            f"{tuple(arr.shape)}. For a batch, pass one example: weights[b]"
        )
    if not np.isfinite(arr).all():
        raise ValueError("weights contain NaN or inf; check the model's masks and inputs")
    return arr


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
