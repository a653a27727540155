"""Bahdanau's additive score in chunks, with its own backward pass.

    e_ij = vᵀ tanh(W₁ s_i + W₂ h_j + b)            (Bahdanau 2015, eq. 6 and App. A.1.2)

The (..., Tq, Tk, A) hidden tensor H = tanh(wq_i + wk_j) is built one (q_chunk, k_chunk)
block at a time and never kept: the backward pass rebuilds each block in place and reads it
for every gradient,

    dv = Σ_ij de_ij H_ij,   G_ij = de_ij v ⊙ (1 - H_ij²),   dwq_i = Σ_j G_ij,   dwk_j = Σ_i G_ij

(G summed as v ⊙ (Σ de - Σ de H²)), so each block costs two passes to build (add, tanh) and
five to differentiate (de·H, square, times de, two sums), in place,
with one block-sized buffer: less traffic than autograd through ``checkpoint`` (which keeps
the add, the tanh output and their gradients as separate tensors) at a fixed memory.

Legend: wq (..., Tq, A) projected queries, wk (..., Tk, A) projected keys (+ bias), v (A,),
de (..., Tq, Tk) the incoming gradient of the scores.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def _block(wq: Tensor, wk: Tensor) -> Tensor:
    """H = tanh(wq_i + wk_j): (..., tq, A), (..., tk, A) -> (..., tq, tk, A), one buffer."""
    return torch.add(wq[..., :, None, :], wk[..., None, :, :]).tanh_()


class AdditiveChunks(torch.autograd.Function):
    """(wq (..., Tq, A), wk (..., Tk, A) of the same leading shape, v (A,), q_chunk, k_chunk)
    -> scores (..., Tq, Tk)."""

    @staticmethod
    def forward(ctx: Any, wq: Tensor, wk: Tensor, v: Tensor, qc: int, kc: int) -> Tensor:
        tq, tk = wq.shape[-2], wk.shape[-2]
        out = wq.new_empty(*wq.shape[:-2], tq, tk)  # (..., Tq, Tk)
        for qs in range(0, tq, qc):
            for ks in range(0, tk, kc):
                h = _block(wq[..., qs : qs + qc, :], wk[..., ks : ks + kc, :])
                out[..., qs : qs + qc, ks : ks + kc] = h @ v  # (..., tq, tk)
        ctx.save_for_backward(wq, wk, v)
        ctx.chunks = (qc, kc)
        return out

    @staticmethod
    def backward(ctx: Any, de: Tensor) -> tuple[Tensor | None, ...]:
        wq, wk, v = ctx.saved_tensors
        qc, kc = ctx.chunks
        tq, tk = wq.shape[-2], wk.shape[-2]
        dwq, dwk = torch.zeros_like(wq), torch.zeros_like(wk)
        dv = torch.zeros_like(v)
        for qs in range(0, tq, qc):
            for ks in range(0, tk, kc):
                h = _block(wq[..., qs : qs + qc, :], wk[..., ks : ks + kc, :])  # (.., tq, tk, A)
                g = de[..., qs : qs + qc, ks : ks + kc, None]  # (..., tq, tk, 1)
                dv += (g.reshape(1, -1) @ h.reshape(-1, h.shape[-1]))[0]  # Σ de H
                h.square_().mul_(g)  # de H²; G = v ⊙ (de - de H²)
                gq, gk = g.sum(-2), g.sum(-3)  # (..., tq, 1), (..., tk, 1) Σ de
                dwq[..., qs : qs + qc, :] += (gq - h.sum(-2)) * v
                dwk[..., ks : ks + kc, :] += (gk - h.sum(-3)) * v
        return dwq, dwk, dv, None, None


__all__ = ["AdditiveChunks"]
