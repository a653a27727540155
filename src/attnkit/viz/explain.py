"""One attention computation, step by step, as the textbooks draw it (Bahdanau et al. 2015,
§3.1; Luong et al. 2015, §3):

    (0) encoder hidden states h_1 … h_S, and the decoder state h_t that asks
    (1) a score e_j = score(h_t, h_j) for every encoder state
    (2) weights a = normaliser(e) over the keys the alignment allows (× a prior for local-p)
    (3) every state multiplied by its weight: a_j · h_j
    (4) their sum, the context vector c_t = Σ_j a_j h_j
    (5) fed to the decoder: h̃_t = tanh(W_c [c_t; h_t])  (Luong 2015, eq. 5)

``explain_steps`` computes these numbers for a small seeded example through the library
itself (``attnkit.registry`` + ``attnkit.attend``); explain_render.py prints and draws them.

Legend: S source length (keys), D width of the states.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core import attend
from ..registry import VARIANTS, build_alignment, build_normaliser, build_score


@dataclass
class ExplainSteps:
    """The numbers of every step (float64). Shapes: encoder (S, D), decoder_state (D,),
    scores (S,), allowed (S,) bool, normalised (S,) = the normaliser's output, prior (S,) or
    None, weights (S,) = normalised × prior, weighted (S, D), context (D,), w_c (D, 2D),
    attentional (D,)."""

    score: str
    align: str
    normaliser: str
    score_formula: str
    align_formula: str
    normaliser_formula: str
    src_tokens: list[str]
    target_step: int
    window: int | None
    encoder: Tensor
    decoder_state: Tensor
    scores: Tensor
    allowed: Tensor
    normalised: Tensor
    prior: Tensor | None
    position: float | None
    weights: Tensor
    weighted: Tensor
    context: Tensor
    w_c: Tensor
    attentional: Tensor


def _formula(name: str) -> str:
    return next((v.formula for v in VARIANTS if v.name == name), "")


def _rounded(shape: tuple[int, ...], gen: torch.Generator) -> Tensor:
    """Small numbers with one decimal, easy to follow by hand."""
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * 10).round() / 10


def explain_steps(
    score: str = "dot",
    align: str = "global",
    normaliser: str = "softmax",
    *,
    src_tokens: Sequence[str] = ("the", "cat", "sat", "on", "the", "mat"),
    dim: int = 4,
    window: int | None = None,
    temperature: float = 1.0,
    target_step: int = 2,
    seed: int = 0,
) -> ExplainSteps:
    """The seeded example: S = len(src_tokens) encoder states of width ``dim``, decoder states
    for target steps 0 … ``target_step`` (local-m centres its window on p_t = t), the last one
    asking. Score, alignment and normaliser come from their registry names."""
    tokens = [str(t) for t in src_tokens]
    if not tokens:
        raise ValueError("src_tokens is empty; pass at least one source token")
    if dim < 1 or target_step < 0:
        raise ValueError(f"need dim >= 1 and target_step >= 0; got dim={dim}, t={target_step}")
    torch.manual_seed(seed)  # the score's and the alignment's parameters
    score_fn = build_score(score, dim, hidden=dim, max_keys=len(tokens)).double()
    align_fn = build_alignment(align, dim, window).double()
    norm_fn = build_normaliser(normaliser, temperature)
    gen = torch.Generator().manual_seed(seed)
    encoder = _rounded((len(tokens), dim), gen)  # (S, D)
    decoder = _rounded((target_step + 1, dim), gen)  # (t+1, D): h_0 … h_t
    w_c = _rounded((dim, 2 * dim), gen) / 2  # (D, 2D)

    with torch.no_grad():
        res = attend(decoder, encoder, encoder, score=score_fn, align=align_fn, normaliser=norm_fn)
        spec = align_fn(decoder, encoder, None)
        allowed = torch.ones(len(tokens), dtype=torch.bool) if spec.mask is None else spec.mask
        allowed = allowed.expand(target_step + 1, len(tokens))[target_step]  # (S,)
        assert res.weights is not None and res.scores is not None
        weights = res.weights[target_step]  # (S,)
        normalised = norm_fn(res.scores, spec.mask)[target_step]  # (S,) before any prior
        prior = None if spec.prior is None else spec.prior[target_step]
        context = res.context[target_step]  # (D,)
        weighted = weights[:, None] * encoder  # (S, D)
        h_t = decoder[target_step]  # (D,)
        attentional = torch.tanh(w_c @ torch.cat([context, h_t]))  # (D,)
    position = res.extras.get("position")
    return ExplainSteps(
        score=score_fn.name,
        align=align,
        normaliser=normaliser,
        score_formula=score_fn.formula,
        align_formula=_formula(align),
        normaliser_formula=_formula(normaliser)
        + (f",  T = {temperature:g}" if "/T" in _formula(normaliser) else ""),
        src_tokens=tokens,
        target_step=target_step,
        window=window,
        encoder=encoder,
        decoder_state=h_t,
        scores=res.scores[target_step],
        allowed=allowed,
        normalised=normalised,
        prior=prior,
        position=None if position is None else float(position.reshape(-1)[target_step]),
        weights=weights,
        weighted=weighted,
        context=context,
        w_c=w_c,
        attentional=attentional,
    )


__all__ = ["ExplainSteps", "explain_steps"]
