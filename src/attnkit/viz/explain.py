"""One attention computation, step by step, as the textbooks draw it (Bahdanau et al. 2015,
§3.1; Luong et al. 2015, §3):

    (0) encoder hidden states h_1 … h_S, and the decoder state h_t that asks; with
        ``encoder="birnn"`` each h_j = [→h_j ; ←h_j], the forward and backward halves of a
        bidirectional RNN (Bahdanau 2015, §3.2)
    (1) a score e_j = score(h_t, h_j) for every encoder state
    (2) weights a = normaliser(e) over the keys the alignment allows (× a prior for local-p)
    (3) every state multiplied by its weight: a_j · h_j
    (4) their sum, the context vector c_t = Σ_j a_j h_j
    (5) fed to the decoder: h̃_t = tanh(W_c [c_t; h_t])  (Luong 2015, eq. 5), or with
        ``decoder="bahdanau"`` the next state s_t = f(s_{t-1}, y_{t-1}, c_t) (Bahdanau 2015,
        eq. 4), the query h_t then being s_{t-1}

``explain_steps`` computes these numbers for a small seeded example through the library
itself (``attnkit.registry`` + ``attnkit.attend``); explain_render.py prints and draws them.

The BiRNN and f are plain tanh RNN cells with seeded one-decimal weights (Bahdanau used gated
units; the cell does not change the step being shown):

    →h_j = tanh(W_f x_j + U_f →h_{j-1}),  ←h_j = tanh(W_b x_j + U_b ←h_{j+1})   (width D/2 each)
    s_t = tanh(W_y y_{t-1} + U_s s_{t-1} + C_s c_t)

Legend: S source length (keys), D width of the states.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core import attend
from ..registry import VARIANTS, build_alignment, build_normaliser, build_score, window_or_stride


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
    encoder_kind: str = "random"
    decoder_kind: str = "luong"
    embeddings: Tensor | None = None  # (S, D) the source embeddings x_j (birnn)
    prev_output: Tensor | None = None  # (D,) y_{t-1}'s embedding (bahdanau)
    next_state: Tensor | None = None  # (D,) s_t = f(s_{t-1}, y_{t-1}, c_t) (bahdanau)
    recurrence: tuple[Tensor, Tensor, Tensor] | None = None  # W_y, U_s, C_s (D, D) (bahdanau)
    stride: int | None = None  # the Sparse Transformer pattern's stride l

    @property
    def attentional_formula(self) -> str:
        if self.decoder_kind == "bahdanau":
            return "s_t = tanh(W_y y_{t-1} + U_s s_{t-1} + C_s c_t)   (Bahdanau 2015, eq. 4)"
        return "h̃_t = tanh(W_c [c_t; h_t])   (Luong 2015, eq. 5);  p(y_t) = softmax(W_s h̃_t)"


def _formula(name: str) -> str:
    return next((v.formula for v in VARIANTS if v.name == name), "")


def _rounded(shape: tuple[int, ...], gen: torch.Generator) -> Tensor:
    """Small numbers with one decimal, easy to follow by hand."""
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * 10).round() / 10


ENCODERS = ("random", "birnn")
DECODERS = ("luong", "bahdanau")


def birnn_states(x: Tensor, w_f: Tensor, u_f: Tensor, w_b: Tensor, u_b: Tensor) -> Tensor:
    """[→h_j ; ←h_j] of a bidirectional tanh RNN over x (S, D_in): → reads j = 1 … S, ←
    reads S … 1, both from a zero state. w_* (H, D_in), u_* (H, H); returns (S, 2H)."""
    seq, width = x.shape[0], w_f.shape[0]
    fwd, bwd = x.new_zeros(seq, width), x.new_zeros(seq, width)
    h = x.new_zeros(width)
    for j in range(seq):
        h = torch.tanh(w_f @ x[j] + u_f @ h)
        fwd[j] = h
    h = x.new_zeros(width)
    for j in reversed(range(seq)):
        h = torch.tanh(w_b @ x[j] + u_b @ h)
        bwd[j] = h
    return torch.cat([fwd, bwd], dim=-1)  # (S, 2H)


def explain_steps(
    score: str = "dot",
    align: str = "global",
    normaliser: str = "softmax",
    *,
    src_tokens: Sequence[str] = ("the", "cat", "sat", "on", "the", "mat"),
    dim: int = 4,
    window: int | None = None,
    stride: int | None = None,
    temperature: float = 1.0,
    target_step: int = 2,
    seed: int = 0,
    encoder: str = "random",
    decoder: str = "luong",
) -> ExplainSteps:
    """The seeded example: S = len(src_tokens) encoder states of width ``dim``, decoder states
    for target steps 0 … ``target_step`` (local-m centres its window on p_t = t), the last one
    asking. Score, alignment and normaliser come from their registry names (``window`` for the
    local and sliding alignments, ``stride`` for the Sparse Transformer's). ``encoder``:
    "random" (seeded numbers) or "birnn" (a bidirectional RNN over seeded embeddings; ``dim``
    even); ``decoder``: "luong" (step 5 is the attentional state h̃_t) or "bahdanau" (step 5
    is the next RNN state s_t)."""
    tokens = [str(t) for t in src_tokens]
    if not tokens:
        raise ValueError("src_tokens is empty; pass at least one source token")
    if dim < 1 or target_step < 0:
        raise ValueError(f"need dim >= 1 and target_step >= 0; got dim={dim}, t={target_step}")
    if encoder not in ENCODERS or decoder not in DECODERS:
        raise ValueError(f"encoder {encoder!r}, decoder {decoder!r}; choose an encoder from "
                         f"{ENCODERS} and a decoder from {DECODERS}")  # fmt: skip
    if encoder == "birnn" and dim % 2:
        raise ValueError(f"dim={dim}: the BiRNN's states are two halves; give an even dim")
    torch.manual_seed(seed)  # the score's and the alignment's parameters
    score_fn = build_score(score, dim, hidden=dim, max_keys=len(tokens)).double()
    window, stride = window_or_stride(align, window, stride)
    align_fn = build_alignment(align, dim, window, stride=stride).double()
    norm_fn = build_normaliser(normaliser, temperature)
    gen = torch.Generator().manual_seed(seed)
    states = _rounded((len(tokens), dim), gen)  # (S, D)
    queries = _rounded((target_step + 1, dim), gen)  # (t+1, D): h_0 … h_t
    w_c = _rounded((dim, 2 * dim), gen) / 2  # (D, 2D)
    embeddings = None
    if encoder == "birnn":  # drawn after the above, so "random" keeps its numbers
        embeddings = states  # (S, D) the x_j
        half = dim // 2
        w_f, w_b = (_rounded((half, dim), gen) / 2 for _ in range(2))  # (D/2, D)
        u_f, u_b = (_rounded((half, half), gen) / 2 for _ in range(2))  # (D/2, D/2)
        states = birnn_states(embeddings, w_f, u_f, w_b, u_b)  # (S, D)

    with torch.no_grad():
        res = attend(queries, states, states, score=score_fn, align=align_fn, normaliser=norm_fn)
        spec = align_fn(queries, states, None)
        allowed = torch.ones(len(tokens), dtype=torch.bool) if spec.mask is None else spec.mask
        allowed = allowed.expand(target_step + 1, len(tokens))[target_step]  # (S,)
        assert res.weights is not None and res.scores is not None
        weights = res.weights[target_step]  # (S,)
        normalised = norm_fn(res.scores, spec.mask)[target_step]  # (S,) before any prior
        prior = None if spec.prior is None else spec.prior[target_step]
        context = res.context[target_step]  # (D,)
        weighted = weights[:, None] * states  # (S, D)
        h_t = queries[target_step]  # (D,)
        attentional = torch.tanh(w_c @ torch.cat([context, h_t]))  # (D,)
        prev_output = next_state = recurrence = None
        if decoder == "bahdanau":  # h_t plays s_{t-1}, the state that asks
            prev_output = _rounded((dim,), gen)  # (D,) y_{t-1}'s embedding
            w_y, u_s, c_s = (_rounded((dim, dim), gen) / 2 for _ in range(3))  # (D, D) each
            next_state = torch.tanh(w_y @ prev_output + u_s @ h_t + c_s @ context)  # (D,)
            recurrence = (w_y, u_s, c_s)
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
        encoder=states,
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
        attentional=attentional if next_state is None else next_state,
        encoder_kind=encoder,
        decoder_kind=decoder,
        embeddings=embeddings,
        prev_output=prev_output,
        next_state=next_state,
        recurrence=recurrence,
        stride=stride,
    )


__all__ = ["DECODERS", "ENCODERS", "ExplainSteps", "birnn_states", "explain_steps"]
