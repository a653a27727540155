"""Directional self-attention (Shen et al. 2018, "DiSAN: Directional Self-Attention Network
for RNN/CNN-Free Language Understanding", §4): a sentence encoder made of multi-dimensional
token2token attention under forward and backward masks, fused with its input by a gate.

For the tokens x_1..x_n of one sentence (eq. 14-19):

    h_i = ELU(W⁽ʰ⁾ x_i + b⁽ʰ⁾)
    f(h_j, h_i) = c · tanh([W⁽¹⁾ h_j + W⁽²⁾ h_i + b⁽¹⁾] / c) + M_ij 1        (one score per feature)
    M^fw_ij = 0 if j < i else −∞        M^bw_ij = 0 if j > i else −∞         (i query, j key)
    s_i = Σ_j P_ij ⊙ h_j,  P_ij· = softmax_j(f(h_j, h_i))_·  feature by feature
    F_i = σ(W⁽ᶠ¹⁾ s_i + W⁽ᶠ²⁾ h_i + b⁽ᶠ⁾),   u_i = F_i ⊙ h_i + (1 − F_i) ⊙ s_i

DiSAN concatenates the forward and backward outputs, u_i = [u^fw_i; u^bw_i], and pools them
with multi-dimensional source2token attention (attnkit.mechanisms.multidim.source2token_pool).
A query with no allowed key (the first token, forward) has s_i = 0.

Legend: B batch, T tokens, D width (input and output of one direction).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .multidim import featurewise_attend

DIRECTIONS = ("forward", "backward")


def direction_mask(length: int, direction: str, device: torch.device | None = None) -> Tensor:
    """DiSAN eq. 16-17 as a boolean mask (True = may attend), query i by key j: forward
    j < i, backward j > i (the diagonal is masked in both). -> (T, T)"""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}; choose one of {DIRECTIONS}")
    i = torch.arange(length, device=device)[:, None]  # (T, 1) queries
    j = torch.arange(length, device=device)[None, :]  # (1, T) keys
    return j < i if direction == "forward" else j > i  # (T, T)


def directional_scores(
    h: Tensor, w_keys: Tensor, w_query: Tensor, bias: Tensor, c: float
) -> Tensor:
    """DiSAN eq. 15 without the mask term: f(h_j, h_i) = c·tanh([W⁽¹⁾h_j + W⁽²⁾h_i + b⁽¹⁾]/c).
    h (..., T, D), w_keys/w_query (D, D), bias (D,) -> scores (..., Tq=T, Tk=T, D)."""
    k = h @ w_keys.transpose(0, 1)  # (..., T, D)
    q = h @ w_query.transpose(0, 1) + bias  # (..., T, D)
    return c * torch.tanh((q[..., :, None, :] + k[..., None, :, :]) / c)  # (..., T, T, D)


class DirectionalSelfAttention(nn.Module):
    """One DiSA block (DiSAN §4.1) of a given ``direction``:
    ``forward(x (B, T, Din), mask (B, T)) -> (u (B, T, D), weights (B, T, T, D))``."""

    def __init__(self, in_dim: int, dim: int, direction: str, c: float = 5.0) -> None:
        super().__init__()
        if direction not in DIRECTIONS:
            raise ValueError(f"direction {direction!r}; choose one of {DIRECTIONS}")
        if c <= 0:
            raise ValueError(f"c={c}; the tanh scale must be positive (DiSAN uses 5)")
        self.direction, self.c = direction, c
        self.inp = nn.Linear(in_dim, dim)  # W⁽ʰ⁾, b⁽ʰ⁾
        self.w_keys = nn.Parameter(torch.empty(dim, dim))  # W⁽¹⁾
        self.w_query = nn.Parameter(torch.empty(dim, dim))  # W⁽²⁾
        self.bias = nn.Parameter(torch.zeros(dim))  # b⁽¹⁾
        self.gate_s = nn.Linear(dim, dim, bias=False)  # W⁽ᶠ¹⁾
        self.gate_h = nn.Linear(dim, dim)  # W⁽ᶠ²⁾, b⁽ᶠ⁾
        for w in (self.w_keys, self.w_query):
            nn.init.xavier_uniform_(w)

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        h = nn.functional.elu(self.inp(x))  # (B, T, D)
        scores = directional_scores(h, self.w_keys, self.w_query, self.bias, self.c)
        allowed = direction_mask(x.shape[-2], self.direction, x.device)  # (T, T)
        allowed = allowed & mask[..., None, :] & mask[..., :, None]  # (B, T, T)
        out = featurewise_attend(scores, h, allowed)  # context s (B, T, D)
        gate = torch.sigmoid(self.gate_s(out.context) + self.gate_h(h))  # (B, T, D)
        u = gate * h + (1 - gate) * out.context  # (B, T, D)
        assert out.weights is not None
        return u, out.weights


class DiSAEncoder(nn.Module):
    """Forward and backward DiSA blocks side by side (DiSAN §4.2): ``forward(x (B, T, Din),
    mask (B, T)) -> u (B, T, 2D)``, u_i = [u^fw_i; u^bw_i]; padded positions are zero."""

    def __init__(self, in_dim: int, dim: int, c: float = 5.0) -> None:
        super().__init__()
        self.fw = DirectionalSelfAttention(in_dim, dim, "forward", c)
        self.bw = DirectionalSelfAttention(in_dim, dim, "backward", c)
        self.out_dim = 2 * dim

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        u = torch.cat([self.fw(x, mask)[0], self.bw(x, mask)[0]], dim=-1)  # (B, T, 2D)
        return u * mask[..., None].to(u.dtype)


__all__ = [
    "DIRECTIONS",
    "DiSAEncoder",
    "DirectionalSelfAttention",
    "direction_mask",
    "directional_scores",
]
