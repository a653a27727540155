"""attnkit in Jupyter: the viewer inline, and attention in bertviz's format.

    attnkit.viz.show(weights, query_tokens, key_tokens)      # the last expression of a cell:
                                                               # the interactive page, inline
    attnkit.viz.heatmap(weights, query_tokens, key_tokens)   # a figure, drawn inline
    attention, tokens = to_bertviz(weights, tokens)           # for bertviz.head_view(...)
    record = from_bertviz(attention, tokens)                  # back to an AttentionRecord

The page is the same self-contained page ``attnkit view`` writes (no network), placed in a
sandboxed ``<iframe srcdoc>``: its scripts and element ids live in their own document, so
several pages in one notebook never clash, and nothing it holds can reach the notebook.
bertviz (Vig 2019) takes a tuple with one tensor per layer, each (batch, heads, T, T).

Legend: L layers, H heads, Tq queries, Tk keys, T tokens (self-attention).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import torch

from .._checks import as_stack
from .weights_file import AttentionRecord


class Shown(list[str]):
    """What ``attnkit.viz.show`` returns: the lines a command prints (a list of str), and in
    a notebook the interactive page, rendered inline by ``_repr_html_``."""

    def __init__(self, lines: Sequence[str], page: dict[str, Any]) -> None:
        super().__init__(lines)
        self._page = page  # the arguments of attention_page, built only when displayed

    def html(self) -> str:
        """The self-contained page as a string."""
        from .page import attention_page

        return attention_page(**self._page)

    def _repr_html_(self) -> str:
        rows = as_stack(self._page["weights"]).shape[-2]
        height = min(900, 260 + 28 * rows)
        return (
            f'<iframe sandbox="allow-scripts" style="width:100%;height:{height}px;border:0" '
            f'srcdoc="{html.escape(self.html(), quote=True)}"></iframe>'
        )


def to_bertviz(
    weights: Any, tokens: Sequence[str], *, batch: int = 0
) -> tuple[tuple[torch.Tensor, ...], list[str]]:
    """Self-attention weights (T, T) | (H, T, T) | (L, H, T, T) -> bertviz's
    ``(attention, tokens)``: a tuple of L tensors (1, H, T, T), and the T tokens.
    ``batch`` picks a row when ``weights`` carries a batch dim as (L, B, H, T, T)."""
    w = torch.as_tensor(weights)
    if w.dim() == 5:  # (L, B, H, T, T)
        w = w[:, batch]
    stack = torch.as_tensor(as_stack(w))  # (L, H, T, T)
    t = stack.shape[-1]
    if stack.shape[-2] != t:
        raise ValueError(f"bertviz's views take self-attention (T, T); got {tuple(stack.shape)}")
    if len(tokens) != t:
        raise ValueError(f"{len(tokens)} tokens for {t} positions; give one token per position")
    return tuple(layer.unsqueeze(0) for layer in stack), list(tokens)


def from_bertviz(
    attention: Sequence[Any], tokens: Sequence[str], *, batch: int = 0
) -> AttentionRecord:
    """bertviz's ``attention`` (a tuple of L tensors (B, H, T, T), as Hugging Face models
    return with ``output_attentions=True``) and tokens -> an AttentionRecord with weights
    (L, H, T, T) of row ``batch``, for ``show``, ``heatmap`` or ``save_attention``."""
    if len(attention) == 0:
        raise ValueError("attention is empty: bertviz's format has one tensor per layer")
    layers = [torch.as_tensor(a) for a in attention]
    shapes = {tuple(a.shape) for a in layers}
    if len(shapes) != 1 or layers[0].dim() != 4:
        raise ValueError(
            f"expected one (batch, heads, T, T) tensor per layer, all the same shape; got {shapes}"
        )
    b, _, tq, tk = layers[0].shape
    if not 0 <= batch < b:
        raise ValueError(f"batch={batch}: the attention holds {b} row(s)")
    if tq != tk or len(tokens) != tk:
        raise ValueError(f"{len(tokens)} tokens for attention over {tq}x{tk} positions")
    weights = torch.stack([a[batch] for a in layers]).detach().float().cpu()  # (L, H, T, T)
    return AttentionRecord(weights, list(tokens), None)


__all__ = ["Shown", "from_bertviz", "to_bertviz"]
