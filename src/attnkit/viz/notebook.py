"""attnkit in Jupyter: the viewers inline, and attention in bertviz's format. The last
expression of a cell renders inline:

    attnkit.viz.show(weights, query_tokens, key_tokens)        # the interactive page
    attnkit.viz.show_model_view(weights, tokens)               # every layer x head
    attnkit.viz.show_neuron(neuron_view(score, q, keys, toks)) # one query's score terms
    attnkit.viz.show(attention_rollout(weights)[-1], tokens)   # rollout (or flow) as one map
    attnkit.viz.heatmap(weights, query_tokens, key_tokens)     # a figure
    attention, tokens = to_bertviz(weights, tokens)             # for bertviz.head_view(...)
    record = from_bertviz(attention, tokens)                    # back to an AttentionRecord

Each page is the self-contained page its file holds (``attnkit view``, ``write_model_view``,
``write_neuron_page``; no network), placed in a sandboxed ``<iframe srcdoc>``: its scripts and
element ids live in their own document, so several pages in one notebook never clash, and
nothing it holds can reach the notebook. bertviz (Vig 2019) takes a tuple with one tensor per
layer, each (batch, heads, T, T).

Legend: L layers, H heads, Tq queries, Tk keys, T tokens (self-attention).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .._checks import as_stack
from .weights_file import AttentionRecord

if TYPE_CHECKING:
    from .neuron import NeuronView


def iframe(page: str, height: int) -> str:
    """A self-contained HTML page as an iframe of its own document: ``sandbox="allow-scripts"``
    lets the page's script run but, without allow-same-origin, never reach the notebook; the
    page sits escaped in ``srcdoc``, so nothing in it (a token included) is markup here."""
    return (
        f'<iframe sandbox="allow-scripts" style="width:100%;height:{height}px;border:0" '
        f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )


@dataclass(frozen=True)
class Inline:
    """A page for a notebook: ``html()`` the page, rendered inline by ``_repr_html_``."""

    kind: str
    page: str
    height: int

    def html(self) -> str:
        """The self-contained page as a string."""
        return self.page

    def _repr_html_(self) -> str:
        return iframe(self.page, self.height)

    def __repr__(self) -> str:
        return f"<{self.kind}: shown inline in a notebook; .html() is the page>"


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
        return iframe(self.html(), min(900, 260 + 28 * rows))


def show_model_view(
    weights: Any,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "attention: every layer and head",
) -> Inline:
    """The model view inline: every layer × head as small maps, a click opens one with its
    tokens. Arguments as ``model_view.model_view_page``: weights (L, H, Tq, Tk) (or fewer
    leading axes) with its tokens (key_tokens None = self-attention), or a mapping
    name -> AttentionRecord. The per-layer rollout shows as one map a layer:
    ``show_model_view(attention_rollout(weights)[:, None], tokens)``."""
    from .model_view import model_view_data, model_view_page

    page = model_view_page(weights, query_tokens, key_tokens, title=title)
    sections = model_view_data(weights, query_tokens, key_tokens)["sections"]
    grid = sum(50 + 96 * len(s["weights"]) for s in sections)  # a header, 88 px maps a layer
    longest = max(max(len(s["queries"]), len(s["keys"])) for s in sections)
    return Inline("model view", page, min(1400, 240 + grid + 24 * longest))


def show_neuron(view: NeuronView, title: str | None = None) -> Inline:
    """The neuron view inline: for ``neuron.neuron_view(...)``'s query, each key's side, the
    elementwise terms, the score and the weight (the page of ``neuron.neuron_page``)."""
    from .neuron import neuron_page

    page = neuron_page(view, title)
    return Inline("neuron view", page, min(900, 160 + 24 * len(view.key_tokens)))


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


__all__ = [
    "Inline",
    "Shown",
    "from_bertviz",
    "iframe",
    "show_model_view",
    "show_neuron",
    "to_bertviz",
]
