"""A key/value cache for incremental decoding: preallocated, written in place.

    cache = KVCache(batch=2, kv_heads=2, head_dim=16, capacity=256)      # full
    cache = KVCache(batch=2, kv_heads=2, head_dim=16, window=64, sinks=4)  # O(w) memory
    result, cache = self_attention.step(x_t, cache)                       # one token

Policies:

* **full**: room for ``capacity`` tokens; token t is written at slot t. Past the capacity a
  ValueError (or, with ``grow=True``, the buffers double: amortised O(1) per token);
* **sliding window with sinks** (Xiao et al. 2023, StreamingLLM, §3.2): the first ``sinks``
  tokens are kept for good, the last ``window`` tokens in a ring of ``window`` slots
  (slot s + (t - s) mod w), so memory stays O(s + w) however long the sequence. A query
  at t attends keys j < s or t - w < j <= t: the mask ``(j < s) | (0 <= t - j < w)``.
  Its keys carry their positions in the text (``positions``; the query is at t), or with
  ``renumber=True`` their positions within the cache, as StreamingLLM does (§3.2: "positions
  within the cache rather than those in the original text"; tokens [0, 1, 2, 3, 6, 7, 8]
  decoding 9 are at [0, 1, ..., 7]): the kept tokens numbered 0 .. size-1 in text order, the
  query at size-1, so that a relative position stage (RoPE, ALiBi) never sees a distance
  beyond s + w. A RoPE stage rotates the cached (unrotated) keys at each step;
* **cross-attention** (``KVCache.fixed``): keys and values of a source projected once (by
  ``AttentionHeads.project_keys``), read by every step; appending to it is an error.

Each step writes its new rows into the buffers (no torch.cat of the whole prefix, which
copies O(t) per token); ``keys``/``values`` are views of the filled slots. The slots of a
ring are out of order once it wraps: attention over every cached key does not depend on
their order, and ``positions`` gives each slot's token position for a position stage.

Legend: B batch, Hkv key/value heads, C capacity (slots), n new tokens, Dh head width,
Dv value width.
"""

from __future__ import annotations

import torch
from torch import Tensor


class KVCache:
    """Keys (B, Hkv, C, Dh) and values (B, Hkv, C, Dv) of the tokens decoded so far, with a
    policy (see the module doc): ``capacity`` slots (full), or ``window`` (+ ``sinks``)."""

    def __init__(
        self,
        batch: int,
        kv_heads: int,
        head_dim: int,
        capacity: int | None = None,
        *,
        window: int | None = None,
        sinks: int = 0,
        value_dim: int | None = None,
        grow: bool = False,
        renumber: bool = False,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        for name, n in (("batch", batch), ("kv_heads", kv_heads), ("head_dim", head_dim)):
            if n < 1:
                raise ValueError(f"{name}={n}; a cache needs {name} >= 1")
        if window is None:
            if capacity is None or capacity < 1:
                raise ValueError(
                    f"capacity={capacity}; give the most tokens the cache holds (>= 1), or "
                    "window=w for a sliding window of w tokens"
                )
            if sinks or renumber:
                what = "sinks are kept" if sinks else "renumber=True renumbers the tokens kept"
                raise ValueError(f"{what} by a sliding window; give window=w too")
        else:
            if window < 1 or sinks < 0:
                raise ValueError(
                    f"window={window}, sinks={sinks}; a sliding cache keeps window >= 1 "
                    "recent tokens and sinks >= 0 first ones"
                )
            if capacity is not None and capacity != sinks + window:
                raise ValueError(
                    f"capacity={capacity} with window={window}, sinks={sinks}: a sliding "
                    "cache holds sinks + window slots; leave capacity out"
                )
            if grow:
                raise ValueError("grow=True is for a full cache; a sliding one never fills")
            capacity = sinks + window
        self.window, self.sinks, self.grow, self.renumber = window, sinks, grow, renumber
        dv = head_dim if value_dim is None else value_dim
        self.k = torch.zeros(batch, kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros(batch, kv_heads, capacity, dv, dtype=dtype, device=device)
        self.pos = torch.zeros(capacity, dtype=torch.long, device=device)  # (C,) each slot's
        self.length = 0  # tokens appended so far (t)
        self.fixed_ = False
        self._note_rows()

    @classmethod
    def fixed(cls, keys: Tensor, values: Tensor) -> KVCache:
        """The cross-attention policy: keys (B, Hkv, Tk, Dh) and values (B, Hkv, Tk, Dv) of a
        source, projected once (``project_keys``), held as they are; ``append`` refuses."""
        if keys.dim() != 4 or values.shape[:3] != keys.shape[:3]:
            raise ValueError(
                f"keys {tuple(keys.shape)}, values {tuple(values.shape)}: give projected "
                "(B, Hkv, Tk, Dh) keys and (B, Hkv, Tk, Dv) values (project_keys)"
            )
        cache = cls.__new__(cls)
        cache.window, cache.sinks, cache.grow, cache.renumber = None, 0, False, False
        cache.k, cache.v = keys, values
        cache.pos = torch.arange(keys.shape[2], device=keys.device)
        cache.length, cache.fixed_ = keys.shape[2], True
        cache._note_rows()
        return cache

    @classmethod
    def like(
        cls, attention: torch.nn.Module, batch: int, capacity: int | None = None, *,
        like: Tensor, **policy: object,
    ) -> KVCache:  # fmt: skip
        """A cache sized for an ``AttentionHeads`` module (its Hkv heads of width Dh), in the
        dtype and on the device of ``like``; ``policy``: window, sinks, grow, renumber."""
        return cls(batch, attention.kv_heads, attention.head_dim, capacity,  # type: ignore[arg-type]
                   dtype=like.dtype, device=like.device, **policy)  # type: ignore[arg-type]

    @property
    def capacity(self) -> int:
        """The slots the buffers hold (C)."""
        return self.k.shape[2]

    @property
    def size(self) -> int:
        """The filled slots: min(t, C)."""
        return min(self.length, self.capacity)

    @property
    def keys(self) -> Tensor:
        """The cached keys (B, Hkv, size, Dh): a view of the filled slots."""
        return self.k[:, :, : self.size]

    @property
    def values(self) -> Tensor:
        """The cached values (B, Hkv, size, Dv): a view of the filled slots."""
        return self.v[:, :, : self.size]

    @property
    def positions(self) -> Tensor:
        """The position of each filled slot (size,): 0 .. t-1 in order for a full cache; the
        sinks, then the ring's tokens in slot order for a sliding one: their positions in
        the text, or with ``renumber`` within the cache (a ring token at text position p is
        at p - e, e = t - size the tokens evicted so far; a sink keeps its own)."""
        if self.window is None:
            return torch.arange(self.size, device=self.k.device)
        pos = self.pos[: self.size]  # (size,)
        if not self.renumber:
            return pos
        return torch.where(pos < self.sinks, pos, pos - (self.length - self.size))

    @property
    def newest(self) -> int:
        """The position of the last token appended (the query of a decoding step): t - 1 in
        the text, or size - 1 within the cache with ``renumber``."""
        return (self.size if self.renumber else self.length) - 1

    def update(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """``append`` the new tokens' keys (B, Hkv, n, Dh) and values (B, Hkv, n, Dv), then
        return the cached ``keys`` (B, Hkv, size, Dh) and ``values`` (B, Hkv, size, Dv):
        a decoding step's one call (``AttentionHeads.step``). One token into a full cache
        with room, the common step, takes a short path: the slot and the filled slots as
        ``narrow`` views, a ``copy_`` per tensor (at a decoding step's sizes the Python
        around each tensor call costs more than the copy it makes)."""
        t = self.length
        if (
            self.window is None
            and not self.fixed_
            and t < self.k.shape[2]
            and keys.shape == self._row_k
            and values.shape == self._row_v
        ):
            self.k.narrow(2, t, 1).copy_(keys)  # (B, Hkv, 1, Dh), in place: slot t
            self.v.narrow(2, t, 1).copy_(values)
            self.length = t + 1
            return self.k.narrow(2, 0, t + 1), self.v.narrow(2, 0, t + 1)  # (B, Hkv, t+1, .)
        self.append(keys, values)
        return self.keys, self.values

    def _note_rows(self) -> None:
        """Keep the shapes of one token's keys (B, Hkv, 1, Dh) and values (B, Hkv, 1, Dv)
        for ``update``'s check: at every change of the buffers' batch or widths."""
        self._row_k = self.k[:, :, :1].shape
        self._row_v = self.v[:, :, :1].shape

    def append(self, keys: Tensor, values: Tensor) -> None:
        """Write n new tokens' keys (B, Hkv, n, Dh) and values (B, Hkv, n, Dv) into their
        slots, in place: positions t .. t+n-1. A full cache past its capacity raises (or
        doubles, with ``grow``); a sliding one overwrites its oldest non-sink slots."""
        if self.fixed_:
            raise ValueError(
                "this cache holds a source's cross-attention keys (KVCache.fixed); it takes "
                "no new tokens: build a KVCache(...) for self-attention"
            )
        b, h, n = keys.shape[:3]
        if (b, h) != tuple(self.k.shape[:2]) or keys.shape[3] != self.k.shape[3]:
            raise ValueError(
                f"keys {tuple(keys.shape)} do not fit a cache of {tuple(self.k.shape)} "
                "(B, Hkv, C, Dh); build the cache for this module (KVCache.like)"
            )
        if values.shape[:3] != keys.shape[:3] or values.shape[3] != self.v.shape[3]:
            raise ValueError(
                f"values {tuple(values.shape)} do not match keys {tuple(keys.shape)} in a "
                f"cache of values {tuple(self.v.shape)} (B, Hkv, C, Dv); give one value row "
                "per key, Dv wide"
            )
        t = self.length
        if self.window is None:
            if t + n > self.capacity:
                if not self.grow:
                    raise ValueError(
                        f"the cache holds {self.capacity} tokens and is asked for "
                        f"{t + n}; give a larger capacity, window=w (a sliding cache), or "
                        "grow=True"
                    )
                self._reserve(t + n)
            self.k[:, :, t : t + n] = keys  # (B, Hkv, n, Dh), in place
            self.v[:, :, t : t + n] = values
            self.length = t + n  # a full cache's slot j holds position j: ``positions``
            return
        s, w = self.sinks, self.window
        if n == 1:  # a decoding step: one slot, found on the host
            slot = t if t < s else s + (t - s) % w
            self.k[:, :, slot : slot + 1] = keys
            self.v[:, :, slot : slot + 1] = values
            self.pos[slot] = t
            self.length = t + 1
            return
        at = torch.arange(t, t + n, device=self.k.device)  # (n,) the new positions
        keep = (at < s) | (at >= t + n - w)  # the tokens that survive this write
        at, keys, values = at[keep], keys[:, :, keep], values[:, :, keep]
        slots = torch.where(at < s, at, s + (at - s) % w)  # (n',)
        self.k.index_copy_(2, slots, keys.to(self.k.dtype))
        self.v.index_copy_(2, slots, values.to(self.v.dtype))
        self.pos.index_copy_(0, slots, at)
        self.length = t + n

    def _reserve(self, need: int) -> None:
        """Double the full cache's buffers until ``need`` tokens fit (``grow``)."""
        cap = self.capacity
        while cap < need:
            cap *= 2
        for name in ("k", "v"):
            old = getattr(self, name)
            new = old.new_zeros(*old.shape[:2], cap, old.shape[3])
            new[:, :, : old.shape[2]] = old
            setattr(self, name, new)

    def index_select(self, dim: int, index: Tensor) -> KVCache:
        """A cache of the batch rows ``index`` (dim 0; beam search reorders and repeats its
        hypotheses so): a new cache, the buffers gathered once."""
        if dim != 0:
            raise ValueError(f"a KVCache selects batch rows (dim 0), not dim {dim}")
        out = KVCache.__new__(KVCache)
        out.__dict__.update(self.__dict__)
        out.k, out.v = self.k.index_select(0, index), self.v.index_select(0, index)
        out.pos = self.pos.clone()
        out._note_rows()
        return out

    def __repr__(self) -> str:
        policy = ("fixed" if self.fixed_ else "full" if self.window is None
                  else f"window={self.window}, sinks={self.sinks}"
                  + (", renumber=True" if self.renumber else ""))  # fmt: skip
        return (f"KVCache({policy}, length={self.length}, capacity={self.capacity}, "
                f"keys={tuple(self.k.shape)})")  # fmt: skip


__all__ = ["KVCache"]
