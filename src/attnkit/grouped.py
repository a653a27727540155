"""Grouped key/value heads: grouped-query attention (Ainslie et al. 2023) and its limit
multi-query attention (Shazeer 2019).

H query heads share Hkv key/value heads, Hkv dividing H, G = H / Hkv query heads per group;
query head h reads key/value head ⌊h / G⌋ (the layout of Llama, Mistral, Qwen, Gemma and of
``F.scaled_dot_product_attention(enable_gqa=True)``):

    head_h = Attn(Q W_h^Q, K W_⌊h/G⌋^K, V W_⌊h/G⌋^V),   h = 0 .. H-1

Hkv = H is multi-head attention, Hkv = 1 multi-query attention. The cache of an incremental
decoder shrinks by H / Hkv.

Legend: H query heads, Hkv key/value heads, G = H / Hkv, Tq queries, Tk keys, D head width.
"""

from __future__ import annotations

from torch import Tensor


def check_kv_heads(heads: int, kv_heads: int | None) -> int:
    """The number of key/value heads (``None``: one per query head); a ValueError naming
    the choices unless it divides ``heads``."""
    if kv_heads is None:
        return heads
    if kv_heads < 1 or heads % kv_heads:
        choices = [h for h in range(1, heads + 1) if heads % h == 0]
        raise ValueError(
            f"kv_heads={kv_heads} does not divide heads={heads}; each key/value head serves "
            f"heads / kv_heads query heads: pick kv_heads from {choices}"
        )
    return kv_heads


def kv_groups(query: Tensor, keys: Tensor) -> int:
    """G = H / Hkv for query (..., H, Tq, D) and keys (..., Hkv, Tk, D); 1 when the heads
    match (or the tensors have no heads dim, or Hkv does not divide H: the shape check of
    ``attend`` then says what differs)."""
    if not (isinstance(query, Tensor) and isinstance(keys, Tensor)):
        return 1  # attend's checks say what is wrong
    if query.dim() < 3 or keys.dim() != query.dim():
        return 1
    h, hkv = query.shape[-3], keys.shape[-3]
    if hkv == h or hkv == 0 or h % hkv or query.shape[:-3] != keys.shape[:-3]:
        return 1
    return h // hkv


def repeat_kv(x: Tensor, groups: int) -> Tensor:
    """(..., Hkv, T, D) -> (..., Hkv·G, T, D), each key/value head repeated for its G query
    heads (a copy): the multi-head attention that grouped attention equals."""
    return x.repeat_interleave(groups, dim=-3)  # (..., H, T, D)


def group_queries(x: Tensor, groups: int) -> Tensor:
    """(..., H, T, D) -> (..., Hkv, G, T, D), a view."""
    return x.unflatten(-3, (-1, groups))


def share_kv(x: Tensor, groups: int) -> Tensor:
    """(..., Hkv, T, D) -> (..., Hkv, G, T, D): each key/value head expanded over its group,
    a view with stride 0 on G (no copy; a kernel that needs contiguous inputs copies it)."""
    return x.unsqueeze(-3).expand(*x.shape[:-2], groups, *x.shape[-2:])


def group_heads_dim(x: Tensor | None, groups: int, at: int) -> Tensor | None:
    """A mask (``at`` = -3) or positions (``at`` = -2) that broadcast against (..., H, ...)
    made to broadcast against (..., Hkv, G, ...): a heads dim of size H is split, one of
    size 1 gains a 1; a tensor with no heads dim broadcasts as it is."""
    if x is None or x.dim() < -at:
        return x
    if x.shape[at] == 1:
        return x.unsqueeze(at)
    return x.unflatten(at, (-1, groups))


def ungroup(x: Tensor, heads_at: int, kv_heads: int, groups: int) -> Tensor:
    """A result (…, Hkv|1, G|1, …) with its heads dims at ``heads_at``, ``heads_at`` + 1
    (counted from the left) back to (…, H|1, …)."""
    if x.dim() <= heads_at + 1:
        return x
    if x.shape[heads_at] == 1 and x.shape[heads_at + 1] == 1:
        return x.squeeze(heads_at + 1)  # the same for every head: keep it broadcasting
    shape = [*x.shape[:heads_at], kv_heads, groups, *x.shape[heads_at + 2 :]]
    return x.expand(shape).flatten(heads_at, heads_at + 1)  # (…, H, …)


__all__ = [
    "check_kv_heads",
    "group_heads_dim",
    "group_queries",
    "kv_groups",
    "repeat_kv",
    "share_kv",
    "ungroup",
]
