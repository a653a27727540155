"""Independent float64 references of linear attention, written from the papers' equations
with plain loops, ``math`` and numpy. Nothing here calls attnkit.

Legend: Tq queries, Tk keys, D head width, Dv value width, M features.
"""

from __future__ import annotations

import math

import numpy as np


def elu_plus_one(x: np.ndarray) -> np.ndarray:
    """Katharopoulos et al. 2020, eq. 7: φ(x) = elu(x) + 1 = x + 1 for x > 0, exp(x) else."""
    return np.array([v + 1.0 if v > 0 else math.exp(v) for v in np.ravel(x)]).reshape(x.shape)


def favor_phi(x: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """Choromanski et al. 2021, Lemma 1 / eq. 5 with x̂ = x / d^(1/4): φ(x)_r =
    exp(ω_rᵀx̂ - ‖x̂‖²/2) / √m, so that E φ(q)ᵀφ(k) = exp(qᵀk/√d). x (D,), omega (M, D)."""
    d = len(x)
    xh = [float(v) / d**0.25 for v in x]
    sq = sum(v * v for v in xh)
    m = omega.shape[0]
    return np.array(
        [math.exp(sum(omega[r, i] * xh[i] for i in range(d)) - sq / 2) / math.sqrt(m)
         for r in range(m)]
    )  # fmt: skip


def kernel_attention(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray, causal: bool,
                     keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Katharopoulos et al. 2020, eq. 2 with sim(q, k) = φ(q)ᵀφ(k):
    V'_i = Σ_j sim(Q_i, K_j) V_j / Σ_j sim(Q_i, K_j) over the allowed keys j (j <= i when
    causal; keep[j] False = padded). phi_q (Tq, M), phi_k (Tk, M), v (Tk, Dv)
    -> context (Tq, Dv), weights (Tq, Tk); a row with no allowed key is zero."""
    tq, tk = phi_q.shape[0], phi_k.shape[0]
    out, w = np.zeros((tq, v.shape[1])), np.zeros((tq, tk))
    for i in range(tq):
        allowed = [j for j in range(tk) if (keep is None or keep[j]) and (not causal or j <= i)]
        sims = {j: float(sum(phi_q[i, r] * phi_k[j, r] for r in range(phi_q.shape[1])))
                for j in allowed}  # fmt: skip
        den = sum(sims.values())
        if not allowed or den == 0:
            continue
        for j in allowed:
            w[i, j] = sims[j] / den
            out[i] += w[i, j] * v[j]
    return out, w


def softmax_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vaswani 2017, eq. 1: softmax(QKᵀ/√d) V, every key. q (Tq, D), k (Tk, D), v (Tk, Dv)."""
    s = q @ k.T / math.sqrt(q.shape[1])
    s = np.exp(s - s.max(axis=1, keepdims=True))
    return (s / s.sum(axis=1, keepdims=True)) @ v
