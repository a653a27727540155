"""The neuron view: *why* one head attends where it does, for one query. Every score attnkit
has is a sum over one axis of elementwise terms, so the view shows, for each key, the query's
side, the key's side, their elementwise product (the terms) and its sum (the score), then the
normalised weight (bertviz's neuron view, generalised past the dot product):

    dot          e_j = Σ_d q_d · k_jd                       terms q ∘ k_j
    scaled_dot   e_j = Σ_d (q_d / √D) · k_jd                terms (q / √D) ∘ k_j
    general      e_j = Σ_d (W_aᵀ q)_d · k_jd                terms (qᵀ W_a) ∘ k_j   (Luong 2015)
    additive     e_j = Σ_a v_a · tanh(W₁q + W₂k_j + b)_a    terms v ∘ tanh(…)      (Bahdanau 2015)
    location     e_j = Σ_d q_d · W_a[j]_d                   terms q ∘ W_a[j]       (Luong 2015)
    cosine       e_j = Σ_d (β q/‖q‖)_d · (k_j/‖k_j‖)_d      terms β q̂ ∘ k̂_j      (Graves 2014)

``neuron_view`` computes these through the score module's own parameters (a test checks that
the terms sum to the module's scores); ``write_neuron_page`` draws them as a self-contained
page (tokens as text, no network).

Legend: S keys, D query/key width, E the width the terms run over (D, or the additive
score's hidden width A).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..stages.scores import (
    AdditiveScore,
    CosineScore,
    DotScore,
    GeneralScore,
    LocationScore,
    ScaledDotScore,
    Score,
)
from ._html import write_html
from ._page_fonts import page_font_css
from .page import CSP, embed_json

__all__ = ["NeuronView", "neuron_page", "neuron_view", "write_neuron_page"]


@dataclass
class NeuronView:
    """One query against its keys, float64. left (E,) the query's side as the score uses it,
    right (S, E) each key's side, terms (S, E) = left ∘ right_j, scores (S,) = terms summed,
    weights (S,) = the normaliser of the scores."""

    score: str
    formula: str
    left_name: str
    right_name: str
    query_token: str
    key_tokens: list[str]
    left: Tensor
    right: Tensor
    terms: Tensor
    scores: Tensor
    weights: Tensor


def _sides(score: Score, q: Tensor, keys: Tensor) -> tuple[Tensor, Tensor, str, str]:
    """(left (E,), right (S, E), left name, right name) with Σ_E left ∘ right_j = e_j."""
    s = keys.shape[0]
    if isinstance(score, ScaledDotScore):
        scale = 1.0 / math.sqrt(keys.shape[-1]) if score.scale is None else score.scale
        return q * scale, keys, "q · scale", "k_j"
    if isinstance(score, DotScore):
        return q, keys, "q", "k_j"
    if isinstance(score, GeneralScore):
        return q @ score.weight.double(), keys, "qᵀ W_a", "k_j"  # (Dk,)
    if isinstance(score, AdditiveScore):
        pre = score.w_query.double() @ q + keys @ score.w_keys.double().T  # (S, A)
        if score.bias is not None:
            pre = pre + score.bias.double()
        return score.v.double(), torch.tanh(pre), "v", "tanh(W₁q + W₂k_j + b)"
    if isinstance(score, LocationScore):
        if s > score.weight.shape[0]:
            raise ValueError(
                f"location score was built for at most {score.weight.shape[0]} keys, got {s}"
            )
        return q, score.weight.double()[:s], "q", "W_a[j]"  # (S, D)
    if isinstance(score, CosineScore):
        qn = q / q.norm().clamp_min(1e-8)  # (D,)
        kn = keys / keys.norm(dim=-1, keepdim=True).clamp_min(1e-8)  # (S, D)
        return score.scale * qn, kn, "β q/‖q‖", "k_j/‖k_j‖"
    raise ValueError(
        f"{type(score).__name__}: the neuron view knows the dot, scaled_dot, general, additive, "
        "location and cosine scores; pass one of those"
    )


def neuron_view(
    score: Score,
    query: Tensor,
    keys: Tensor,
    key_tokens: Sequence[str],
    *,
    query_token: str = "query",
    normaliser: Callable[[Tensor], Tensor] | None = None,
) -> NeuronView:
    """The terms of ``score`` for one query (D,) against keys (S, D); weights are
    ``normaliser(scores)`` (softmax by default). Computed in float64."""
    if query.dim() != 1 or keys.dim() != 2:
        raise ValueError(
            f"query {tuple(query.shape)} and keys {tuple(keys.shape)}: pass one query (D,) "
            "and its keys (S, D), e.g. one head's q[b, h, i] and k[b, h]"
        )
    tokens = [str(t) for t in key_tokens]
    if len(tokens) != keys.shape[0]:
        raise ValueError(f"{len(tokens)} key tokens for {keys.shape[0]} keys: pass one per key")
    q, k = query.detach().double(), keys.detach().double()
    with torch.no_grad():
        left, right, left_name, right_name = _sides(score, q, k)
        terms = left * right  # (S, E)
        scores = terms.sum(-1)  # (S,)
        weights = (normaliser or (lambda e: torch.softmax(e, -1)))(scores)  # (S,)
    return NeuronView(
        score=getattr(score, "name", type(score).__name__),
        formula=getattr(score, "formula", ""),
        left_name=left_name,
        right_name=right_name,
        query_token=str(query_token),
        key_tokens=tokens,
        left=left,
        right=right,
        terms=terms,
        scores=scores,
        weights=weights.double(),
    )


_CSS = """
body { font: 14px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; } #formula { font-family: serif; font-size: 16px; margin: 6px 0 12px; }
table { border-collapse: collapse; } td, th { padding: 1px 3px; font-size: 12px; }
td.v { width: 18px; height: 18px; border: 1px solid #eee; padding: 0; }
th.tok { text-align: right; white-space: pre; font-weight: normal; }
td.num { font-variant-numeric: tabular-nums; text-align: right; padding: 0 6px; }
td.bar div { height: 12px; background: #3b6fd6; }
td.gap { width: 14px; }
"""

_JS = r"""
const d = JSON.parse(document.getElementById("neuron-data").textContent);
document.title = d.title;
document.getElementById("title").textContent = d.title;
document.getElementById("formula").textContent = d.formula;
const big = Math.max(1e-12, ...d.right.flat().map(Math.abs), ...d.left.map(Math.abs));
const bigT = Math.max(1e-12, ...d.terms.flat().map(Math.abs));
function color(x, m) { const a = Math.min(1, Math.abs(x) / m);
  return x >= 0 ? "rgba(214,96,77," + a + ")" : "rgba(67,147,195," + a + ")"; }
function cells(tr, xs, m, cls) { xs.forEach((x, e) => { const td = document.createElement("td");
  td.className = "v " + cls; td.dataset.e = e; td.dataset.x = x; td.style.background = color(x, m);
  td.title = x.toFixed(4); tr.appendChild(td); }); }
function gap(tr) { const td = document.createElement("td"); td.className = "gap";
  tr.appendChild(td); }
const table = document.getElementById("view");
const head = document.createElement("tr");
[d.query_token, d.left_name].forEach((t, i) => { const th = document.createElement("th");
  th.className = i ? "" : "tok query"; th.textContent = t; head.appendChild(th); });
cells(head, d.left, big, "left");
table.appendChild(head);
const cap = document.createElement("tr");
["key", d.right_name, "", "terms (elementwise product)", "", "score", "weight"].forEach(t => {
  const th = document.createElement("th"); th.textContent = t; cap.appendChild(th); });
table.appendChild(cap);
d.keys.forEach((tok, j) => {
  const tr = document.createElement("tr"); tr.className = "key"; tr.dataset.j = j;
  const th = document.createElement("th"); th.className = "tok"; th.textContent = tok;
  tr.appendChild(th); gap(tr); cells(tr, d.right[j], big, "right"); gap(tr);
  cells(tr, d.terms[j], bigT, "term"); gap(tr);
  const sc = document.createElement("td"); sc.className = "num score"; sc.dataset.x = d.scores[j];
  sc.textContent = d.scores[j].toFixed(3); tr.appendChild(sc);
  const w = document.createElement("td"); w.className = "num weight"; w.dataset.x = d.weights[j];
  w.textContent = d.weights[j].toFixed(3); tr.appendChild(w);
  const bar = document.createElement("td"); bar.className = "bar";
  const div = document.createElement("div");
  div.style.width = Math.round(120 * d.weights[j]) + "px";
  bar.appendChild(div); tr.appendChild(bar);
  table.appendChild(tr); });
document.body.dataset.ready = "1";
"""


def _data(view: NeuronView, title: str | None) -> dict[str, Any]:
    return {
        "title": title or f"{view.score} score: why “{view.query_token}” attends where it does",
        "formula": view.formula,
        "query_token": view.query_token,
        "left_name": view.left_name,
        "right_name": view.right_name,
        "keys": view.key_tokens,
        "left": view.left.tolist(),
        "right": view.right.tolist(),
        "terms": view.terms.tolist(),
        "scores": view.scores.tolist(),
        "weights": view.weights.tolist(),
    }


def neuron_page(view: NeuronView, title: str | None = None) -> str:
    """The view as one self-contained HTML page: a row per key with the key's side, the
    elementwise terms (red positive, blue negative), the score and the weight."""
    payload = embed_json(_data(view, title))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        "<title>neuron view</title>\n"
        f"<style>\n{page_font_css([payload])}{_CSS}</style>\n</head>\n<body>\n"
        '<h1 id="title"></h1>\n<div id="formula"></div>\n<table id="view"></table>\n'
        f'<script type="application/json" id="neuron-data">{payload}</script>\n'
        f"<script>\n{_JS}</script>\n</body>\n</html>\n"
    )


def write_neuron_page(path: str | Path, view: NeuronView, title: str | None = None) -> Path:
    """Write ``neuron_page(view)`` to ``path`` (UTF-8) and return the path."""
    return write_html(path, neuron_page(view, title))
