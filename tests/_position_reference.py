"""Independent float64 references of the position stages, written from the papers'
equations with plain loops, ``math`` and numpy. Nothing here calls attnkit.

Each ``*_scores`` gives the scores e[b, h, i, j] of queries q (B, H, Tq, D) and keys
k (B, H, Tk, D) at query positions qp (Tq,) and key positions kp (Tk,), as numpy arrays.

Legend: B batch, H heads, Tq queries, Tk keys, D head width.
"""

from __future__ import annotations

import math

import numpy as np


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(sum(a[x] * b[x] for x in range(len(a))))


def _each(q: np.ndarray, k: np.ndarray, cell) -> np.ndarray:
    """e[b, h, i, j] = cell(b, h, i, j) over every index."""
    bsz, heads, tq, _ = q.shape
    tk = k.shape[2]
    out = np.zeros((bsz, heads, tq, tk))
    for b in range(bsz):
        for h in range(heads):
            for i in range(tq):
                for j in range(tk):
                    out[b, h, i, j] = cell(b, h, i, j)
    return out


def alibi_slopes_ref(heads: int) -> list[float]:
    """Press et al. 2022, §3: for 8 heads 1/2^1, 1/2^2, ..., 1/2^8; in general, for H a power
    of two, the geometric sequence starting at 2^(-8/H) with that same ratio."""
    return [2.0 ** (-8.0 * h / heads) for h in range(1, heads + 1)]


def alibi_scores(q, k, qp, kp, slopes) -> np.ndarray:
    """Press et al. 2022, eq. in §3: q_i·k_j/√d + m_h · (-(|i - j|))."""
    d = q.shape[-1]
    return _each(
        q, k, lambda b, h, i, j: _dot(q[b, h, i], k[b, h, j]) / math.sqrt(d)
        - slopes[h] * abs(qp[i] - kp[j])
    )  # fmt: skip


def rope_matrix(m: float, d: int, base: float = 10000.0) -> np.ndarray:
    """Su et al. 2021, eq. 15: R^d_Θ,m, block diagonal of 2x2 rotations by m θ_i,
    θ_i = base^(-2(i-1)/d), i = 1 .. d/2."""
    r = np.zeros((d, d))
    for i in range(d // 2):
        theta = base ** (-2.0 * i / d)
        c, s = math.cos(m * theta), math.sin(m * theta)
        r[2 * i, 2 * i], r[2 * i, 2 * i + 1] = c, -s
        r[2 * i + 1, 2 * i], r[2 * i + 1, 2 * i + 1] = s, c
    return r


def rope_scores(q, k, qp, kp) -> np.ndarray:
    """Su et al. 2021, eq. 16: q_mᵀ k_n = (R_Θ,m W_q x_m)ᵀ (R_Θ,n W_k x_n), over √d."""
    d = q.shape[-1]
    return _each(
        q, k, lambda b, h, i, j: _dot(rope_matrix(qp[i], d) @ q[b, h, i],
                                      rope_matrix(kp[j], d) @ k[b, h, j]) / math.sqrt(d)
    )  # fmt: skip


def t5_bucket_ref(rel: int, buckets: int, max_distance: int, bidirectional: bool) -> int:
    """Raffel et al. 2020, §2.1 and the authors' ``_relative_position_bucket``: rel = j - i;
    with ``bidirectional`` the upper half of the buckets is for j > i; distances below half
    the (one-direction) buckets exact, the rest logarithmic up to max_distance, then the last."""
    n = -rel
    ret = 0
    if bidirectional:
        buckets //= 2
        if n < 0:
            ret += buckets
        n = abs(n)
    else:
        n = max(n, 0)
    exact = buckets // 2
    if n < exact:
        return ret + n
    large = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (buckets - exact))
    return ret + min(large, buckets - 1)


def t5_scores(q, k, qp, kp, table, max_distance, bidirectional) -> np.ndarray:
    """q_i·k_j/√d + b_h(bucket(j - i)), table (H, N)."""
    d, buckets = q.shape[-1], table.shape[1]
    return _each(
        q, k, lambda b, h, i, j: _dot(q[b, h, i], k[b, h, j]) / math.sqrt(d)
        + table[h, t5_bucket_ref(int(kp[j] - qp[i]), buckets, max_distance, bidirectional)]
    )  # fmt: skip


def shaw_scores(q, k, qp, kp, table) -> np.ndarray:
    """Shaw et al. 2018, eq. 4-6: q_i (k_j + w^K_clip(j - i, K))ᵀ / √d, table (2K + 1, D)
    indexed -K .. K."""
    d, clip = q.shape[-1], (table.shape[0] - 1) // 2

    def cell(b, h, i, j):
        rel = max(-clip, min(clip, int(kp[j] - qp[i])))
        return _dot(q[b, h, i], k[b, h, j] + table[rel + clip]) / math.sqrt(d)

    return _each(q, k, cell)


def sinusoid_ref(r: float, width: int) -> np.ndarray:
    """Transformer-XL's R_r: [sin(r θ_0), .., sin(r θ_{R/2-1}), cos(r θ_0), ..],
    θ_i = 10000^(-2i/R) (Vaswani 2017, §3.5 frequencies; the authors' layout)."""
    theta = [10000.0 ** (-2.0 * i / width) for i in range(width // 2)]
    return np.array([math.sin(r * t) for t in theta] + [math.cos(r * t) for t in theta])


def xl_scores(q, k, qp, kp, w_r, u, v) -> np.ndarray:
    """Dai et al. 2019, §3.3: A_ij = q_iᵀk_j + q_iᵀW_RR_{i-j} + uᵀk_j + vᵀW_RR_{i-j}, over
    √d; w_r (H, D, R), u and v (H, D)."""
    d = q.shape[-1]

    def cell(b, h, i, j):
        pos = w_r[h] @ sinusoid_ref(qp[i] - kp[j], w_r.shape[-1])  # W_R R_{i-j} (D,)
        a = _dot(q[b, h, i], k[b, h, j])
        return (a + _dot(q[b, h, i], pos) + _dot(u[h], k[b, h, j]) + _dot(v[h], pos)) / math.sqrt(d)

    return _each(q, k, cell)


def learned_scores(q, k, qp, kp, p_q, p_k) -> np.ndarray:
    """(q_i + p^Q_h(i))·(k_j + p^K_h(j))/√d, tables (H, P, D)."""
    d = q.shape[-1]
    return _each(
        q, k, lambda b, h, i, j: _dot(q[b, h, i] + p_q[h, int(qp[i])],
                                      k[b, h, j] + p_k[h, int(kp[j])]) / math.sqrt(d)
    )  # fmt: skip
