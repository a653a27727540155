"""The factorised attention patterns of the Sparse Transformer (Child et al. 2019, §4.2) as
alignments: each query reaches O(√n) keys when the stride l ≈ √n, in two parts A⁽¹⁾ and A⁽²⁾.

    strided   A⁽¹⁾_i = {j : 0 <= i - j <= l}              the l previous positions
              A⁽²⁾_i = {j : (i - j) mod l = 0}             every l-th position back
    fixed     A⁽¹⁾_i = {j : ⌊j / l⌋ = ⌊i / l⌋}              i's block of l positions
              A⁽²⁾_i = {j : j mod l >= l - c}              the c "summary" columns of every block

as the paper writes them, for autoregressive models: ``causal=True`` also keeps j <= i. Without
it (an encoder) the strided local part is |i - j| <= l and the strided part every j with
(i - j) mod l = 0 on both sides; fixed is unchanged but for j <= i. The paper gives two ways
for the heads to share the parts (§4.3): *merged*, every head attends A⁽¹⁾ ∪ A⁽²⁾ (the
default), and *interleaved across heads* (``split_heads=True``), head h attends A⁽¹⁾ when h is
even and A⁽²⁾ when it is odd, so that two heads together cover the merged pattern; the split
needs the queries' heads dimension (..., H, Tq, D), H >= 2.

    align(query (..., [H,] Tq, D), keys (..., Tk, D), mask, positions (..., Tq))
        -> AlignSpec(mask: the user's mask AND the pattern (..., [H,] Tq, Tk))

Queries stand at ``positions`` (default 0 .. Tq-1, an incremental decoder passes its step),
keys at 0 .. Tk-1. They declare ``factorised(query) -> PatternSpec`` (capabilities): at the
default positions, ``attend(..., need_weights=False)`` with plain scaled-dot softmax runs them
on ``attnkit.local.factorised`` in O(n·√n); weights, other positions or any other score take
the dense path (a (Tq, Tk) mask).

Legend: H heads, Tq queries, Tk keys, D width, l stride, c summary columns.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch
from torch import Tensor

from ..masks import and_masks
from .alignment import Alignment, AlignSpec, query_positions

PATTERNS = ("strided", "fixed")


def strided_parts(
    positions: Tensor, num_keys: int, stride: int, *, causal: bool = True
) -> tuple[Tensor, Tensor]:
    """A⁽¹⁾ and A⁽²⁾ of the strided pattern for queries at ``positions`` (..., Tq) over keys
    0 .. Tk-1: two bool masks (..., Tq, Tk), True = may attend."""
    i = positions[..., :, None]  # (..., Tq, 1)
    j = torch.arange(num_keys, device=positions.device)  # (Tk,)
    d = i - j  # (..., Tq, Tk) signed distance back
    local = (d >= 0) & (d <= stride) if causal else d.abs() <= stride
    strided = torch.remainder(d, stride) == 0
    if causal:
        strided = strided & (d >= 0)
    return local, strided


def fixed_parts(
    positions: Tensor, num_keys: int, stride: int, summary: int, *, causal: bool = True
) -> tuple[Tensor, Tensor]:
    """A⁽¹⁾ (the query's block) and A⁽²⁾ (the last ``summary`` columns of every block) of
    the fixed pattern: two bool masks (..., Tq, Tk)."""
    i = positions[..., :, None]  # (..., Tq, 1)
    j = torch.arange(num_keys, device=positions.device)  # (Tk,)
    block = torch.div(i, stride, rounding_mode="floor") == torch.div(j, stride,
                                                                    rounding_mode="floor")
    columns = (torch.remainder(j, stride) >= stride - summary).expand_as(block)  # (..., Tq, Tk)
    if causal:
        before = i >= j  # (..., Tq, Tk)
        block, columns = block & before, columns & before
    return block, columns


@dataclass(frozen=True)
class PatternSpec:
    """What a factorised pattern is: ``strided`` or ``fixed``, its stride l, its summary
    columns c (fixed), whether it is causal, and whether its two parts are split across
    heads."""

    pattern: str
    stride: int
    summary: int = 1
    causal: bool = True
    split_heads: bool = False

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern={self.pattern!r}; choose strided or fixed")
        for name in ("stride", "summary"):  # 1.5 or True would build, then fail in F.pad
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{name}={value!r}; the {name} of a pattern is an int >= 1")
            object.__setattr__(self, name, int(value))  # a numpy integer as a Python int
        if self.stride < 1:
            raise ValueError(f"stride={self.stride}; the stride l must be at least 1")
        if not 1 <= self.summary <= self.stride:
            raise ValueError(
                f"summary={self.summary}; the fixed pattern's summary columns c must be in "
                f"1 .. stride ({self.stride})"
            )


def pattern_mask(spec: PatternSpec, positions: Tensor, num_keys: int,
                 heads: int | None = None) -> Tensor:  # fmt: skip
    """The pattern's mask (..., Tq, Tk), or with ``spec.split_heads`` (..., H, Tq, Tk) for
    ``heads`` H: head h takes A⁽¹⁾ when h is even, A⁽²⁾ when it is odd."""
    if spec.pattern == "strided":
        first, second = strided_parts(positions, num_keys, spec.stride, causal=spec.causal)
    else:
        first, second = fixed_parts(positions, num_keys, spec.stride, spec.summary,
                                    causal=spec.causal)  # fmt: skip
    if not spec.split_heads:
        return first | second
    if heads is None or heads < 2:
        raise ValueError(
            f"{spec.pattern} split across heads needs queries with a heads dimension "
            f"(..., H, Tq, D) and H >= 2 (got {heads}): build it with heads >= 2, or use the "
            "merged pattern"
        )
    even = (torch.arange(heads, device=positions.device) % 2 == 0)[:, None, None]  # (H, 1, 1)
    return torch.where(even, first[..., None, :, :], second[..., None, :, :])  # (..., H, Tq, Tk)


def allowed_pairs(spec: PatternSpec, n: int, heads: int = 1) -> int:
    """The (query, key) pairs the pattern allows over n queries and n keys at positions
    0 .. n-1, summed over ``heads`` heads: the size of ``pattern_mask``'s True set, counted
    in O(n) from the sets of the module docstring, with no (n, n) mask (the bench's FLOPs)."""
    if n < 1:
        return 0
    i = torch.arange(n, dtype=torch.int64)  # (n,) query positions
    l, c = spec.stride, spec.summary
    if spec.pattern == "strided":
        if spec.causal:
            first = torch.clamp(i, max=l) + 1  # 0 <= i - j <= l
            second = i // l + 1  # j = i, i - l, .. >= 0
        else:
            first = torch.clamp(i, max=l) + torch.clamp(n - 1 - i, max=l) + 1  # |i - j| <= l
            second = (n - 1 - i % l) // l + 1  # the residue class of i, both ways
        inter = 1 + (i >= l).long() if spec.causal else 1 + (i >= l).long() + (i + l < n).long()
    else:
        block = torch.clamp(n - (i // l) * l, max=l)  # the size of i's block
        summary = (n // l) * c + max(0, n % l - (l - c))  # summary columns j < n
        if spec.causal:
            first = i % l + 1  # i's block up to i
            second = (i + 1) // l * c + torch.clamp((i + 1) % l - (l - c), min=0)  # j <= i
            inter = torch.clamp(i % l + 1 - (l - c), min=0)  # i's block's columns up to i
        else:
            first = block
            second = torch.full_like(i, summary)
            inter = torch.clamp(block - (l - c), min=0)  # i's block's summary columns
    one, two = int(first.sum()), int(second.sum())
    if spec.split_heads:  # even heads A⁽¹⁾, odd heads A⁽²⁾
        return (heads + 1) // 2 * one + heads // 2 * two
    return heads * (one + two - int(inter.sum()))  # |A⁽¹⁾ ∪ A⁽²⁾|


class FactorisedAlignment(Alignment):
    """A Sparse Transformer pattern (Child et al. 2019) as an alignment: the user's mask AND
    the pattern's, no prior. See the module docstring for the sets."""

    def __init__(self, spec: PatternSpec) -> None:
        super().__init__()
        self.spec = spec
        self.name = spec.pattern + ("-causal" if spec.causal else "") + (
            "-heads" if spec.split_heads else "")  # fmt: skip

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> AlignSpec:
        pos = query_positions(query, positions)  # (..., Tq) or (Tq,)
        heads = None
        if self.spec.split_heads:
            heads = query.shape[-3] if query.dim() >= 4 else None
            if pos.dim() >= 2 and pos.shape[-2] == 1:  # (B, 1, Tq): the modules' heads dim
                pos = pos.squeeze(-2)  # (B, Tq): the pattern adds its own heads dim
        allowed = pattern_mask(self.spec, pos, keys.shape[-2], heads)
        return AlignSpec(and_masks(mask, allowed))

    def factorised(self, query: Tensor) -> PatternSpec:
        """Capability: the pattern this alignment is at the default positions 0 .. Tq-1."""
        return self.spec

    def extra_repr(self) -> str:
        s = self.spec
        return (f"stride={s.stride}, summary={s.summary}, causal={s.causal}, "
                f"split_heads={s.split_heads}")  # fmt: skip


__all__ = [
    "PATTERNS",
    "FactorisedAlignment",
    "PatternSpec",
    "allowed_pairs",
    "fixed_parts",
    "pattern_mask",
    "strided_parts",
]
