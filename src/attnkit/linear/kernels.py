"""Linear attention's kernels: the reassociated form of Katharopoulos et al. 2020 on features
φ(Q), φ(K) already computed (``attnkit.stages.kernels``), with no (Tq, Tk) tensor.

Non-causal (eq. 5):  V'_i = φ(Q_i)ᵀ S / φ(Q_i)ᵀ z,     S = Σ_j φ(K_j) V_jᵀ,  z = Σ_j φ(K_j)
Causal (eq. 8-12):    V'_i = φ(Q_i)ᵀ S_i / φ(Q_i)ᵀ z_i,  S_i = Σ_{j<=i} φ(K_j) V_jᵀ,  z_i likewise

The causal sums are taken in chunks of L positions: S at each chunk's start is an exclusive
cumulative sum of the chunks' φ(K)ᵀV (..., Tk/L, M, Dv), and inside a chunk the (L, L)
lower-triangular products add the rest. Time O(n·M·Dv + n·L·(M + Dv)), memory
O(n·M·Dv / L + n·L), forward and backward (autograd through cumsum and matmuls); never
(n, n). The denominators ride along as one more value column of ones. ``linear_step`` is the
same sum one position at a time, the RNN of eq. 16-20, with the state (S, z) of O(M·Dv).

Legend: B batch, H heads, Tq queries, Tk keys, M features, Dv value width, L chunk length,
C chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

DEFAULT_CHUNK = 64
"""Positions per chunk of the causal prefix sums."""


def _ratio(out: Tensor) -> Tensor:
    """(..., T, Dv + 1), numerators then the denominator -> numerators / denominator
    (..., T, Dv); a zero denominator (every key masked) gives a zero row."""
    num, den = out[..., :-1], out[..., -1:]
    return num / den.clamp_min(torch.finfo(out.dtype).tiny)


def _with_ones(values: Tensor) -> Tensor:
    """values (..., Tk, Dv) -> [values, 1] (..., Tk, Dv + 1): the denominator as a value."""
    return torch.cat([values, values.new_ones(*values.shape[:-1], 1)], dim=-1)


def linear_attention(phi_q: Tensor, phi_k: Tensor, values: Tensor) -> Tensor:
    """Katharopoulos et al. 2020, eq. 5, non-causal: φ(Q)(φ(K)ᵀV) / φ(Q)(φ(K)ᵀ1).
    phi_q (..., Tq, M), phi_k (..., Tk, M) (a masked key's row zero), values (..., Tk, Dv)
    -> context (..., Tq, Dv)."""
    kv = phi_k.transpose(-2, -1) @ _with_ones(values)  # [S, z] (..., M, Dv + 1)
    return _ratio(phi_q @ kv)  # (..., Tq, Dv)


def causal_linear_attention(
    phi_q: Tensor, phi_k: Tensor, values: Tensor, chunk: int = DEFAULT_CHUNK
) -> Tensor:
    """Katharopoulos et al. 2020, eq. 8-12, causal: V'_i = φ(Q_i)ᵀS_i / φ(Q_i)ᵀz_i with the
    prefix sums S_i, z_i over j <= i, in chunks of ``chunk`` positions (see the module).
    phi_q (..., T, M), phi_k (..., T, M), values (..., T, Dv) -> context (..., T, Dv)."""
    if chunk < 1:
        raise ValueError(f"chunk={chunk}; give a chunk length >= 1")
    n = phi_q.shape[-2]
    vals = _with_ones(values)  # (..., T, Dv + 1)
    pad = (-n) % chunk
    if pad:  # zero features add nothing to the sums; the padded rows are dropped at the end
        phi_q, phi_k, vals = (F.pad(x, (0, 0, 0, pad)) for x in (phi_q, phi_k, vals))
    q = phi_q.unflatten(-2, (-1, chunk))  # (..., C, L, M)
    k = phi_k.unflatten(-2, (-1, chunk))  # (..., C, L, M)
    v = vals.unflatten(-2, (-1, chunk))  # (..., C, L, Dv + 1)
    kv = k.transpose(-2, -1) @ v  # each chunk's Σ φ(K_j) [V_j, 1]ᵀ (..., C, M, Dv + 1)
    before = kv.cumsum(dim=-3)  # through the chunk (..., C, M, Dv + 1)
    before = torch.cat([torch.zeros_like(before[..., :1, :, :]), before[..., :-1, :, :]],
                       dim=-3)  # the chunks before (exclusive) fmt: skip
    tril = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()  # (L, L)
    inside = (q @ k.transpose(-2, -1)) * tril  # φ(Q_i)ᵀφ(K_j), j <= i in the chunk (.., C, L, L)
    out = q @ before + inside @ v  # (..., C, L, Dv + 1)
    return _ratio(out.flatten(-3, -2)[..., :n, :])  # (..., T, Dv)


def implied_weights(phi_q: Tensor, phi_k: Tensor, causal: bool) -> Tensor:
    """The weights the reassociated form implies, a_ij = φ(q_i)ᵀφ(k_j) / Σ_j φ(q_i)ᵀφ(k_j)
    over j (j <= i when ``causal``): O(Tq·Tk), for inspection. phi_q (..., Tq, M),
    phi_k (..., Tk, M) (a masked key's row zero) -> (..., Tq, Tk)."""
    e = phi_q @ phi_k.transpose(-2, -1)  # (..., Tq, Tk)
    if causal:
        e = e.tril()
    den = e.sum(-1, keepdim=True)  # (..., Tq, 1)
    return e / den.clamp_min(torch.finfo(e.dtype).tiny)


@dataclass(frozen=True)
class LinearState:
    """The recurrent state of causal linear attention after positions 0 .. t (Katharopoulos
    et al. 2020, eq. 18-19): kv = S_t = Σ_j φ(K_j) V_jᵀ (..., M, Dv), k_sum = z_t = Σ_j φ(K_j)
    (..., M). Its size does not grow with t."""

    kv: Tensor
    k_sum: Tensor


def linear_step(
    phi_q: Tensor, phi_k: Tensor, value: Tensor, state: LinearState | None = None
) -> tuple[Tensor, LinearState]:
    """One position of causal linear attention as an RNN (Katharopoulos et al. 2020, eq.
    18-20): S_t = S_{t-1} + φ(K_t) V_tᵀ, z_t = z_{t-1} + φ(K_t), V'_t = φ(Q_t)ᵀS_t / φ(Q_t)ᵀz_t.
    phi_q, phi_k (..., 1, M), value (..., 1, Dv), state after t - 1 (None at t = 0)
    -> context (..., 1, Dv) and the state after t; equal to row t of
    ``causal_linear_attention`` over positions 0 .. t."""
    kv = phi_k.transpose(-2, -1) @ value  # φ(K_t) V_tᵀ (..., M, Dv)
    k_sum = phi_k[..., 0, :]  # (..., M)
    if state is not None:
        kv, k_sum = state.kv + kv, state.k_sum + k_sum
    num = phi_q @ kv  # (..., 1, Dv)
    den = phi_q @ k_sum[..., :, None]  # (..., 1, 1)
    return num / den.clamp_min(torch.finfo(num.dtype).tiny), LinearState(kv, k_sum)


__all__ = [
    "DEFAULT_CHUNK",
    "LinearState",
    "causal_linear_attention",
    "implied_weights",
    "linear_attention",
    "linear_step",
]
