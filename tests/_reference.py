"""Independent float64 references, written from the papers' equations with plain loops and
numpy. Nothing here calls attnkit: the tests compare attnkit against these.

Legend: B batch, Tq queries, Tk keys, D widths, A hidden width.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor


def np64(x: Tensor) -> np.ndarray:
    return x.detach().to(torch.float64).cpu().numpy()


def rows(allowed: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """A mask (or None = all allowed) broadcast to ``shape``, as a bool numpy array."""
    if allowed is None:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(np.asarray(allowed, dtype=bool), shape)


# ---------------------------------------------------------------------------------- normalisers


def softmax_row(z: np.ndarray, ok: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """a_j = exp(z_j / T) / Σ_{k allowed} exp(z_k / T) (Bahdanau 2015, eq. 6); 0 if masked."""
    out = np.zeros_like(z)
    if not ok.any():
        return out
    m = max(z[j] / temperature for j in range(len(z)) if ok[j])
    den = sum(math.exp(z[j] / temperature - m) for j in range(len(z)) if ok[j])
    for j in range(len(z)):
        if ok[j]:
            out[j] = math.exp(z[j] / temperature - m) / den
    return out


def _bisect_tau(mass, lo: float, hi: float, iters: int = 200) -> float:
    """The τ in [lo, hi] with mass(τ) = 1, mass decreasing in τ."""
    for _ in range(iters):
        mid = (lo + hi) / 2
        if mass(mid) > 1:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def sparsemax_row(z: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Martins & Astudillo 2016, eq. 2: p = argmin_{p ∈ Δ} ‖p - z‖², i.e. p_j = [z_j - τ]₊ with
    Σ p = 1; τ found by bisection on [max - 1, max]."""
    out = np.zeros_like(z)
    if not ok.any():
        return out
    zs = [z[j] for j in range(len(z)) if ok[j]]
    top = max(zs)
    tau = _bisect_tau(lambda t: sum(max(x - t, 0.0) for x in zs), top - 1, top)
    for j in range(len(z)):
        if ok[j]:
            out[j] = max(z[j] - tau, 0.0)
    return out


def entmax15_row(z: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Peters et al. 2019, α = 1.5: p_j = [(α-1) z_j - τ]₊^{1/(α-1)} = [z_j/2 - τ]₊² with
    Σ p = 1; τ found by bisection on [max/2 - 1, max/2]."""
    out = np.zeros_like(z)
    if not ok.any():
        return out
    xs = [z[j] / 2 for j in range(len(z)) if ok[j]]
    top = max(xs)
    tau = _bisect_tau(lambda t: sum(max(x - t, 0.0) ** 2 for x in xs), top - 1, top)
    for j in range(len(z)):
        if ok[j]:
            out[j] = max(z[j] / 2 - tau, 0.0) ** 2
    return out


def normalise(scores: Tensor, mask: Tensor | None, row_fn, **kw) -> np.ndarray:
    """Apply a row reference over the last dim of (..., Tk) scores."""
    z = np64(scores)
    ok = rows(None if mask is None else mask.cpu().numpy(), z.shape)
    out = np.zeros_like(z)
    for idx in np.ndindex(*z.shape[:-1]):
        out[idx] = row_fn(z[idx], ok[idx], **kw)
    return out


# --------------------------------------------------------------------------------------- scores


def pairwise_ref(q: np.ndarray, k: np.ndarray, pair) -> np.ndarray:
    """out[b, t, s] = pair(q[b, t], k[b, s]), one (t, s) pair at a time.
    q (B, Tq, D), k (B, Tk, D) -> (B, Tq, Tk)."""
    b, tq, _ = q.shape
    tk = k.shape[1]
    out = np.zeros((b, tq, tk))
    for i in range(b):
        for t in range(tq):
            for s in range(tk):
                out[i, t, s] = pair(q[i, t], k[i, s])
    return out


def dot_ref(q: np.ndarray, k: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """score(h_t, h_s) = scale · Σ_d h_t[d] h_s[d], with loops. q (B, Tq, D), k (B, Tk, D)."""
    return pairwise_ref(q, k, lambda ht, hs: scale * sum(ht[x] * hs[x] for x in range(len(ht))))


def general_ref(q: np.ndarray, k: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Luong 2015: h_tᵀ W_a h_s = Σ_{x,y} h_t[x] W[x, y] h_s[y]."""
    return pairwise_ref(q, k, lambda ht, hs: float(ht @ w @ hs))


def additive_ref(q, k, w1, w2, v, bias) -> np.ndarray:
    """Bahdanau 2015: vᵀ tanh(W₁ s + W₂ h + b), one (t, s) pair at a time."""
    b = 0 if bias is None else bias
    return pairwise_ref(q, k, lambda s, h: float(v @ np.tanh(w1 @ s + w2 @ h + b)))


def cosine_ref(q: np.ndarray, k: np.ndarray, beta: float) -> np.ndarray:
    """β · cos(h_t, h_s) = β · h_tᵀ h_s / (‖h_t‖ ‖h_s‖)."""

    def cosine(ht: np.ndarray, hs: np.ndarray) -> float:
        nq, nk = np.sqrt((ht**2).sum()), np.sqrt((hs**2).sum())
        return beta * float(ht @ hs) / (nq * nk)

    return pairwise_ref(q, k, cosine)


def location_ref(q: np.ndarray, w: np.ndarray, tk: int) -> np.ndarray:
    """Luong 2015 location: W_a h_t, keeping the first Tk outputs."""
    b, tq, _ = q.shape
    out = np.zeros((b, tq, tk))
    for i in range(b):
        for t in range(tq):
            for s in range(tk):
                out[i, t, s] = float(w[s] @ q[i, t])
    return out


# ------------------------------------------------------------------------------------ attention


def attention_ref(scores: np.ndarray, allowed: np.ndarray, values: np.ndarray, row_fn=softmax_row):
    """weights = normalise(scores) per row over allowed keys; context = Σ_j a_j v_j.
    scores (B, Tq, Tk), allowed broadcastable, values (B, Tk, Dv)."""
    ok = rows(allowed, scores.shape)
    w = np.zeros_like(scores)
    for idx in np.ndindex(*scores.shape[:-1]):
        w[idx] = row_fn(scores[idx], ok[idx])
    ctx = np.einsum("bqk,bkd->bqd", w, values)
    return ctx, w


def sdpa_ref(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> tuple[Tensor, Tensor]:
    """Vaswani 2017 eq. 1 in float64 with plain torch: softmax(QKᵀ/√d) V over allowed keys;
    a row with no allowed key gives zeros. Works on any leading dims."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    e = (q64 @ k64.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if allowed is not None:
        e = e.masked_fill(~allowed, float("-inf"))
    m = e.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    ex = torch.exp(e - m)
    den = ex.sum(-1, keepdim=True)
    w = torch.where(den > 0, ex / den.clamp_min(1e-300), torch.zeros_like(ex))
    return w @ v64, w


def band_ref(tq: int, tk: int, radius: int, causal: bool) -> Tensor:
    """Restricted attention window, with loops: |i - j| <= r, or 0 <= i - j <= r."""
    out = torch.zeros(tq, tk, dtype=torch.bool)
    for i in range(tq):
        for j in range(tk):
            out[i, j] = (0 <= i - j <= radius) if causal else abs(i - j) <= radius
    return out


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# ------------------------------------------------------------------- Sparse Transformer patterns


def factorised_sets(pattern: str, i: int, tk: int, l: int, c: int, causal: bool):
    """A⁽¹⁾_i and A⁽²⁾_i of Child et al. 2019, §4.2, as Python sets over keys 0 .. Tk-1:
    strided A⁽¹⁾ = {t .. i}, t = max(0, i - l), A⁽²⁾ = {j : (i - j) mod l = 0}; fixed
    A⁽¹⁾ = {j : ⌊j/l⌋ = ⌊i/l⌋}, A⁽²⁾ = {j : j mod l ∈ {l - c, .., l - 1}}. Causal keeps j <= i;
    not causal, the strided parts look both ways (|i - j| <= l, |i - j| a multiple of l)."""
    keys = range(tk)
    if pattern == "strided":
        if causal:
            first = set(range(max(0, i - l), min(i, tk - 1) + 1))
            second = {j for j in keys if j <= i and (i - j) % l == 0}
        else:
            first = {j for j in keys if abs(i - j) <= l}
            second = {j for j in keys if abs(i - j) % l == 0}
    else:
        first = {j for j in keys if j // l == i // l}
        second = {j for j in keys if j % l in range(l - c, l)}
        if causal:
            first, second = {j for j in first if j <= i}, {j for j in second if j <= i}
    return first, second


# ------------------------------------------------------------------ grouped key/value heads


def grouped_ref(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> tuple[Tensor, Tensor]:
    """Grouped-query attention (Ainslie et al. 2023) in float64: query head h of H reads
    key/value head ⌊h / (H / Hkv)⌋, by indexing; then ``sdpa_ref``. q (B, H, Tq, D),
    k, v (B, Hkv, Tk, D)."""
    h, hkv = q.shape[1], k.shape[1]
    pick = torch.tensor([i // (h // hkv) for i in range(h)])  # (H,) the key/value head of each
    return sdpa_ref(q, k[:, pick], v[:, pick], allowed)
