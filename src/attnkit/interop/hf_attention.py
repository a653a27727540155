"""Hugging Face's attention convention computed by attnkit's core; imports no ``transformers``.

``transformers`` (>= 5) calls an attention function as

    attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs)
        -> (attn_output (B, Tq, H, Dv), attn_weights (B, H, Tq, Tk) or None)

with query (B, H, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv), H a multiple of Hkv
(grouped-query attention: query head h reads key/value head h // (H / Hkv)). ``hf_attend``
is that computation on tensors: the masks are converted at this boundary, then
``attnkit.attend`` runs with the chosen normaliser (and a ``SlidingWindow`` alignment for the
sliding variant, whose O(n·r) kernel ``attend`` picks itself). ``attnkit.hf`` adapts it to
the module/kwargs signature and registers it.

Mask conventions converted (HF's polarity for bool masks is attnkit's: True = may attend):
  * bool (B, 1|H, Tq, Tk): used as is;
  * float, additive (0 = attend, the dtype's min or -inf = masked, anything else a bias added
    to the scores): allowed = mask > min / 2, bias = mask on the allowed entries;
  * None with a causal module and Tq > 1: query i attends keys j <= i (top-left aligned,
    as SDPA's ``is_causal``, which HF relies on then); None otherwise: every key.

Legend: B batch, H query heads, Hkv key/value heads, Tq queries, Tk keys, D head width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core import NormaliseFn, ScoreFn, attend
from ..local.band import band_to_dense
from ..masks import causal_mask
from ..stages.alignment import SlidingWindow
from ..stages.capabilities import is_plain_softmax
from ..stages.normalisers import softmax
from ..stages.reduction import weighted_sum
from ..stages.scores import scaled_dot_score
from ..stages.sinks import SinkLogits
from ..stages.softcap import SoftCappedScore


def convert_mask(
    attention_mask: Tensor | None, position_bias: Tensor | None = None
) -> tuple[Tensor | None, Tensor | None]:
    """An HF attention mask -> (bool mask, True = may attend; additive float bias or None).

    attention_mask: bool (True = attend), or additive float (0 attend, <= min/2 or -inf
    masked, other values a bias), broadcastable to (B, H, Tq, Tk), or None. position_bias
    (B|1, H, Tq, Tk), added to the scores (T5-style models pass it). A bias that is zero
    everywhere is dropped, so a plain 0/min mask keeps the fused kernels."""
    mask, bias = None, position_bias
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            mask = attention_mask
        elif attention_mask.is_floating_point():
            mask = attention_mask > torch.finfo(attention_mask.dtype).min / 2  # (B, 1, Tq, Tk)
            extra = torch.where(mask, attention_mask, torch.zeros((), dtype=attention_mask.dtype,
                                                                  device=attention_mask.device))
            if bool(extra.ne(0).any()):
                bias = extra if bias is None else bias + extra
        else:
            raise TypeError(
                f"attention_mask has dtype {attention_mask.dtype}; HF passes a bool mask "
                "(True = attend) or an additive float mask (0 = attend, min/-inf = masked)"
            )
    return mask, bias


def repeat_kv(x: Tensor, groups: int) -> Tensor:
    """Grouped-query attention: (B, Hkv, Tk, D) -> (B, Hkv·groups, Tk, D), key/value head g
    serving query heads g·groups .. g·groups + groups - 1 (``repeat_interleave`` on dim 1)."""
    if groups == 1:
        return x
    b, hkv, tk, d = x.shape
    return x[:, :, None].expand(b, hkv, groups, tk, d).reshape(b, hkv * groups, tk, d)


def sliding_radius(sliding_window: int, causal: bool) -> int:
    """HF's ``sliding_window`` W as attnkit's radius r: causal models let query i see keys
    i - W < j <= i (HF ``sliding_window_overlay``: W keys including itself, r = W - 1);
    bidirectional ones |i - j| <= W (HF ``sliding_window_bidirectional_overlay``, r = W)."""
    if isinstance(sliding_window, bool) or not isinstance(sliding_window, int):
        raise TypeError(f"sliding_window={sliding_window!r}; give a positive int")
    if sliding_window < 1:
        raise ValueError(f"sliding_window={sliding_window}; it counts keys, give one >= 1")
    return sliding_window - 1 if causal else sliding_window


def hf_attend(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    *,
    scaling: float | None = None,
    dropout: float = 0.0,
    causal: bool = True,
    normaliser: NormaliseFn = softmax,
    sliding_window: int | None = None,
    position_bias: Tensor | None = None,
    need_weights: bool = False,
    softcap: float | None = None,
    sinks: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Attention in HF's layout through ``attnkit.attend``:

        e = s · q kᵀ, capped: cap · tanh(e / cap)   # (B, H, Tq, Tk), s = scaling (1/√D)
        a = normaliser(e + bias, mask)              # with sinks: a sink logit per head
        c = dropout(a) v                            # (B, H, Tq, Dv) -> (B, Tq, H, Dv)

    ``softcap`` (Gemma 2): the scores soft-capped before the mask and bias
    (``attnkit.stages.softcap``); ``sinks`` (H,) (gpt-oss's ``s_aux``): softmax with a sink
    logit per head in its denominator (``attnkit.stages.sinks``), softmax only. Grouped
    key/value heads go to ``attend`` as they are (``attnkit.grouped``).

    query (B, H, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv); attention_mask as
    ``convert_mask``. ``sliding_window`` W: also restrict to HF's band (``sliding_radius``),
    the queries standing at the last Tq key positions (a dynamic KV cache). Returns
    (attn_output (B, Tq, H, Dv), weights (B, H, Tq, Tk) in the query dtype, after dropout as
    HF's eager attention, or None unless ``need_weights`` or dropout > 0 asks for them).
    """
    b, h, tq, d = query.shape
    hkv, tk = key.shape[1], key.shape[2]
    if h % hkv:
        raise ValueError(f"{h} query heads are not a multiple of {hkv} key/value heads")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout={dropout}; give a probability in [0, 1)")
    if sinks is not None:
        if not is_plain_softmax(normaliser):
            raise ValueError(
                "sinks add a logit to a softmax's denominator; use attn_implementation="
                "'attnkit' or 'attnkit_sliding' for this model"
            )
        normaliser = SinkLogits(sinks)
    if scaling is not None:  # attnkit's scaled dot divides by √D: fold the model's scale in
        query = query * (scaling * math.sqrt(d))
    mask, bias = convert_mask(attention_mask, position_bias)
    score: ScoreFn = scaled_dot_score
    if softcap is not None:
        score = SoftCappedScore(score, softcap)
    if bias is not None:
        score = _biased(bias, score)
    align, positions = None, None
    if sliding_window is not None:
        align = SlidingWindow(sliding_radius(sliding_window, causal), causal=causal)
        if tq != tk:  # the new queries are the last Tq positions of the cached keys
            positions = torch.arange(tk - tq, tk, device=query.device)  # (Tq,)
    elif mask is None and causal and tq > 1:
        mask = causal_mask(tq, tk, device=query.device)  # (Tq, Tk)
    want = need_weights or dropout > 0
    band = (want and align is not None and positions is None and score is scaled_dot_score
            and is_plain_softmax(normaliser))  # fmt: skip
    result = attend(
        query, key, value, score=score, align=align, normaliser=normaliser, mask=mask,
        positions=positions, need_weights=want and not band,
        weights_layout="band" if band else "dense",
    )  # fmt: skip
    context, weights = result.context, result.weights  # (B, H, Tq, Dv), (B, H, Tq, Tk|W)
    if band and weights is not None:  # the O(n·W) kernel's band, spread out for the model
        weights = band_to_dense(weights, result.extras["band_offset"], tk)  # (B, H, Tq, Tk)
    if dropout > 0 and weights is not None:
        weights = F.dropout(weights, p=dropout, training=True)
        full = repeat_kv(value, h // hkv)  # (B, H, Tk, Dv)
        context = weighted_sum(weights, full).context.to(value.dtype)  # (B, H, Tq, Dv)
    out = context.transpose(1, 2).contiguous()  # (B, Tq, H, Dv)
    if not need_weights or weights is None:
        return out, None
    return out, weights.to(query.dtype)


def _biased(bias: Tensor, inner: ScoreFn = scaled_dot_score) -> ScoreFn:
    """score(q, k) = inner(q, k) + bias (inner: qᵀk / √D); bias broadcastable to
    (B, H, Tq, Tk)."""

    def score(query: Tensor, keys: Tensor) -> Tensor:
        return inner(query, keys) + bias.to(query.dtype)  # (B, H, Tq, Tk)

    return score


__all__ = ["convert_mask", "hf_attend", "repeat_kv", "sliding_radius"]
