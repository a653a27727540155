"""A drop-in ``torch.nn.MultiheadAttention`` whose score, alignment and normaliser can be swapped.

Same constructor, same ``forward`` signature and return value, same parameter names (a
``torch.nn.MultiheadAttention`` state_dict loads as it is). Masks follow PyTorch here, at the
boundary: ``key_padding_mask`` True = IGNORE, a bool ``attn_mask`` True = NOT allowed, a float
``attn_mask`` is added to the scores. Inside, they become attnkit masks (True = may attend).
One difference: a query whose keys are all masked gets a zero output, not NaN.

Legend: B batch, H heads, L target length (Tq), S source length (Tk), E embed dim, Dh = E / H.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from .._checks import check_dtype
from ..core import AttentionResult, NormaliseFn, attend, weighted_sum
from ..masks import and_masks, causal_mask
from ..modules import DropoutReduce, check_heads
from ..stages.alignment import Alignment
from ..stages.normalisers import softmax
from ..stages.position import Position
from ..stages.scores import ScaledDotScore, Score


class _BiasedScore:
    """score(q, k) + bias, the float ``attn_mask`` of PyTorch (its -inf entries are a mask)."""

    def __init__(self, score: Score, bias: Tensor) -> None:
        self.score = score
        self.bias = bias

    def __call__(self, query: Tensor, keys: Tensor) -> Tensor:
        return self.score(query, keys) + self.bias  # (B, H, L, S)


class MultiheadAttention(nn.Module):
    """``torch.nn.MultiheadAttention`` with swappable attention (Vaswani 2017, §3.2.2).

    Extra keyword-only arguments: ``score`` (a Score built for width E / num_heads),
    ``align``, ``normaliser`` and ``position`` (a position stage of ``attnkit.stages.position`` for
    num_heads heads of width E / num_heads: queries at 0 .. L-1, keys at 0 .. S-1; not with
    ``add_bias_kv`` or ``add_zero_attn``, whose extra keys have no position). Scores and
    stages with parameters add state_dict keys; load a PyTorch state_dict with
    ``strict=False`` then.
    """

    in_proj_weight: nn.Parameter | None
    q_proj_weight: nn.Parameter | None
    k_proj_weight: nn.Parameter | None
    v_proj_weight: nn.Parameter | None
    in_proj_bias: nn.Parameter | None
    bias_k: nn.Parameter | None
    bias_v: nn.Parameter | None

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        score: Score | None = None,
        align: Alignment | None = None,
        normaliser: NormaliseFn = softmax,
        position: Position | None = None,
    ) -> None:
        super().__init__()
        if position is not None and (add_bias_kv or add_zero_attn):
            raise ValueError(
                "position=... gives each key its place 0 .. S-1; the extra keys of "
                "add_bias_kv / add_zero_attn have none: drop one or the other"
            )
        self.position = position
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.head_dim = check_heads(embed_dim, num_heads)
        self.dropout = dropout
        self.batch_first = batch_first
        self.add_zero_attn = add_zero_attn
        if self._qkv_same_embed_dim:
            self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim, **factory))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = nn.Parameter(torch.empty(embed_dim, embed_dim, **factory))
            self.k_proj_weight = nn.Parameter(torch.empty(embed_dim, self.kdim, **factory))
            self.v_proj_weight = nn.Parameter(torch.empty(embed_dim, self.vdim, **factory))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = nn.Parameter(torch.empty(3 * embed_dim, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, embed_dim, **factory))
            self.bias_v = nn.Parameter(torch.empty(1, 1, embed_dim, **factory))
        else:
            self.bias_k = self.bias_v = None
        self.score = ScaledDotScore() if score is None else score
        self.align = Alignment() if align is None else align
        self.normaliser = normaliser
        self._drop = nn.Dropout(dropout)
        self._reset_parameters()

    def _in_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        if self.in_proj_weight is not None:
            w_q, w_k, w_v = self.in_proj_weight.split(self.embed_dim)
            return w_q, w_k, w_v
        assert self.q_proj_weight is not None and self.k_proj_weight is not None
        assert self.v_proj_weight is not None
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def _reset_parameters(self) -> None:
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                nn.init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            nn.init.constant_(self.in_proj_bias, 0.0)
            if self.out_proj.bias is not None:
                nn.init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None and self.bias_v is not None:
            nn.init.xavier_normal_(self.bias_k)
            nn.init.xavier_normal_(self.bias_v)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        w_q, w_k, w_v = self._in_weights()
        b_q = b_k = b_v = None
        if self.in_proj_bias is not None:
            b_q, b_k, b_v = self.in_proj_bias.split(self.embed_dim)
        return F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)

    def _check(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        if not (query.dim() == key.dim() == value.dim()) or query.dim() not in (2, 3):
            raise ValueError(
                f"query, key and value must all be 3-D (batched) or 2-D (unbatched); got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        batch_dim = 0 if self.batch_first else 1
        if query.dim() == 3 and not (
            query.shape[batch_dim] == key.shape[batch_dim] == value.shape[batch_dim]
        ):
            layout = "(B, L, E)" if self.batch_first else "(L, B, E) (batch_first=False)"
            raise ValueError(
                f"batch sizes differ: query {tuple(query.shape)}, key {tuple(key.shape)}, "
                f"value {tuple(value.shape)}; inputs are {layout} with one B"
            )
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(
                f"key {tuple(key.shape)} and value {tuple(value.shape)} differ before the last "
                "dim; each key needs one value"
            )
        for name, x, width in (
            ("query", query, self.embed_dim),
            ("key", key, self.kdim),
            ("value", value, self.vdim),
        ):
            if x.shape[-1] != width:
                raise ValueError(
                    f"{name} has width {x.shape[-1]} but this module was built for {width}; "
                    "see MultiheadAttention(embed_dim, kdim, vdim)"
                )
        check_dtype(self, query=query, key=key, value=value)

    def _mask(
        self,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool,
        b: int,
        tq: int,
        tk: int,
        device: torch.device,
    ) -> tuple[Tensor | None, Tensor | None]:
        """-> (allowed (B|1, H|1, L, S) True = may attend, additive bias (B|1, H|1, L, S))."""
        allowed: Tensor | None = None
        bias: Tensor | None = None
        if attn_mask is not None:
            expected = [(tq, tk), (b * self.num_heads, tq, tk)]
            if tuple(attn_mask.shape) not in expected:
                raise ValueError(
                    f"attn_mask has shape {tuple(attn_mask.shape)}; expected (L, S) = "
                    f"{expected[0]} or (B*num_heads, L, S) = {expected[1]}"
                )
            m = attn_mask if attn_mask.dim() == 2 else attn_mask.view(b, self.num_heads, tq, tk)
            if m.dtype == torch.bool:
                allowed = ~m
            elif m.is_floating_point():
                allowed = ~torch.isneginf(m)
                bias = m.masked_fill(~allowed, 0.0)
            else:
                raise TypeError(f"attn_mask must be bool or float, got {m.dtype}")
        elif is_causal:
            allowed = causal_mask(tq, tk, device=device)
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (b, tk):
                raise ValueError(
                    f"key_padding_mask has shape {tuple(key_padding_mask.shape)}; expected "
                    f"(B, S) = {(b, tk)}, True marking keys to ignore"
                )
            if key_padding_mask.dtype == torch.bool:
                allowed = and_masks(allowed, ~key_padding_mask[:, None, None, :])
            elif key_padding_mask.is_floating_point():
                kb = key_padding_mask[:, None, None, :]
                allowed = and_masks(allowed, ~torch.isneginf(kb))
                kb = kb.masked_fill(torch.isneginf(kb), 0.0)
                bias = kb if bias is None else bias + kb
            else:
                raise TypeError(
                    f"key_padding_mask must be bool or float, got {key_padding_mask.dtype}"
                )
        return allowed, bias

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query (L, B, E) or (B, L, E) with batch_first, or (L, E) unbatched; key/value
        likewise with S. Returns (output like query, weights (B, L, S) averaged over heads or
        (B, H, L, S); None when need_weights is False)."""
        self._check(query, key, value)
        unbatched = query.dim() == 2
        if unbatched:
            query, key, value = query[:, None], key[:, None], value[:, None]
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask[None]
        if self.batch_first and not unbatched:
            q_in, k_in, v_in = query, key, value  # (B, L, E)
        else:
            q_in, k_in, v_in = (x.transpose(0, 1) for x in (query, key, value))  # (B, L, E)
        q, k, v = self._project(q_in, k_in, v_in)  # (B, L, E), (B, S, E), (B, S, E)
        b, tq = q.shape[0], q.shape[1]
        if is_causal and attn_mask is None:
            # PyTorch polarity (True = not allowed), over the real keys only: the bias_k and
            # zero keys appended below stay visible to every query, as with an explicit mask.
            attn_mask = ~causal_mask(tq, k.shape[1], device=q.device)  # (L, S)
        if self.bias_k is not None and self.bias_v is not None:
            k = torch.cat([k, self.bias_k.expand(b, 1, -1)], dim=1)  # (B, S+1, E)
            v = torch.cat([v, self.bias_v.expand(b, 1, -1)], dim=1)
            attn_mask = _pad_last(attn_mask)
            key_padding_mask = _pad_last(key_padding_mask)
        h = self.num_heads
        q = rearrange(q, "b l (h d) -> b h l d", h=h)  # (B, H, L, Dh)
        k = rearrange(k, "b s (h d) -> b h s d", h=h)  # (B, H, S, Dh)
        v = rearrange(v, "b s (h d) -> b h s d", h=h)  # (B, H, S, Dh)
        if self.add_zero_attn:
            k = torch.cat([k, k.new_zeros(b, h, 1, self.head_dim)], dim=2)  # (B, H, S+1, Dh)
            v = torch.cat([v, v.new_zeros(b, h, 1, self.head_dim)], dim=2)
            attn_mask = _pad_last(attn_mask)
            key_padding_mask = _pad_last(key_padding_mask)
        allowed, bias = self._mask(
            attn_mask, key_padding_mask, is_causal, b, tq, k.shape[2], q.device
        )
        score = self.score if bias is None else _BiasedScore(self.score, bias)
        use_dropout = self.training and self.dropout > 0
        result: AttentionResult = attend(
            q,
            k,
            v,
            score=score,
            align=self.align,
            normaliser=self.normaliser,
            reduce=DropoutReduce(self._drop) if use_dropout else weighted_sum,
            mask=allowed,
            position=self.position,
            need_weights=need_weights,
        )
        out = self.out_proj(rearrange(result.context, "b h l d -> b l (h d)"))  # (B, L, E)
        if not (self.batch_first and not unbatched):
            out = out.transpose(0, 1)  # (L, B, E)
        weights = None
        if need_weights and result.weights is not None:
            # like PyTorch, return the weights after dropout: the ones that made the output
            weights = result.extras.get("dropped_weights", result.weights).to(out.dtype)
            # (B, H, L, S)
            if average_attn_weights:
                weights = weights.mean(dim=1)  # (B, L, S)
        if unbatched:
            out = out[:, 0]
            weights = None if weights is None else weights[0]
        return out, weights


def _pad_last(mask: Tensor | None) -> Tensor | None:
    """Add one allowed key at the end of a PyTorch-polarity mask (False / 0.0 = allowed)."""
    if mask is None:
        return None
    return F.pad(mask, (0, 1))
