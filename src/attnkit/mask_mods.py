"""Masks as functions of positions, as FlexAttention's ``mask_mod`` (True = may attend):
a mask is what it says (documents, a prefix, global tokens) until ``attend`` needs its
boolean tensor, and masks compose with ``&`` and ``|`` (or ``and_masks`` / ``or_masks``).

    mask = document(ids) & causal()              # packed documents, no attention across them
    mask = global_tokens([0]) | band(4)          # Longformer: a window plus global tokens
    attend(q, k, v, mask=mask)

A ``MaskMod`` answers ``mod(q, k)`` for query positions q (Tq, 1) and key positions k (1, Tk)
with a bool (..., Tq, Tk); ``mod.dense(tq, tk)`` is its tensor at queries 0 .. Tq-1 (or the
positions given) and keys 0 .. Tk-1. ``attend`` evaluates it once at the query ``positions``
it is given (a decoding step: its step t), so the same object masks training and decoding.
A mask with a batch dim (document ids (B, T), prefix lengths (B,)) gives (B, Tq, Tk), and
gains the heads dim (B, 1, Tq, Tk) against per-head inputs (..., H, Tq, D).

A document mask and-ed with ``causal()``, ``band(r)`` or bool tensors skips the blocks it
leaves empty: when no weights are asked for and each document is one contiguous run,
``attend`` runs every document alone (``attnkit.document_blocks``; the runs of one length
stacked as one batch, as FlashAttention's varlen and xformers' ``BlockDiagonalMask``), with
the band inside it going to the banded kernel, so the cost is Σ L² (causal), Σ L·W (a window
of W keys), never T². The banded kernel itself is not told the boundaries: the split is the
block skipping. Any other mask (prefix, global tokens, an ``|``, ids that are not runs,
weights asked for) is made the dense tensor, which the banded and factorised kernels read on
their band or blocks only.

Legend: B batch, T positions, Tq queries, Tk keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor


class MaskMod:
    """A boolean mask as a function of query and key positions (True = may attend)."""

    batched = False  # has a batch dim: (B, Tq, Tk)

    def __call__(self, q: Tensor, k: Tensor) -> Tensor:  # pragma: no cover - abstract
        """q (Tq, 1), k (1, Tk) integer positions -> bool broadcastable to (..., Tq, Tk)."""
        raise NotImplementedError

    def dense(
        self, tq: int, tk: int, *, positions: Tensor | None = None,
        device: torch.device | None = None,
    ) -> Tensor:  # fmt: skip
        """The mask's tensor at queries ``positions`` (Tq,) (default 0 .. Tq-1) and keys
        0 .. Tk-1: bool (Tq, Tk), or (B, Tq, Tk) for a batched mask."""
        if positions is not None and positions.dim() != 1:
            raise ValueError(
                f"a mask function takes one position per query, (Tq,); got positions of shape "
                f"{tuple(positions.shape)}: pass the same positions for every sequence"
            )
        q = torch.arange(tq, device=device) if positions is None else positions.to(device)
        k = torch.arange(tk, device=device)  # (Tk,)
        out = self(q.long()[:, None], k[None, :])  # (..., Tq, Tk)
        return out.expand(*out.shape[:-2], tq, tk)

    def __and__(self, other: MaskMod) -> MaskMod:
        return AndMask((self, as_mod(other)))

    def __or__(self, other: MaskMod) -> MaskMod:
        return OrMask((self, as_mod(other)))

    def __rand__(self, other: MaskMod) -> MaskMod:
        return AndMask((as_mod(other), self))

    def __ror__(self, other: MaskMod) -> MaskMod:
        return OrMask((as_mod(other), self))


@dataclass(frozen=True, eq=False)
class _Combined(MaskMod):
    """Parts joined elementwise by ``_join`` (shown as ``_symbol``)."""

    parts: tuple[MaskMod, ...]
    _symbol: ClassVar[str] = ""

    @staticmethod
    def _join(a: Tensor, b: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def batched(self) -> bool:  # type: ignore[override]
        """Whether the mask has a batch dim, (B, Tq, Tk)."""
        return any(p.batched for p in self.parts)

    def __call__(self, q: Tensor, k: Tensor) -> Tensor:
        out = self.parts[0](q, k)
        for p in self.parts[1:]:
            out = self._join(out, p(q, k))
        return out

    def __repr__(self) -> str:
        return "(" + f" {self._symbol} ".join(map(repr, self.parts)) + ")"


@dataclass(frozen=True, eq=False)
class AndMask(_Combined):
    """Allowed where every part allows."""

    _symbol: ClassVar[str] = "&"

    @staticmethod
    def _join(a: Tensor, b: Tensor) -> Tensor:
        return a & b


@dataclass(frozen=True, eq=False)
class OrMask(_Combined):
    """Allowed where any part allows."""

    _symbol: ClassVar[str] = "|"

    @staticmethod
    def _join(a: Tensor, b: Tensor) -> Tensor:
        return a | b


@dataclass(frozen=True, eq=False)
class TensorMask(MaskMod):
    """A bool tensor (..., Tq|1, Tk) as a mask function (queries by index, as given)."""

    mask: Tensor

    @property
    def batched(self) -> bool:  # type: ignore[override]
        """Whether the mask has a batch dim, (B, Tq, Tk)."""
        return self.mask.dim() >= 3

    def __call__(self, q: Tensor, k: Tensor) -> Tensor:
        m = self.mask
        rows = m if m.shape[-2] == 1 else m.index_select(-2, q[:, 0].to(m.device))
        return rows.index_select(-1, k[0].to(m.device))  # (..., Tq|1, Tk)

    def __repr__(self) -> str:
        return f"tensor{tuple(self.mask.shape)}"


def as_mod(mask: MaskMod | Tensor) -> MaskMod:
    """A mask function, or a bool tensor wrapped as one."""
    if isinstance(mask, MaskMod):
        return mask
    if isinstance(mask, Tensor) and mask.dtype == torch.bool:
        if mask.dim() > 3:
            raise ValueError(
                f"a mask tensor {tuple(mask.shape)} composed with a mask function must be "
                "(Tq|1, Tk) or (B, Tq|1, Tk), as the attention modules take masks"
            )
        return TensorMask(mask)
    raise TypeError(f"expected a MaskMod or a bool tensor, got {type(mask).__name__}")


@dataclass(frozen=True, eq=False)
class Band(MaskMod):
    """|i - j| <= r, or 0 <= i - j <= r with ``causal`` (r None: unbounded, so causal alone
    is j <= i) (Vaswani 2017, Table 1 "restricted")."""

    radius: int | None = None
    causal: bool = False

    def __call__(self, q: Tensor, k: Tensor) -> Tensor:
        d = q - k  # (Tq, Tk)
        if self.causal:
            return (d >= 0) if self.radius is None else (d >= 0) & (d <= self.radius)
        if self.radius is None:
            return torch.ones_like(d, dtype=torch.bool)
        return d.abs() <= self.radius  # (Tq, Tk)

    def __repr__(self) -> str:
        return "causal()" if self.radius is None else f"band({self.radius}, causal={self.causal})"


def causal() -> MaskMod:
    """j <= i: query i may attend keys up to its own position."""
    return Band(None, causal=True)


def band(radius: int, *, causal: bool = False) -> MaskMod:
    """|i - j| <= r, or 0 <= i - j <= r with ``causal``: the sliding window as a mask."""
    if isinstance(radius, bool) or not isinstance(radius, int) or radius < 0:
        raise ValueError(f"radius={radius!r}; a window radius is an int >= 0")
    return Band(radius, causal)


def _ints(name: str, x: Tensor | Sequence[int] | int, dims: tuple[int, ...], what: str) -> Tensor:
    t = torch.as_tensor(x)
    if t.numel() == 0 and not isinstance(x, Tensor):
        t = t.long()  # an empty list: no positions
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex() or t.dim() not in dims:
        raise ValueError(f"{name} of shape {tuple(t.shape)} and dtype {t.dtype}; give {what}")
    return t.long()


@dataclass(frozen=True, eq=False)
class Document(MaskMod):
    """Block-diagonal: i and j in the same document (ids[i] == ids[j]); ids (T,) or (B, T)."""

    ids: Tensor

    @property
    def batched(self) -> bool:  # type: ignore[override]
        """Whether the mask has a batch dim, (B, Tq, Tk)."""
        return self.ids.dim() == 2

    def __call__(self, q: Tensor, k: Tensor) -> Tensor:
        n = self.ids.shape[-1]
        if int(k.max()) >= n or int(q.max()) >= n:
            raise ValueError(
                f"document ids cover {n} positions but the attention has "
                f"{int(max(k.max(), q.max())) + 1}; give one id per position, (T,) or (B, T)"
            )
        ids = self.ids.to(q.device)
        return ids[..., q[:, 0]][..., :, None] == ids[..., k[0]][..., None, :]  # (.., Tq, Tk)

    def __repr__(self) -> str:
        return f"document(ids{tuple(self.ids.shape)})"


def document(ids: Tensor | Sequence[int]) -> MaskMod:
    """Packed documents (xformers' BlockDiagonalMask; attention-gym's document mask): a
    position attends only positions of its own document. ``ids`` (T,) or (B, T) integers,
    the document of each position (e.g. 0 0 0 1 1 2 2 2); combine with ``causal()`` for a
    packed causal LM."""
    return Document(_ints("document ids", ids, (1, 2), "integer ids (T,) or (B, T), one per "
                          "position"))  # fmt: skip


@dataclass(frozen=True, eq=False)
class Prefix(MaskMod):
    """Prefix-LM: every query sees the first n keys (bidirectional prefix), and keys j <= i."""

    n: Tensor

    @property
    def batched(self) -> bool:  # type: ignore[override]
        """Whether the mask has a batch dim, (B, Tq, Tk)."""
        return self.n.dim() == 1

    def __call__(self, q: Tensor, k: Tensor) -> Tensor:
        n = self.n.to(q.device)
        n = n[:, None, None] if n.dim() == 1 else n  # (B, 1, 1) | ()
        return (k < n) | (k <= q)  # (..., Tq, Tk)

    def __repr__(self) -> str:
        return f"prefix({self.n.tolist()})"


def prefix(n: int | Tensor | Sequence[int]) -> MaskMod:
    """The prefix-LM mask (Raffel et al. 2020, T5 §3.2.1; Dong et al. 2019, UniLM): the first
    ``n`` positions attend each other in both directions, every later one causally (j <= i)
    and to the whole prefix. ``n`` an int, or (B,) one per sequence."""
    t = _ints("prefix length", n, (0, 1), "an int >= 0, or (B,) of them")
    if bool((t < 0).any()):
        raise ValueError(f"prefix length {t.tolist()}; give lengths >= 0")
    return Prefix(t)


@dataclass(frozen=True, eq=False)
class GlobalTokens(MaskMod):
    """Positions in ``idx`` attend every key and are attended by every query."""

    idx: Tensor

    def __call__(self, q: Tensor, k: Tensor) -> Tensor:
        idx = self.idx.to(q.device)
        return torch.isin(q, idx) | torch.isin(k, idx)  # (Tq, Tk)

    def __repr__(self) -> str:
        return f"global_tokens({self.idx.tolist()})"


def global_tokens(idx: Tensor | Sequence[int] | int) -> MaskMod:
    """Longformer's global attention (Beltagy et al. 2020, §3.1): the tokens at positions
    ``idx`` (e.g. [CLS], the question) attend everywhere and everything attends them;
    ``global_tokens(idx) | band(w)`` is its sliding window with global attention."""
    t = _ints("global token positions", idx, (0, 1), "integer positions, (G,) or one int")
    if bool((t < 0).any()):
        raise ValueError(f"global token positions {t.tolist()}; give positions >= 0")
    return GlobalTokens(t.reshape(-1))


def resolve(mask: MaskMod | Tensor | None, tq: int, tk: int, positions: Tensor | None,
            heads: bool, device: torch.device) -> Tensor | None:  # fmt: skip
    """``attend``'s boundary: a mask function's bool tensor at the query ``positions``, with
    a heads dim inserted for a batched mask when the inputs have heads (``heads``); a tensor
    or None as it is."""
    if not isinstance(mask, MaskMod):
        return mask
    dense = mask.dense(tq, tk, positions=positions, device=device)  # (Tq, Tk) | (B, Tq, Tk)
    return dense[:, None] if heads and dense.dim() == 3 else dense


__all__ = [
    "AndMask",
    "MaskMod",
    "OrMask",
    "TensorMask",
    "as_mod",
    "band",
    "causal",
    "document",
    "global_tokens",
    "prefix",
    "resolve",
]
