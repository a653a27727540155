"""What ``attnkit experiment explanation`` measures on a trained ``BiRNNAttention``, per test
example (Jain & Wallace 2019, Algorithm 1 and §4.2), with ŷ = p(class 1), the output
probability:

    gradient   g_t = |(∂ŷ/∂e_t) · e_t|, the graph cut at α (no gradient flows through the
               attention): the gradient with respect to the one-hot input x_t, which is
               (∂ŷ/∂e_t) · E[x_t]
    LOO        Δ_t = |ŷ(x with token t removed) − ŷ(x)|   (total variation of two classes)
    agreement  Kendall τ_b over the example's n real tokens, of (α, g), (α, Δ) and (g, Δ)
    adversary  the ε-max JSD: K attention distributions α̃ sought by Adam on their logits,
               maximising Σ_k JSD(α̃_k, α) + mean_{k≠l} JSD(α̃_k, α̃_l) − 500 Σ_k
               relu(|ŷ(α̃_k) − ŷ(α)| − ε), the states h fixed; the largest JSD(α̃_k, α) among
               the α̃_k with |ŷ(α̃_k) − ŷ(α)| ≤ ε (0 when none is)
    top hit    whether the position of the largest α, g or Δ holds a deciding token

    JSD(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M), M = ½ (P + Q), natural log (at most ln 2).

Legend: N examples, T length, K adversaries, D state width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .models import BiRNNAttention, uniform_weights

LN2 = math.log(2.0)


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's τ_b of two score vectors of one example (ties counted as in τ_b):
    (C − D) / √((n₀ − n_a)(n₀ − n_b)), C and D the concordant and discordant pairs, n₀ all
    pairs, n_a and n_b the pairs tied in a and in b; NaN when either vector is constant."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"two score vectors of one length, got shapes {a.shape}, {b.shape}")
    i, j = np.triu_indices(len(a), k=1)
    sa, sb = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    n0 = len(i)
    tied_a, tied_b = int((sa == 0).sum()), int((sb == 0).sum())
    denom = math.sqrt((n0 - tied_a) * (n0 - tied_b))
    return float((sa * sb).sum() / denom) if denom > 0 else math.nan


def jsd(p: Tensor, q: Tensor) -> Tensor:
    """Jensen-Shannon divergence of distributions over the last axis, natural log:
    p, q (..., T) -> (...,); 0·log 0 = 0."""
    m = 0.5 * (p + q)

    def kl(x: Tensor) -> Tensor:
        return torch.where(x > 0, x * (torch.log(x.clamp(min=1e-30)) -
                                       torch.log(m.clamp(min=1e-30))), 0.0).sum(-1)  # fmt: skip

    return (0.5 * kl(p) + 0.5 * kl(q)).clamp(min=0.0)


def prob1(logits: Tensor) -> Tensor:
    """ŷ = p(class 1) of logits (..., 2) -> (...,)."""
    return torch.softmax(logits, dim=-1)[..., 1]


@dataclass
class Importance:
    """Per example of a batch: α, g, Δ (N, T), zero at padding; ŷ (N,); mask (N, T)."""

    attention: Tensor
    gradient: Tensor
    loo: Tensor
    prob: Tensor
    mask: Tensor


def gradient_importance(model: BiRNNAttention, ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(α (N, T), g (N, T), ŷ (N,)) of the module docstring; the examples do not interact, so
    one backward pass of Σ ŷ gives each example's gradient."""
    model.eval()
    mask = ids != 0  # (N, T)
    e = model.embed(ids).detach().requires_grad_(True)  # (N, T, E)
    fwd = model.run(e, mask, detach_weights=True)
    p = prob1(fwd.logits)  # (N,)
    (grad,) = torch.autograd.grad(p.sum(), e)  # (N, T, E)
    g = (grad * e).sum(-1).abs() * mask  # (N, T)
    return fwd.weights.detach(), g.detach(), p.detach()


@torch.no_grad()
def loo_importance(model: BiRNNAttention, ids: Tensor, chunk: int = 4096) -> Tensor:
    """Δ (N, T): |ŷ(x₋ₜ) − ŷ(x)| for every real position t of every example, zero at
    padding; the N·T shortened sequences run in chunks of ``chunk``."""
    model.eval()
    n, t = ids.shape
    lengths = (ids != 0).sum(-1)  # (N,)
    base = prob1(model(ids))  # (N,)
    rows, cols = torch.nonzero(ids != 0, as_tuple=True)  # (M,) each: example, removed position
    keep = torch.ones(len(rows), t, dtype=torch.bool)  # (M, T)
    keep[torch.arange(len(rows)), cols] = False
    src = ids[rows]  # (M, T)
    # drop the removed position: stable sort puts the kept positions first, in order
    order = torch.argsort((~keep).int(), dim=1, stable=True)  # (M, T)
    shortened = torch.gather(src, 1, order)[:, : t - 1]  # (M, T-1)
    out = torch.zeros(n, t, dtype=base.dtype)
    for s in range(0, len(rows), chunk):
        piece = shortened[s : s + chunk]
        width = int((piece != 0).sum(-1).max().clamp(min=1))
        p = prob1(model(piece[:, :width]))  # (chunk,)
        out[rows[s : s + chunk], cols[s : s + chunk]] = (p - base[rows[s : s + chunk]]).abs()
    # a one-token example has nothing left after removal: its LOO is not defined
    out[lengths <= 1] = 0.0
    return out


def importance(model: BiRNNAttention, ids: Tensor) -> Importance:
    alpha, g, p = gradient_importance(model, ids)
    return Importance(alpha, g, loo_importance(model, ids), p, ids != 0)


def agreement(imp: Importance) -> dict[str, list[float]]:
    """Per example, Kendall τ_b of (α, g), (α, Δ), (g, Δ) over its real tokens; NaN where a
    vector is constant."""
    out: dict[str, list[float]] = {"attn_grad": [], "attn_loo": [], "grad_loo": []}
    a, g, d = (x.double().numpy() for x in (imp.attention, imp.gradient, imp.loo))
    for i, m in enumerate(imp.mask.numpy()):
        out["attn_grad"].append(kendall_tau(a[i][m], g[i][m]))
        out["attn_loo"].append(kendall_tau(a[i][m], d[i][m]))
        out["grad_loo"].append(kendall_tau(g[i][m], d[i][m]))
    return out


def top_hits(imp: Importance, deciding: Tensor) -> dict[str, list[bool]]:
    """Per example, whether the top position of α, g and Δ holds a deciding token; and the
    share of deciding tokens among the real ones (a random pick's hit rate)."""
    out: dict[str, list[bool]] = {}
    for name, score in (("attention", imp.attention), ("gradient", imp.gradient),
                        ("loo", imp.loo)):  # fmt: skip
        top = score.masked_fill(~imp.mask, -1.0).argmax(-1)  # (N,)
        out[name] = deciding.gather(1, top[:, None])[:, 0].tolist()
    return out


def chance_hits(deciding: Tensor, mask: Tensor) -> list[float]:
    """Per example, the share of its real tokens that decide the label."""
    return (deciding.sum(-1) / mask.sum(-1).clamp(min=1)).tolist()


@dataclass(frozen=True)
class Adversary:
    """Jain & Wallace's search (§4.2; their code: K = 5, Adam at lr 0.01 for 500 steps from
    log-uniform logits plus N(0, 3²) noise, penalty 500 on the excess over ε)."""

    epsilon: float = 0.01
    k: int = 5
    steps: int = 500
    lr: float = 0.01
    penalty: float = 500.0


def adversarial_jsd(model: BiRNNAttention, ids: Tensor, adv: Adversary, seed: int
                    ) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Per example (N,): the ε-max JSD of the module docstring, and whether some α̃ kept ŷ
    within ε. The output layer is linear, so ŷ(α̃) = softmax(Σ_t α̃_t z_t + b_o) with
    z_t = W_o h_t computed once."""
    model.eval()
    mask = ids != 0  # (N, T)
    with torch.no_grad():
        fwd = model.run(model.embed(ids), mask)
        z = fwd.states @ model.out.weight.T  # (N, T, 2)
        alpha = fwd.weights  # (N, T)
        p0 = prob1(fwd.logits)  # (N,)
    bias = model.out.bias.detach()
    gen = torch.Generator().manual_seed(seed)
    start = torch.log(uniform_weights(mask).to(z.dtype).clamp(min=1e-30))  # (N, T)
    noise = torch.randn(len(ids), adv.k, ids.shape[1], generator=gen, dtype=z.dtype)
    logits = start[:, None, :] + 3.0 * noise  # (N, K, T)
    logits.requires_grad_(True)
    opt = torch.optim.Adam([logits], lr=adv.lr, amsgrad=True)
    m = mask[:, None, :]  # (N, 1, T)

    def candidates() -> tuple[Tensor, Tensor]:
        a = torch.softmax(logits.masked_fill(~m, -math.inf), dim=-1)  # (N, K, T)
        p = prob1(torch.einsum("nkt,ntc->nkc", a, z) + bias)  # (N, K)
        return a, p

    with torch.enable_grad():
        for _ in range(adv.steps):
            a, p = candidates()
            away = jsd(a, alpha[:, None, :])  # (N, K)
            excess = F.relu((p - p0[:, None]).abs() - adv.epsilon)  # (N, K)
            cross = jsd(a[:, :, None, :], a[:, None, :, :])  # (N, K, K)
            spread = cross.sum((1, 2)) / max(adv.k * (adv.k - 1), 1)  # (N,)
            loss = (-away + adv.penalty * excess).sum() - spread.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        a, p = candidates()
        within = (p - p0[:, None]).abs() <= adv.epsilon  # (N, K)
        away = jsd(a, alpha[:, None, :]) * within  # (N, K)
        return away.max(-1).values, within.any(-1)


__all__ = ["Adversary", "Importance", "LN2", "adversarial_jsd", "agreement", "chance_hits",
           "gradient_importance", "importance", "jsd", "kendall_tau", "loo_importance",
           "prob1", "top_hits"]  # fmt: skip
