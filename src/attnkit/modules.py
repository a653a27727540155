"""Thin modules over ``attend``: they own projections and parameters, nothing else.

Legend: B batch, H heads, Tq queries, Tk keys, D model width, Dh = D / H head width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import check_dtype
from ._renamed import renamed_in
from .core import AttentionResult, NormaliseFn, Reduced, ReduceFn, attend, weighted_sum
from .grouped import check_kv_heads
from .kv_cache import KVCache
from .mask_mods import MaskMod
from .stages.alignment import Alignment, CausalAlignment
from .stages.normalisers import softmax
from .stages.position import Position
from .stages.scores import ScaledDotScore, Score

_EVERY_KEY = Alignment()  # parameter-free: one shared instance, not one per decoding step


def heads_mask(mask: Tensor | None) -> Tensor | None:
    """A (B, Tq, Tk) or (B, 1, Tk) mask gains a heads dim: (B, 1, Tq|1, Tk). 2-D and 4-D masks
    already broadcast against (B, H, Tq, Tk)."""
    if isinstance(mask, MaskMod):  # a mask function: attend makes it (B, 1, Tq, Tk) itself
        return mask
    if mask is not None and not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a bool torch.Tensor or None, got {type(mask).__name__}")
    if mask is not None and mask.dim() == 3:
        return mask[:, None]
    return mask


def heads_positions(positions: Tensor | None) -> Tensor | None:
    """Query positions (B, Tq) gain a heads dim: (B, 1, Tq); (Tq,) already broadcasts."""
    return positions[:, None] if positions is not None and positions.dim() == 2 else positions


def split_heads(x: Tensor, heads: int) -> Tensor:
    """(B, T, H·Dh) -> (B, H, T, Dh), a view: einops' "b t (h d) -> b h t d" without its
    per-call parsing (this runs for every projection of every decoding step)."""
    return x.unflatten(-1, (heads, -1)).transpose(1, 2)


def check_heads(dim: int, heads: int) -> int:
    if heads < 1:
        raise ValueError(f"heads={heads}; need at least one head")
    if dim % heads:
        raise ValueError(
            f"heads={heads} does not divide the width {dim}; pick heads from "
            f"{[h for h in range(1, dim + 1) if dim % h == 0]}"
        )
    return dim // heads


class DropoutReduce:
    """Weighted sum with dropout on the weights (Vaswani 2017, §5.4 attention dropout).
    The dropped weights that made the context come back as ``extras["dropped_weights"]``."""

    def __init__(self, dropout: nn.Dropout) -> None:
        self.dropout = dropout

    def __call__(self, weights: Tensor, values: Tensor) -> Reduced:
        dropped = self.dropout(weights)  # (..., Tq, Tk)
        return Reduced(weighted_sum(dropped, values).context, {"dropped_weights": dropped})


class Attention(nn.Module):
    """Single-head attention without projections, as in Bahdanau 2015 and Luong 2015: the
    score (and a local-p alignment) own whatever parameters there are.

    forward(query (B, Tq, Dq), keys (B, Tk, Dk), values (B, Tk, Dv) = keys, mask, positions)
    -> result with context (B, Tq, Dv) and weights (B, Tq, Tk); positions (B, Tq) or (Tq,)
    are the queries' places in their sequence (default 0 .. Tq-1; a decoder passes its step).
    """

    def __init__(
        self,
        score: Score | None = None,
        align: Alignment | None = None,
        normaliser: NormaliseFn = softmax,
        reduce: ReduceFn = weighted_sum,
        position: Position | None = None,
    ) -> None:
        super().__init__()
        self.score = ScaledDotScore() if score is None else score
        self.align = Alignment() if align is None else align
        self.normaliser = normaliser
        self.reduce = reduce
        self.position = position

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = True,
        positions: Tensor | None = None,
    ) -> AttentionResult:
        values = keys if values is None else values
        check_dtype(self, query=query, keys=keys, values=values)
        return attend(
            query,
            keys,
            values,
            score=self.score,
            align=self.align,
            normaliser=self.normaliser,
            reduce=self.reduce,
            mask=mask,
            positions=positions,
            position=self.position,
            need_weights=need_weights,
        )


class AttentionHeads(nn.Module):
    """Multi-head attention (Vaswani 2017, §3.2.2):

        MultiHead(Q, K, V) = Concat(head_1..head_H) W^O,  head_i = Attn(Q W_i^Q, K W_i^K, V W_i^V)

    The per-head attention is any score / alignment / normaliser (built for width Dh), with
    an optional position stage (``attnkit.stages.position``, built for H heads of width Dh).
    ``key_dim`` defaults to ``dim``, ``value_dim`` to ``key_dim`` (values default to keys).
    ``kv_heads``: Hkv key/value heads shared by groups of H / Hkv query heads, grouped-query
    attention (Ainslie et al. 2023; Hkv = 1 is multi-query attention, Shazeer 2019; None:
    Hkv = H), ``attnkit.grouped``: W^K and W^V project to Hkv·Dh, a decoding cache holds
    Hkv heads.
    forward(query (B, Tq, D), keys (B, Tk, Dk) = query, values (B, Tk, Dv) = keys, mask,
    positions (B, Tq) or (Tq,) = 0 .. Tq-1)
    -> context (B, Tq, D), weights (B, H, Tq, Tk), or (B, Tq, Tk) with ``average_weights``.

    Called ``MultiHeadAttention`` until this release (the old name still works, with a
    DeprecationWarning, for one release); not to be mistaken for
    ``attnkit.nn.MultiheadAttention``, the drop-in for ``torch.nn.MultiheadAttention``.
    """

    def __init__(
        self,
        dim: int,
        heads: int = 1,
        *,
        key_dim: int | None = None,
        value_dim: int | None = None,
        score: Score | None = None,
        align: Alignment | None = None,
        normaliser: NormaliseFn = softmax,
        bias: bool = True,
        dropout: float = 0.0,
        position: Position | None = None,
        kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = check_heads(dim, heads)
        self.kv_heads = check_kv_heads(heads, kv_heads)
        kv_width = self.kv_heads * self.head_dim  # Hkv·Dh
        self.q_proj = nn.Linear(dim, dim, bias=bias)
        key_dim = dim if key_dim is None else key_dim
        value_dim = key_dim if value_dim is None else value_dim  # values default to the keys
        self.k_proj = nn.Linear(key_dim, kv_width, bias=bias)
        self.v_proj = nn.Linear(value_dim, kv_width, bias=bias)
        self.out_proj = nn.Linear(dim, dim, bias=bias)
        self.score = ScaledDotScore() if score is None else score
        self.align = Alignment() if align is None else align
        self.normaliser = normaliser
        self.dropout = nn.Dropout(dropout)
        self.position = position

    def forward(
        self,
        query: Tensor,
        keys: Tensor | None = None,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = True,
        average_weights: bool = False,
        positions: Tensor | None = None,
    ) -> AttentionResult:
        return self.attend_with(
            self.align, query, keys, values, mask, need_weights, average_weights, positions
        )

    def attend_with(
        self,
        align: Alignment,
        query: Tensor,
        keys: Tensor | None = None,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = True,
        average_weights: bool = False,
        positions: Tensor | None = None,
    ) -> AttentionResult:
        """``forward`` with another alignment in place of the module's own (same weights)."""
        keys = query if keys is None else keys
        values = keys if values is None else values
        if query.dim() != 3 or keys.dim() != 3 or values.dim() != 3:
            raise ValueError(
                f"expected (B, T, D) inputs, got query {tuple(query.shape)}, keys "
                f"{tuple(keys.shape)}, values {tuple(values.shape)}"
            )
        if not (query.shape[0] == keys.shape[0] == values.shape[0]):
            raise ValueError(
                f"batch sizes differ: query {tuple(query.shape)}, keys {tuple(keys.shape)}, "
                f"values {tuple(values.shape)}; inputs are (B, T, D) with one B"
            )
        check_dtype(self, query=query, keys=keys, values=values)
        for name, x, layer in (
            ("query", query, self.q_proj),
            ("keys", keys, self.k_proj),
            ("values", values, self.v_proj),
        ):
            if x.shape[-1] != layer.in_features:
                raise ValueError(
                    f"{name} has width {x.shape[-1]} but this module expects "
                    f"{layer.in_features}; see AttentionHeads(dim, key_dim, value_dim)"
                )
        if keys is query and values is query and self._fusable():  # self-attention
            q, k, v = self.project_qkv(query)  # (B, H, T, Dh) each
            return self.attend_heads(q, k, v, align, mask, need_weights, average_weights,
                                     positions)  # fmt: skip
        k, v = self.project_keys(keys, values)  # (B, H, Tk, Dh) each
        return self.attend_projected(
            query, k, v, align, mask, need_weights, average_weights, positions
        )

    def _fusable(self) -> bool:
        """q, k, v may come from one matrix product: three plain nn.Linear of the same input
        width that no forward hook observes (a hook on q_proj expects to be called)."""
        layers = (self.q_proj, self.k_proj, self.v_proj)
        plain = all(type(lay) is nn.Linear for lay in layers)
        hooked = any(lay._forward_hooks or lay._forward_pre_hooks for lay in layers)
        return plain and not hooked and len({lay.in_features for lay in layers}) == 1

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention's x W^Q, x W^K, x W^V as one matrix product with the three weights
        concatenated, (B, T, D) @ (D, D + 2·Hkv·Dh) (the parameters stay three; checkpoints
        unchanged) -> per-head q (B, H, T, Dh), k, v (B, Hkv, T, Dh)."""
        layers = (self.q_proj, self.k_proj, self.v_proj)
        weight = torch.cat([layer.weight for layer in layers])  # (D + 2·Hkv·Dh, D)
        bias = None if self.q_proj.bias is None else torch.cat([lay.bias for lay in layers])
        widths = [layer.out_features for layer in layers]
        q, k, v = F.linear(x, weight, bias).split(widths, dim=-1)  # (B, T, D|Hkv·Dh)
        hkv = self.kv_heads
        return split_heads(q, self.heads), split_heads(k, hkv), split_heads(v, hkv)

    def project_keys(self, keys: Tensor, values: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """keys (B, Tk, Dk), values (B, Tk, Dv) = keys -> per-head K W^K, V W^V,
        (B, Hkv, Tk, Dh) each: what an incremental decoder caches, projected once instead of
        at every step."""
        values = keys if values is None else values
        k = split_heads(self.k_proj(keys), self.kv_heads)  # (B, Hkv, Tk, Dh)
        return k, split_heads(self.v_proj(values), self.kv_heads)  # (B, Hkv, Tk, Dh) each

    def attend_projected(
        self,
        query: Tensor,
        k: Tensor,
        v: Tensor,
        align: Alignment | None = None,
        mask: Tensor | None = None,
        need_weights: bool = True,
        average_weights: bool = False,
        positions: Tensor | None = None,
    ) -> AttentionResult:
        """``forward`` on keys and values already projected by ``project_keys``: query
        (B, Tq, D), k, v (B, Hkv, Tk, Dh); ``align`` defaults to the module's own."""
        q = split_heads(self.q_proj(query), self.heads)  # (B, H, Tq, Dh)
        return self.attend_heads(q, k, v, align, mask, need_weights, average_weights, positions)

    def attend_heads(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        align: Alignment | None = None,
        mask: Tensor | None = None,
        need_weights: bool = True,
        average_weights: bool = False,
        positions: Tensor | None = None,
        key_positions: Tensor | None = None,
    ) -> AttentionResult:
        """Attention of projected per-head queries q (B, H, Tq, Dh) over k, v
        (B, Hkv, Tk, Dh) (query head h reads key/value head ⌊h·Hkv/H⌋), then W^O: context
        (B, Tq, D)."""
        use_dropout = self.training and self.dropout.p > 0
        result = attend(
            q,
            k,
            v,
            score=self.score,
            align=self.align if align is None else align,
            normaliser=self.normaliser,
            reduce=DropoutReduce(self.dropout) if use_dropout else weighted_sum,
            mask=heads_mask(mask),
            positions=heads_positions(positions),
            position=self.position,
            key_positions=key_positions if self.position is not None else None,
            need_weights=need_weights,
        )
        context = self.out_proj(result.context.transpose(1, 2).flatten(2))  # (B, Tq, D)
        weights = result.weights
        if weights is not None and average_weights:
            weights = weights.mean(dim=1)  # (B, Tq, Tk)
        return AttentionResult(context, weights, result.scores, result.extras)


    def step(
        self, x: Tensor, cache: KVCache | tuple[Tensor, Tensor], need_weights: bool = False
    ) -> tuple[AttentionResult, KVCache | tuple[Tensor, Tensor]]:
        """Incremental causal self-attention (a ``SelfAttention``, or this module with
        keys = values = query): x (B, 1, D) is position t of a causal sequence; ``cache`` holds
        the projected keys and values of positions < t: an ``attnkit.KVCache`` (``new_cache``;
        x's row is written into it in place, and it is returned), or the earlier form, a
        tuple (B, Hkv, t, Dh) each (``empty_cache`` at t = 0) returned grown by
        ``torch.cat``, an O(t) copy per step. x attends the cached keys and itself. Equals
        row t of ``forward(x_0 .. x_t)`` with a causal alignment, at O(t) cost, projecting one
        row per step instead of the whole prefix; with a sliding ``KVCache`` (window w, s
        sinks), row t of ``forward`` under the mask (j < s) | (0 <= t - j < w); with its
        ``renumber``, the query and keys at their positions within the cache (StreamingLLM)."""
        if not isinstance(self.align, CausalAlignment):
            raise ValueError(
                f"step() is incremental causal decoding; this module's alignment is "
                f"{type(self.align).__name__}, use forward() on the whole sequence"
            )
        if x.dim() != 3 or x.shape[1] != 1:
            raise ValueError(f"step() takes one position x (B, 1, D), got {tuple(x.shape)}")
        if self._fusable():
            q, k_new, v_new = self.project_qkv(x)  # (B, H|Hkv, 1, Dh)
        else:
            q = split_heads(self.q_proj(x), self.heads)  # (B, H, 1, Dh)
            k_new, v_new = self.project_keys(x)  # (B, Hkv, 1, Dh)
        at = kpos = None  # a position stage's query and key positions
        if isinstance(cache, KVCache):
            k, v = cache.update(k_new, v_new)  # in place; (B, Hkv, size, Dh) views
            if self.position is not None:
                at = torch.full((1,), cache.newest, device=x.device)
                if cache.window is not None:  # a ring's slots: out of order once it wraps
                    kpos = cache.positions
        else:
            k = torch.cat([cache[0], k_new], dim=2)  # (B, Hkv, t+1, Dh)
            v = torch.cat([cache[1], v_new], dim=2)  # (B, Hkv, t+1, Dh)
            cache = (k, v)
            if self.position is not None:
                at = torch.full((1,), k.shape[2] - 1, device=x.device)
        # every cached key is at or before t: a global alignment, no mask; a position stage
        # sees the query at t, the keys at their positions (0 .. t unless a ring reordered)
        result = self.attend_heads(q, k, v, _EVERY_KEY, None, need_weights, False, at, kpos)
        return result, cache

    def new_cache(
        self, batch: int, like: Tensor, capacity: int | None = None, *,
        window: int | None = None, sinks: int = 0, grow: bool = False, renumber: bool = False,
    ) -> KVCache:  # fmt: skip
        """An ``attnkit.KVCache`` for ``step``: ``capacity`` tokens (full), or a sliding
        ``window`` with ``sinks`` (``renumber``: positions within the cache); Hkv heads of
        width Dh, ``like``'s dtype and device."""
        return KVCache.like(self, batch, capacity, like=like, window=window, sinks=sinks,
                            grow=grow, renumber=renumber)  # fmt: skip

    def empty_cache(self, batch: int, like: Tensor) -> tuple[Tensor, Tensor]:
        """The ``step`` cache of t = 0: keys and values (B, Hkv, 0, Dh), ``like``'s
        dtype/device."""
        empty = like.new_zeros(batch, self.kv_heads, 0, self.head_dim)  # (B, Hkv, 0, Dh)
        return empty, empty


class SelfAttention(AttentionHeads):
    """Multi-head self-attention: queries, keys and values are the same sequence x (B, T, D)."""

    def forward(  # type: ignore[override]
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = True
    ) -> AttentionResult:
        return super().forward(x, x, x, mask=mask, need_weights=need_weights)

class CrossAttention(AttentionHeads):
    """Multi-head cross (encoder-decoder) attention: x (B, Tq, D) attends memory (B, Tk, Dk)."""

    def forward(  # type: ignore[override]
        self, x: Tensor, memory: Tensor, mask: Tensor | None = None, need_weights: bool = True
    ) -> AttentionResult:
        return super().forward(x, memory, memory, mask=mask, need_weights=need_weights)


# MultiHeadAttention: renamed AttentionHeads; kept for one release
__getattr__ = renamed_in(__name__, MultiHeadAttention=("AttentionHeads", AttentionHeads))


__all__ = [
    "Attention",
    "AttentionHeads",
    "CrossAttention",
    "DropoutReduce",
    "SelfAttention",
    "check_heads",
    "heads_mask",
    "heads_positions",
]
