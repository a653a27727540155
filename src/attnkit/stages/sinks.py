"""A softmax with a learned sink logit per head (OpenAI 2025, gpt-oss model card: "each
attention head has a learned bias in the denominator of the softmax"; the attention-sink
effect of Xiao et al. 2023, StreamingLLM, given a parameter):

    a_ij = exp(e_ij) / (exp(s_h) + Σ_{k allowed} exp(e_ik))     query i of head h

The weights of a row sum to 1 - exp(s_h) / (exp(s_h) + Σ_k exp(e_ik)) < 1: a query may put
mass on "no key", and a row with no allowed key gives zero weights. Equal to a softmax over
the keys and one extra key of score s_h and value 0.

Legend: H heads, Tq queries, Tk keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_mask
from .normalisers import compute_dtype


def sink_softmax(scores: Tensor, mask: Tensor | None, sink: Tensor) -> Tensor:
    """scores (..., H, Tq, Tk), mask broadcastable to them (True = may attend) or None, sink
    (H,) one logit per head -> weights (..., H, Tq, Tk), zero on masked keys, in float32 at
    least. The row maximum includes the sink, so no exp overflows and none is NaN."""
    check_mask(mask, tuple(scores.shape), scores.device)
    if scores.dim() < 3 or sink.dim() != 1 or sink.shape[0] not in (1, scores.shape[-3]):
        raise ValueError(
            f"sink {tuple(sink.shape)} for scores {tuple(scores.shape)}: give one sink logit "
            "per head, (H,), for scores (..., H, Tq, Tk)"
        )
    work = compute_dtype(scores.dtype)
    e = scores.to(work)  # (..., H, Tq, Tk)
    if mask is not None:
        e = e.masked_fill(~mask, float("-inf"))
    s = sink.to(work)[:, None, None].expand(*e.shape[:-1], 1)  # (..., H, Tq, 1)
    top = torch.maximum(e.amax(dim=-1, keepdim=True), s).detach()  # (..., H, Tq, 1), finite
    ex = torch.exp(e - top)  # (..., H, Tq, Tk); masked: exp(-inf) = 0
    return ex / (ex.sum(dim=-1, keepdim=True) + torch.exp(s - top))  # (..., H, Tq, Tk)


class SinkSoftmax(nn.Module):
    """The normaliser ``sink_softmax`` with its H sink logits as a parameter (initialised to
    ``init``). ``forward(scores (..., H, Tq, Tk), mask) -> weights``. Declares ``per_head``:
    grouped key/value heads are repeated for it rather than folded into the queries; and
    ``sink_logits``: ``attend`` without weights and with the scaled dot product computes it
    with the fused kernel (``sink_context``)."""

    per_head = True

    @property
    def sink_logits(self) -> Tensor:
        """The sink logits (H,): the fused path (``sink_context``) reads them."""
        return self.sink

    def __init__(self, heads: int, init: float = 0.0) -> None:
        super().__init__()
        if heads < 1:
            raise ValueError(f"heads={heads}; a sink softmax needs one logit per head, >= 1")
        self.sink = nn.Parameter(torch.full((heads,), float(init)))

    def forward(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return sink_softmax(scores, mask, self.sink)


@dataclass(frozen=True)
class SinkLogits:
    """The normaliser ``sink_softmax`` with sink logits held elsewhere, ``sink`` (H,) (a
    model's own parameter, e.g. Hugging Face gpt-oss's ``sinks``); gradients reach it."""

    sink: Tensor
    per_head: ClassVar[bool] = True

    @property
    def sink_logits(self) -> Tensor:
        """The sink logits (H,): the fused path (``sink_context``) reads them."""
        return self.sink

    def __call__(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return sink_softmax(scores, mask, self.sink)


def sink_context(
    query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, sink: Tensor
) -> Tensor:
    """The context of scaled-dot attention with the sink softmax, by the fused
    ``F.scaled_dot_product_attention``: the sink is one more key, of score s_h (a zero key
    and s_h in SDPA's float mask) and value zero. query (..., H, Tq, D), keys (..., H, Tk, D),
    values (..., H, Tk, Dv), mask broadcastable to (..., H, Tq, Tk) or None, sink (H,) ->
    context (..., H, Tq, Dv). The keys and values are copied once with their extra row; the
    float mask is (..., H, Tq|1, Tk + 1), as large as the mask (times H). A row with no
    allowed key gives the zero context (all its mass on the sink)."""
    zk = keys.new_zeros(*keys.shape[:-2], 1, keys.shape[-1])  # (..., H, 1, D)
    zv = values.new_zeros(*values.shape[:-2], 1, values.shape[-1])  # (..., H, 1, Dv)
    k, v = torch.cat([keys, zk], dim=-2), torch.cat([values, zv], dim=-2)  # (.., Tk + 1, .)
    tk = keys.shape[-2]
    m = torch.ones((1, tk), dtype=torch.bool, device=query.device) if mask is None else mask
    m = m.expand(*m.shape[:-1], tk)  # (..., Tq|1, Tk)
    low = torch.tensor(float("-inf"), dtype=query.dtype, device=query.device)
    real = torch.where(m, torch.zeros((), dtype=query.dtype, device=query.device), low)
    s = sink.to(query.dtype)[:, None, None]  # (H, 1, 1)
    lead = torch.broadcast_shapes(real.shape[:-1], s.shape[:-1])  # (..., H, Tq|1)
    float_mask = torch.cat([real.expand(*lead, tk), s.expand(*lead, 1)], dim=-1)  # (.., Tk+1)
    return F.scaled_dot_product_attention(query, k, v, attn_mask=float_mask)  # (..., H, Tq, Dv)


__all__ = ["SinkLogits", "SinkSoftmax", "sink_context", "sink_softmax"]
