"""The naive dense attention every benchmark scenario is held to: the n x n scores built,
masked and normalised in plain PyTorch (Vaswani 2017, eq. 1)."""

from __future__ import annotations

import torch
from torch import Tensor


def naive_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(qkᵀ/√d, masked) v for q, k, v (B, H, n, d); ``mask`` True = may attend."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, H, n, n)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (B, H, n, d)


__all__ = ["naive_attention"]
