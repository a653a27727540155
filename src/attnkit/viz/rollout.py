"""Attention rollout and attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in
Transformers"): how much each input token reaches each position of a layer through every
layer below it, rather than through one layer's raw weights.

Both model the network as a graph: one node per (layer, position), an edge from position i of
layer l to position j of layer l-1 weighted by the attention of layer l, averaged over heads,
with the residual connection counted as the paper does (§3):

    Ã_l = 0.5 · A_l + 0.5 · I          (rows still sum to one)

- **Rollout** assumes identities mix linearly: R_1 = Ã_1, R_l = Ã_l · R_{l-1}.
- **Flow** treats the graph as a flow network with the weights as capacities: the entry (i, j)
  is the maximum flow from position i of the top layer to input token j, each row then
  normalised to sum to one as the paper's token attentions are.

Legend: L layers, H heads, T positions (self-attention: queries and keys are the same tokens).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow
from torch import Tensor

__all__ = ["attention_flow", "attention_rollout", "with_residual"]

# maximum_flow works on integer capacities: weights are scaled by this and rounded, so a
# flow is exact to about 1e-6 of a unit
_SCALE = 1_000_000


def _layers(weights: Tensor | np.ndarray) -> Tensor:
    """(L, H, T, T) or (L, T, T) -> (L, T, T) in float64, heads averaged."""
    if not isinstance(weights, Tensor):
        weights = torch.as_tensor(np.asarray(weights))
    if weights.dim() == 4:
        weights = weights.double().mean(dim=1)  # (L, T, T)
    if weights.dim() != 3 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"weights of shape {tuple(weights.shape)}: rollout and flow need one example's "
            "self-attention of every layer, (L, H, T, T) or (L, T, T) with as many keys as "
            "queries"
        )
    if weights.shape[0] == 0:
        raise ValueError("weights hold no layer: pass (L, H, T, T) with L >= 1")
    weights = weights.double()
    if not torch.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("weights must be finite and non-negative (attention probabilities)")
    return weights


def with_residual(weights: Tensor, residual: float = 0.5) -> Tensor:
    """Ã = (1 - residual)·A + residual·I, rows renormalised: (L, T, T) -> (L, T, T)."""
    if not 0.0 <= residual < 1.0:
        raise ValueError(f"residual={residual}: pass a share in [0, 1) (the paper uses 0.5)")
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype)  # (T, T)
    mixed = (1.0 - residual) * weights + residual * eye  # (L, T, T)
    return mixed / mixed.sum(dim=-1, keepdim=True).clamp_min(1e-300)


def attention_rollout(weights: Tensor | np.ndarray, residual: float = 0.5) -> Tensor:
    """Rollout of every layer: out[l, i, j] = how much input token j reaches position i of
    layer l + 1, R_l = Ã_l · R_{l-1} (Abnar & Zuidema 2020, eq. 1).

    weights: (L, H, T, T) or (L, T, T), one example. Returns (L, T, T) float64; the last
    layer's map is ``out[-1]``. ``residual=0`` gives the raw product of the weights.
    """
    mixed = with_residual(_layers(weights), residual)  # (L, T, T)
    out = torch.empty_like(mixed)
    out[0] = mixed[0]
    for layer in range(1, mixed.shape[0]):
        out[layer] = mixed[layer] @ out[layer - 1]  # (T, T)
    return out


def attention_flow(
    weights: Tensor | np.ndarray, residual: float = 0.5, normalise: bool = True
) -> Tensor:
    """Flow from every position of the top layer to every input token: out[i, j] is the
    maximum flow from node (L, i) to node (0, j) when the edge from (l, a) to (l-1, b) has
    capacity Ã_l[a, b] (Abnar & Zuidema 2020, §3).

    weights: (L, H, T, T) or (L, T, T), one example. Returns (T, T) float64, each row
    normalised to sum to one unless ``normalise=False``. Cost: T² max-flow problems on a graph
    of (L + 1)·T nodes: meant for the sentence lengths one looks at, not thousands of tokens.
    """
    mixed = with_residual(_layers(weights), residual).numpy()  # (L, T, T)
    n_layers, t, _ = mixed.shape
    nodes = (n_layers + 1) * t  # node (l, a) is number l·T + a
    rows, cols, caps = [], [], []
    for layer in range(1, n_layers + 1):
        a, b = np.nonzero(mixed[layer - 1] > 0)  # edges (l, a) -> (l-1, b)
        rows.append(layer * t + a)
        cols.append((layer - 1) * t + b)
        caps.append(np.rint(mixed[layer - 1][a, b] * _SCALE).astype(np.int32))
    src = np.concatenate(rows)
    dst = np.concatenate(cols)
    cap = np.concatenate(caps)
    graph = csr_matrix((cap, (src, dst)), shape=(nodes, nodes))
    out = np.zeros((t, t))
    for i in range(t):
        for j in range(t):
            out[i, j] = maximum_flow(graph, n_layers * t + i, j).flow_value / _SCALE
    flow = torch.from_numpy(out)  # (T, T)
    if normalise:
        flow = flow / flow.sum(dim=-1, keepdim=True).clamp_min(1e-300)
    return flow
