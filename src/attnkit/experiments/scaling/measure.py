"""What the scaling experiment measures: how peaked the softmax of dot-product scores is, and
how much gradient flows back through it, with and without the 1/√d_k of Vaswani et al. (2017,
eq. 1 and Sec. 3.2.1).

For one row of scores s_j = score(q, k_j) over the allowed keys j:

    p = softmax(s),  H = -Σ_j p_j log p_j  (nats; H / log Tk ∈ [0, 1] is 1 for uniform p)
    L = Σ_j p_j g_j  with a fixed upstream g ~ N(0, 1): the backward of an attention output
        c = Σ_j p_j v_j, where g_j = v_jᵀ ∂L/∂c
    ∂L/∂s = p ⊙ (g - pᵀg)  (the softmax Jacobian; → 0 as p → one-hot)
    ∂L/∂q = Σ_j (∂L/∂s_j) ∂s_j/∂q = Σ_j (∂L/∂s_j) k_j (· 1/√d_k when scaled)

Footnote 4 of the paper: with q, k of d_k independent unit-variance components, qᵀk has
variance d_k, so unscaled scores spread as √d_k and the softmax saturates; qᵀk/√d_k keeps unit
variance. Everything here is computed in float64 with attnkit's score functions
(``dot_score``, ``scaled_dot_score``) and ``masked_softmax``.

Legend: N rows of heads × batch, Tq queries, Tk keys, D = d_k, B batch, H heads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from einops import rearrange
from torch import Tensor

from ...stages.normalisers import masked_softmax
from ...stages.scores import dot_score, scaled_dot_score

ScoreFn = Callable[[Tensor, Tensor], Tensor]
SCORES: dict[str, ScoreFn] = {"dot": dot_score, "scaled_dot": scaled_dot_score}


@dataclass
class Rows:
    """Per-row measurements of the rows that count (at least two allowed keys)."""

    entropy: Tensor  # (R,) nats
    entropy_frac: Tensor  # (R,) H / log(allowed keys)
    grad_scores: Tensor  # (R,) ‖∂L/∂s‖
    grad_queries: Tensor  # (R,) ‖∂L/∂q‖
    max_weight: Tensor  # (R,) max_j p_j
    scores: Tensor  # (E,) every allowed score of those rows


def row_stats(
    query: Tensor,
    keys: Tensor,
    score: ScoreFn,
    upstream: Tensor,
    mask: Tensor | None = None,
    rows: Tensor | None = None,
) -> Rows:
    """query (N, Tq, D), keys (N, Tk, D), upstream g (N, Tq, Tk); mask (N, 1|Tq, Tk) True = may
    attend; rows (N, Tq) True = count this query. Returns the rows' entropies and gradient
    norms (see the module docstring)."""
    q = query.detach().to(torch.float64).requires_grad_(True)  # (N, Tq, D)
    k = keys.detach().to(torch.float64)  # (N, Tk, D)
    s = score(q, k)  # (N, Tq, Tk)
    s.retain_grad()
    allowed = torch.ones_like(s, dtype=torch.bool) if mask is None else mask.expand_as(s)
    p = masked_softmax(s, allowed)  # (N, Tq, Tk)
    (p * upstream.to(p.dtype)).sum().backward()
    assert s.grad is not None and q.grad is not None
    n_keys = allowed.sum(-1)  # (N, Tq)
    keep = n_keys > 1
    if rows is not None:
        keep = keep & rows
    entropy = -torch.special.xlogy(p, p).sum(-1)  # (N, Tq)
    frac = entropy / n_keys.clamp_min(2).to(p.dtype).log()  # (N, Tq)
    return Rows(
        entropy=entropy[keep].detach(),
        entropy_frac=frac[keep].detach(),
        grad_scores=s.grad.norm(dim=-1)[keep],  # (R,)
        grad_queries=q.grad.norm(dim=-1)[keep],  # (R,)
        max_weight=p.amax(-1)[keep].detach(),
        scores=s.detach()[keep[..., None].expand_as(s) & allowed],  # (E,)
    )


def summarise(parts: Sequence[Rows]) -> dict[str, float]:
    """Means (and medians of the gradient norms) over all rows of ``parts``."""
    cat = {f: torch.cat([getattr(r, f) for r in parts]) for f in Rows.__dataclass_fields__}
    if cat["entropy"].numel() == 0:
        raise ValueError("no row with two or more allowed keys to measure")
    return {
        "entropy": float(cat["entropy"].mean()),
        "entropy_frac": float(cat["entropy_frac"].mean()),
        "grad_scores_mean": float(cat["grad_scores"].mean()),
        "grad_scores_median": float(cat["grad_scores"].median()),
        "grad_queries_mean": float(cat["grad_queries"].mean()),
        "grad_queries_median": float(cat["grad_queries"].median()),
        "max_weight": float(cat["max_weight"].mean()),
        "score_std": float(cat["scores"].std()),
        "rows": int(cat["entropy"].numel()),
    }


def random_case(
    d_k: int, rows: int, keys: int, queries: int, seed: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The paper's footnote 4 setting: q, k with independent N(0, 1) components, and a fixed
    upstream gradient g ~ N(0, 1). -> q (N, Tq, D), k (N, Tk, D), g (N, Tq, Tk) with
    N = ceil(rows / queries)."""
    g = torch.Generator().manual_seed(seed)
    n = math.ceil(rows / queries)
    q = torch.randn(n, queries, d_k, generator=g, dtype=torch.float64)  # (N, Tq, D)
    k = torch.randn(n, keys, d_k, generator=g, dtype=torch.float64)  # (N, Tk, D)
    up = torch.randn(n, queries, keys, generator=g, dtype=torch.float64)  # (N, Tq, Tk)
    return q, k, up


def random_stats(d_k: int, rows: int, keys: int, queries: int, seed: int) -> dict[str, dict]:
    """Both scores on the same random q, k and g: {"dot": summary, "scaled_dot": summary}."""
    q, k, up = random_case(d_k, rows, keys, queries, seed)
    return {name: summarise([row_stats(q, k, fn, up)]) for name, fn in SCORES.items()}


@dataclass
class Captured:
    """One attention module's per-head queries and keys on a batch, with which keys each
    query may attend and which query rows are real tokens."""

    query: Tensor  # (B·H, Tq, D)
    keys: Tensor  # (B·H, Tk, D)
    mask: Tensor  # (B·H, 1, Tk) True = may attend
    rows: Tensor  # (B·H, Tq) True = a real token


def capture(model: torch.nn.Module, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> list[Captured]:
    """The per-head q = W_q x and k = W_k m of every encoder self-attention and decoder cross-
    attention of an attnkit Transformer on one batch (decoder self-attention is left out: its
    causal rows have 1..T keys). src (B, S), src_len (B,), tgt_in (B, T) padded with 0."""
    modules = [(layer.attn, "enc") for layer in model.enc]  # type: ignore[union-attr]
    modules += [(layer.cross_attn, "dec") for layer in model.dec]  # type: ignore[union-attr]
    seen: dict[tuple[int, str], Tensor] = {}
    hooks = []
    for i, (attn, _) in enumerate(modules):
        for part in ("q_proj", "k_proj"):

            def keep(_m: object, _inp: object, out: Tensor, key: tuple = (i, part)) -> None:
                seen[key] = out.detach()  # (B, T, H·D)

            hooks.append(getattr(attn, part).register_forward_hook(keep))
    try:
        with torch.no_grad():
            model.eval()
            model(src, src_len, tgt_in)
    finally:
        for h in hooks:
            h.remove()
    src_ok = torch.arange(src.shape[1])[None, :] < src_len[:, None]  # (B, S)
    out = []
    for i, (attn, side) in enumerate(modules):
        h = attn.heads
        q = rearrange(seen[(i, "q_proj")], "b t (h d) -> (b h) t d", h=h)  # (B·H, Tq, D)
        k = rearrange(seen[(i, "k_proj")], "b t (h d) -> (b h) t d", h=h)  # (B·H, Tk, D)
        mask = src_ok.repeat_interleave(h, dim=0)[:, None, :]  # (B·H, 1, S)
        real = src_ok if side == "enc" else tgt_in != 0  # (B, Tq)
        out.append(Captured(q, k, mask, real.repeat_interleave(h, dim=0)))  # (B·H, Tq)
    return out


def trained_stats(captured: Sequence[Captured], seed: int) -> dict[str, dict]:
    """Both scores on a trained model's captured q, k (all modules and heads pooled), with a
    fixed upstream g ~ N(0, 1): {"dot": summary, "scaled_dot": summary}."""
    g = torch.Generator().manual_seed(seed)
    ups = [
        torch.randn(c.query.shape[0], c.query.shape[1], c.keys.shape[1], generator=g,
                    dtype=torch.float64)  # (N, Tq, Tk)
        for c in captured
    ]  # fmt: skip
    return {
        name: summarise(
            [
                row_stats(c.query, c.keys, fn, up, c.mask, c.rows)
                for c, up in zip(captured, ups, strict=True)
            ]
        )
        for name, fn in SCORES.items()
    }


__all__ = [
    "SCORES",
    "Captured",
    "Rows",
    "capture",
    "random_case",
    "random_stats",
    "row_stats",
    "summarise",
    "trained_stats",
]
