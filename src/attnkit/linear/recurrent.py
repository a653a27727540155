"""Causal linear attention decoded as an RNN through a multi-head module: one position per
call, a state of O(H·M·Dh) that does not grow with t (Katharopoulos et al. 2020, §3.4).

    context, state = step_heads(attn, x_t, state, t)

``attn`` is any module with ``heads``, ``head_dim``, ``q_proj``, ``k_proj``, ``v_proj``,
``out_proj``, a kernel ``score`` and an optional q/k-transform ``position`` (RoPE, learned):
``attnkit.modules.AttentionHeads`` built with ``score="linear"`` or ``"performer"``. This file
reads those by name and imports no module class, so that ``attend`` can import
``attnkit.linear`` without a cycle.

Legend: B batch, H heads, Hkv key/value heads, D model width, Dh head width, M features.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..stages.capabilities import is_qk_transform
from ..stages.normalisers import compute_dtype
from .kernels import LinearState, linear_step


def _heads(x: Tensor, heads: int) -> Tensor:
    """(B, 1, H·Dh) -> (B, H, 1, Dh)."""
    return x.unflatten(-1, (heads, -1)).transpose(1, 2)


def step_heads(
    attn: Any, x: Tensor, state: LinearState | None, t: int
) -> tuple[Tensor, LinearState]:
    """Position t of causal multi-head linear attention: x (B, 1, D), the state after t - 1
    (None at t = 0) -> the output W^O [V'_t per head] (B, 1, D) and the state after t; equal
    to row t of ``attn(x_0 .. x_t)`` with a causal alignment."""
    if not getattr(attn.score, "feature_map", False):
        raise ValueError(
            f"step_heads decodes linear attention; this module's score is "
            f"{type(attn.score).__name__}: build it with score='linear' or 'performer'"
        )
    if not is_qk_transform(attn.position):
        raise ValueError("linear attention takes no position bias; use position='rope'")
    if x.dim() != 3 or x.shape[1] != 1:
        raise ValueError(f"step_heads takes one position x (B, 1, D), got {tuple(x.shape)}")
    hkv = getattr(attn, "kv_heads", attn.heads)
    q = _heads(attn.q_proj(x), attn.heads)  # (B, H, 1, Dh)
    k = _heads(attn.k_proj(x), hkv)  # (B, Hkv, 1, Dh)
    v = _heads(attn.v_proj(x), hkv)  # (B, Hkv, 1, Dh)
    if hkv != attn.heads:  # query head h reads key/value head ⌊h·Hkv/H⌋
        k = k.repeat_interleave(attn.heads // hkv, dim=1)  # (B, H, 1, Dh)
        v = v.repeat_interleave(attn.heads // hkv, dim=1)  # (B, H, 1, Dh)
    work = compute_dtype(x.dtype)
    q, k = q.to(work), k.to(work)
    if attn.position is not None:
        at = torch.full((1,), t, device=x.device)  # (1,) the query's and the key's position
        placed = attn.position(q, k, at, at)
        q, k = placed.query, placed.keys
    phi_q = attn.score.features(q, True)  # (B, H, 1, M)
    phi_k = attn.score.features(k, False)  # (B, H, 1, M)
    context, state = linear_step(phi_q, phi_k, v.to(work), state)  # (B, H, 1, Dh)
    out = attn.out_proj(context.to(x.dtype).transpose(1, 2).flatten(2))  # (B, 1, D)
    return out, state


__all__ = ["step_heads"]
