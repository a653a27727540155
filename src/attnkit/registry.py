"""Names at the edge: strings from the CLI or a config become score, alignment and normaliser
objects here, and nowhere else.

    attnkit.build("additive", dim=64, align="local-p", window=8, heads=4)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ._checks import check_size
from ._registry import Registry
from .core import NormaliseFn, weighted_sum
from .grouped import check_kv_heads
from .mechanisms.hard import GumbelSoftmax, SampleReduce
from .modules import Attention, AttentionHeads, check_heads
from .stages.alignment import (
    Alignment,
    CausalAlignment,
    GlobalAlignment,
    LocalM,
    LocalP,
    SlidingWindow,
)
from .stages.kernels import LinearScore, PerformerScore, default_features, ratio
from .stages.normalisers import Entmax15, Softmax, Sparsemax
from .stages.position import (
    ALiBi,
    LearnedPosition,
    Position,
    RotaryPosition,
    ShawPosition,
    T5Bias,
    XLPosition,
)
from .stages.scores import (
    AdditiveScore,
    CosineScore,
    DotScore,
    GeneralScore,
    LocationScore,
    ScaledDotScore,
    Score,
)
from .stages.sinks import SinkSoftmax
from .stages.softcap import SoftCappedScore, check_cap
from .stages.sparse import PATTERNS, FactorisedAlignment, PatternSpec


@dataclass(frozen=True)
class Variant:
    """One registered variant of a stage, as ``attnkit info`` lists it and ``build`` makes it.

    name, stage: its registry name and stage ("score", "alignment", ...); paper, formula.
    build: its builder, with its stage's arguments (``SCORES``, ``ALIGNMENTS``, ...); None for
        an output form, which ``build`` makes itself.
    window: the least window it accepts, for an alignment that takes ``window=...``.
    stride: the least stride l it accepts, for a Sparse Transformer pattern (``stride=...``).
    kernel: a kernel score (linear attention), normalised by "ratio" unless told otherwise.
    """

    name: str
    stage: str
    paper: str
    formula: str
    build: Callable[..., Any] | None = field(default=None, repr=False, compare=False)
    window: int | None = None
    stride: int | None = None
    kernel: bool = False


def _add(
    registry: Registry[Variant], name: str, paper: str, formula: str,
    build: Callable[..., Any] | None = None, *, aliases: tuple[str, ...] = (), **more: Any,
) -> None:  # fmt: skip
    """Register variant ``name`` of ``registry``'s stage."""
    registry.register(Variant(name, registry.kind, paper, formula, build, **more), aliases=aliases)


# fmt: off
SCORES: Registry[Variant] = Registry("score")
"""Scores by name; ``SCORES[name].build(query_dim, key_dim, hidden, max_keys)``, ``hidden``
the performer's random feature count M (default round(D·ln D))."""
_add(SCORES, "dot", "Luong et al. 2015", DotScore.formula,
     lambda q, k, hidden, max_keys: DotScore())
_add(SCORES, "scaled_dot", "Vaswani et al. 2017", ScaledDotScore.formula,
     lambda q, k, hidden, max_keys: ScaledDotScore(), aliases=("scaled-dot", "sdp"))
_add(SCORES, "general", "Luong et al. 2015", GeneralScore.formula,
     lambda q, k, hidden, max_keys: GeneralScore(q, k), aliases=("bilinear",))
_add(SCORES, "additive", "Bahdanau et al. 2015", AdditiveScore.formula,
     lambda q, k, hidden, max_keys: AdditiveScore(q, k, hidden), aliases=("concat", "bahdanau"))
_add(SCORES, "location", "Luong et al. 2015", LocationScore.formula,
     lambda q, k, hidden, max_keys: LocationScore(q, _need(max_keys, "max_keys")))
_add(SCORES, "cosine", "Graves et al. 2014", CosineScore.formula,
     lambda q, k, hidden, max_keys: CosineScore())
# kernel scores (linear attention): with the "ratio" normaliser, O(n·M·Dv) (attnkit.linear)
_add(SCORES, "linear", "Katharopoulos et al. 2020", LinearScore.formula,
     lambda q, k, hidden, max_keys: LinearScore(), kernel=True)
_add(SCORES, "performer", "Choromanski et al. 2021 (FAVOR+)", PerformerScore.formula,
     lambda q, k, hidden, max_keys: PerformerScore(q, hidden or default_features(q)),
     kernel=True)


def _factorised(pattern: str, causal: bool, split: bool) -> Callable[[int, int | None], Alignment]:
    """The builder of a Sparse Transformer pattern from its stride l (fixed: c = 1)."""

    def build(query_dim: int, stride: int | None) -> Alignment:
        spec = PatternSpec(pattern, _need(stride, "stride"), causal=causal, split_heads=split)
        return FactorisedAlignment(spec)

    return build


ALIGNMENTS: Registry[Variant] = Registry("alignment")
"""Alignments by name; ``ALIGNMENTS[name].build(query_dim, size)``, ``size`` the window
(``WINDOWED``) or the stride l (``STRIDED``)."""
_add(ALIGNMENTS, "global", "Luong et al. 2015", "all keys", lambda q, w: GlobalAlignment())
_add(ALIGNMENTS, "causal", "Vaswani et al. 2017", "j <= i", lambda q, w: CausalAlignment())
_add(ALIGNMENTS, "local-m", "Luong et al. 2015", "|s - t| <= D",
     lambda q, w: LocalM(_need(w, "window")), window=0)
_add(ALIGNMENTS, "local-p", "Luong et al. 2015", "p_t = S·σ(v_pᵀ tanh(W_p h_t))",
     lambda q, w: LocalP(q, _need(w, "window")), window=1)
_add(ALIGNMENTS, "sliding", "Vaswani et al. 2017 (restricted)", "|i - j| <= r",
     lambda q, w: SlidingWindow(_need(w, "window")), window=0)
_add(ALIGNMENTS, "sliding-causal", "Vaswani et al. 2017 (restricted)", "0 <= i - j <= r",
     lambda q, w: SlidingWindow(_need(w, "window"), causal=True), window=0)
# the Sparse Transformer's patterns (Child 2019), built from the stride l; fixed with c = 1
for _pattern in PATTERNS:
    for _causal in (False, True):
        for _split in (False, True):
            _add(
                ALIGNMENTS,
                _pattern + ("-causal" if _causal else "") + ("-heads" if _split else ""),
                "Child et al. 2019",
                ("|i - j| <= l or (i - j) mod l = 0" if _pattern == "strided" else
                 "⌊j/l⌋ = ⌊i/l⌋ or j mod l >= l - c")
                + (", j <= i" if _causal else "")
                + ("; head h: the first part if h is even, else the second" if _split else ""),
                _factorised(_pattern, _causal, _split),
                stride=1,
            )

NORMALISERS: Registry[Variant] = Registry("normaliser")
"""Normalisers by name; ``NORMALISERS[name].build(temperature)``."""
_add(NORMALISERS, "softmax", "Bahdanau et al. 2015", "exp(e/T) / Σ exp(e/T)",
     lambda t: Softmax(t))
_add(NORMALISERS, "sparsemax", "Martins & Astudillo 2016", "[z - τ]₊", lambda t: Sparsemax())
_add(NORMALISERS, "entmax15", "Peters et al. 2019", "[z/2 - τ]₊²", lambda t: Entmax15(),
     aliases=("entmax-1.5", "entmax"))
_add(NORMALISERS, "ratio", "Katharopoulos et al. 2020", "e_ij / Σ_j e_ij (kernel scores)",
     lambda t: ratio)
_add(NORMALISERS, "gumbel", "Jang et al. 2017; Maddison et al. 2017",
     "one_hot(argmax (e + g)/τ), straight-through softmax((e + g)/τ)",
     lambda t: GumbelSoftmax(t), aliases=("gumbel-softmax",))

REDUCTIONS: Registry[Variant] = Registry("reduction")
"""Reductions by name; ``REDUCTIONS[name].build()``."""
_add(REDUCTIONS, "weighted_sum", "Bahdanau et al. 2015", "c = Σ_j α_j v_j",
     lambda: weighted_sum, aliases=("soft",))
_add(REDUCTIONS, "sample", "Xu et al. 2015 (hard attention)", "z ~ Cat(α), c = v_z",
     lambda: SampleReduce(), aliases=("hard",))

POSITIONS: Registry[Variant] = Registry("position")
"""Position stages by name; ``POSITIONS[name].build(heads, head_dim, max_len, causal)``,
``causal`` giving T5 its one-directional buckets."""
_add(POSITIONS, "learned", "Gehring et al. 2017", LearnedPosition.formula,
     lambda h, d, n, causal: LearnedPosition(h, d, n))
_add(POSITIONS, "shaw", "Shaw et al. 2018", ShawPosition.formula,
     lambda h, d, n, causal: ShawPosition(d), aliases=("relative",))
_add(POSITIONS, "t5", "Raffel et al. 2020", T5Bias.formula,
     lambda h, d, n, causal: T5Bias(h, bidirectional=not causal))
_add(POSITIONS, "alibi", "Press et al. 2022", ALiBi.formula, lambda h, d, n, causal: ALiBi(h))
_add(POSITIONS, "rope", "Su et al. 2021", RotaryPosition.formula,
     lambda h, d, n, causal: RotaryPosition(d), aliases=("rotary",))
_add(POSITIONS, "xl", "Dai et al. 2019", XLPosition.formula,
     lambda h, d, n, causal: XLPosition(h, d), aliases=("transformer-xl",))

OUTPUTS: Registry[Variant] = Registry("output")
"""Output forms by name: one weight per (query, key), weights (..., Tq, Tk); or one per
feature (Shen 2018), weights (..., Tq, Tk, Dv)."""
_add(OUTPUTS, "scalar", "Bahdanau et al. 2015", "one weight a_ij per key")
_add(OUTPUTS, "multi-dimensional", "Shen et al. 2018 (DiSAN)",
     "P_ij = softmax_j(Wᵀ ELU(W⁽¹⁾k_j + W⁽²⁾q_i + b⁽¹⁾) + b) per feature, c = Σ_j P_ij ⊙ v_j",
     aliases=("multidim", "feature-wise"))
# fmt: on

STAGES: dict[str, Registry[Variant]] = {
    r.kind: r for r in (SCORES, ALIGNMENTS, NORMALISERS, REDUCTIONS, POSITIONS, OUTPUTS)
}
"""Stage kind -> its registry: the one table of names (``canonical``, ``names``)."""

VARIANTS: list[Variant] = [v for registry in STAGES.values() for v in registry.values()]
"""Every registered variant with its paper and formula, as ``attnkit info`` lists them."""
KERNEL_SCORES = tuple(v.name for v in SCORES.values() if v.kernel)
"""The scores that are a feature map's kernel, normalised by "ratio" unless told otherwise."""
WINDOWED: dict[str, int] = {v.name: v.window for v in ALIGNMENTS.values() if v.window is not None}
"""The alignments that take ``window=...``, with the least window each accepts."""
STRIDED: dict[str, int] = {v.name: v.stride for v in ALIGNMENTS.values() if v.stride is not None}
"""The alignments that take ``stride=...`` (the Sparse Transformer's patterns, Child et al.
2019), with the least stride l each accepts."""


def _need(value: int | None, name: str) -> int:
    if value is None:
        raise ValueError(f"this variant needs {name}=...; pass it to attnkit.build")
    return value


def _built(variant: Variant, *args: Any) -> Any:
    """``variant`` built from its stage's arguments (every stage but output has a builder)."""
    assert variant.build is not None, f"{variant.stage} {variant.name!r} has no builder"
    return variant.build(*args)


def canonical(kind: str, name: str) -> str:
    """The registry's name for a score, alignment, normaliser or reduction name (an alias
    resolved: "concat" -> "additive"); a ValueError listing the choices for an unknown name.
    The one place names are checked: model configs and commands validate through it."""
    return _stage(kind).canonical(name)


def names(kind: str, *, aliases: bool = False) -> tuple[str, ...]:
    """The registered names of a stage kind ("score", "alignment", "normaliser",
    "reduction"), sorted; with ``aliases`` the aliases too."""
    return _stage(kind).names(aliases=aliases)


def _stage(kind: str) -> Registry[Variant]:
    if kind not in STAGES:
        raise ValueError(f"unknown stage kind {kind!r}; choose one of {sorted(STAGES)}")
    return STAGES[kind]


def check_window_for(align: str, window: int | None) -> None:
    """The window an alignment needs: a ValueError saying what to pass when it is missing or
    too small (``WINDOWED``); alignments without a window ignore it."""
    least = WINDOWED.get(canonical("alignment", align))
    if least is None:
        return
    if window is None:
        raise ValueError(f"alignment {align!r} needs window=... (an int >= {least})")
    if window < least:
        why = " (σ = D/2 must be positive)" if align == "local-p" else ""
        raise ValueError(f"alignment {align!r} needs window >= {least}{why}, got {window}")


def check_kernel(score: str, align: str, normaliser: str) -> None:
    """The kernel-ratio normaliser divides non-negative kernel scores, over every key or the
    causal prefix (what linear attention's sums honour, ``attnkit.linear``): a ValueError
    saying what to change otherwise."""
    if canonical("normaliser", normaliser) != "ratio":
        return
    if canonical("score", score) not in KERNEL_SCORES:
        raise ValueError(
            f"normaliser='ratio' divides non-negative kernel scores; score={score!r} can be "
            f"negative: use score= one of {', '.join(KERNEL_SCORES)}, or normaliser='softmax'"
        )
    if canonical("alignment", align) not in ("global", "causal"):
        raise ValueError(
            f"linear attention honours all keys or the causal j <= i, with a key-padding "
            f"mask; align={align!r} restricts the keys otherwise: use align='global' or "
            f"'causal', or normaliser='softmax' over the kernel scores"
        )


def build_score(
    name: str,
    query_dim: int,
    key_dim: int | None = None,
    *,
    hidden: int | None = None,
    max_keys: int | None = None,
) -> Score:
    """A score module by name (aliases allowed): queries of width ``query_dim``, keys of
    ``key_dim`` (default: the same); ``hidden`` for additive, ``max_keys`` for location."""
    key = canonical("score", name)
    key_dim = query_dim if key_dim is None else key_dim
    return _built(SCORES[key], query_dim, key_dim, hidden, max_keys)


def build_alignment(
    name: str, query_dim: int, window: int | None = None, *, stride: int | None = None,
    summary: int | None = None,
) -> Alignment:
    """An alignment module by name; ``window`` for the windowed ones (``WINDOWED``),
    ``stride`` for the Sparse Transformer's patterns (``STRIDED``), ``summary`` the fixed
    pattern's summary columns c (None: the registered c = 1), ``query_dim`` for local-p's
    position predictor. ``window=`` for a pattern still means its stride, with a
    DeprecationWarning."""
    key = canonical("alignment", name)
    window, stride = window_or_stride(key, window, stride)
    if summary is not None:
        if not key.startswith("fixed"):
            raise ValueError(f"summary={summary} is the fixed pattern's summary columns c; "
                             f"align={name!r} has none")  # fmt: skip
        return FactorisedAlignment(PatternSpec("fixed", _need(stride, "stride"), summary,
                                               causal="causal" in key,
                                               split_heads=key.endswith("-heads")))  # fmt: skip
    return _built(ALIGNMENTS[key], query_dim, stride if key in STRIDED else window)


def window_or_stride(
    align: str, window: int | None, stride: int | None, *, stacklevel: int = 1
) -> tuple[int | None, int | None]:
    """``(window, stride)`` for alignment ``align``: ``stride`` is the stride l of the Sparse
    Transformer's patterns (``STRIDED``) and nothing else's (a ValueError); ``window`` given
    to a pattern is taken as its stride, with a DeprecationWarning (window means a sliding
    radius everywhere else; the old spelling goes in the next release). ``stacklevel``: the
    warning's, counted from the caller of this function's caller."""
    key = canonical("alignment", align)
    if key not in STRIDED:
        if stride is not None:
            raise ValueError(
                f"stride={stride} is the stride l of the Sparse Transformer's patterns "
                f"({', '.join(PATTERNS)}); align={align!r} takes window=... or nothing"
            )
        return window, None
    if window is None:
        return None, stride
    if stride is not None:
        raise TypeError(f"align={align!r} got window={window} and stride={stride}; pass "
                        "stride= only")  # fmt: skip
    warnings.warn(
        f"window= for align={align!r} is its stride l: pass stride={window} (window= means a "
        "sliding radius elsewhere; it goes in the next release)", DeprecationWarning,
        stacklevel=2 + stacklevel,
    )  # fmt: skip
    return None, window


def build_normaliser(name: str, temperature: float = 1.0) -> NormaliseFn:
    """A normaliser by name (aliases allowed); ``temperature`` for softmax and gumbel only
    (a ValueError for the others)."""
    key = canonical("normaliser", name)
    if key not in ("softmax", "gumbel") and temperature != 1.0:
        raise ValueError(
            f"temperature={temperature} applies to softmax and gumbel only; {key} has none: "
            "leave temperature at 1.0 or scale the scores (e.g. ScaledDotScore(scale))"
        )
    return _built(NORMALISERS[key], temperature)


def build_position(
    name: str, heads: int, head_dim: int, *, max_len: int = 512, causal: bool = False,
    rope_scaling: str = "none", rope_factor: float = 1.0,
) -> Position:  # fmt: skip
    """A position stage by name (aliases allowed) for ``heads`` heads of width ``head_dim``;
    ``max_len`` for learned positions, ``causal`` for T5's one-directional buckets;
    ``rope_scaling`` ("linear", "ntk", "yarn"; ``attnkit.stages.rope_scaling``) and
    ``rope_factor`` s stretch RoPE from ``max_len`` (the length trained at) to s·max_len."""
    key = canonical("position", name)
    if key == "rope":
        return RotaryPosition(head_dim, scaling=rope_scaling, factor=rope_factor,
                              original_len=max_len)  # fmt: skip
    if rope_scaling != "none" or rope_factor != 1.0:
        raise ValueError(f"rope_scaling and rope_factor stretch RoPE; position={name!r} has "
                         "no rotation to scale: use position='rope' or drop them")  # fmt: skip
    return _built(POSITIONS[key], heads, head_dim, max_len, causal)


def build(
    score: str = "scaled_dot",
    *,
    dim: int,
    heads: int | None = None,
    align: str = "global",
    window: int | None = None,
    stride: int | None = None,
    normaliser: str | None = None,
    temperature: float = 1.0,
    key_dim: int | None = None,
    value_dim: int | None = None,
    hidden: int | None = None,
    max_keys: int | None = None,
    dropout: float = 0.0,
    reduce: str = "weighted_sum",
    output: str = "scalar",
    position: str | None = None,
    max_len: int = 512,
    rope_scaling: str = "none",
    rope_factor: float = 1.0,
    kv_heads: int | None = None,
    softcap: float | None = None,
    sinks: bool = False,
) -> nn.Module:
    """An attention module from names.

    ``window``: the window of local-m / local-p, the radius of the sliding window; ``stride``:
    the stride l of the Sparse Transformer's patterns (strided, fixed: ``STRIDED``).

    ``normaliser``: default "ratio" for the kernel scores (``KERNEL_SCORES``: linear
    attention, Katharopoulos et al. 2020, and the Performer's FAVOR+, Choromanski et al. 2021,
    its random feature count ``hidden``), "softmax" for the others.
    ``heads=None``: single-head ``Attention`` without projections (Bahdanau/Luong style): the
    score works on widths ``dim`` (query) and ``key_dim`` (keys). ``heads=H``:
    ``AttentionHeads`` with projections, the score working on width dim / H per head.
    ``output="multi-dimensional"``: ``MultiDimensionalAttention`` (Shen 2018), one weight per
    key and value feature, its own feature-wise additive score of width ``hidden``.
    ``position``: a position stage by name (``POSITIONS``: learned, shaw, t5, alibi, rope,
    xl), per head of width dim / H (one head of width ``dim`` without heads); ``max_len``
    bounds the learned positions; ``rope_scaling`` ("linear" position interpolation, "ntk",
    "yarn") and ``rope_factor`` s stretch RoPE trained at ``max_len`` positions to s·max_len.
    ``kv_heads``: with ``heads``, Hkv key/value heads shared by
    groups of H / Hkv query heads (grouped-query attention, Ainslie et al. 2023; 1:
    multi-query, Shazeer 2019); it must divide ``heads``. ``softcap``: the scores
    soft-capped, cap·tanh(e / cap) (Gemma 2; ``attnkit.stages.softcap``). ``sinks``: with
    ``heads`` and softmax, a learned sink logit per head in the softmax's denominator
    (gpt-oss; ``attnkit.stages.sinks``).
    """
    check_size("dim", dim)
    window, stride = window_or_stride(align, window, stride)
    if normaliser is None:
        normaliser = "ratio" if canonical("score", score) in KERNEL_SCORES else "softmax"
    check_kernel(score, align, normaliser)
    if sinks and (heads is None or canonical("normaliser", normaliser) != "softmax"
                  or temperature != 1.0):  # fmt: skip
        raise ValueError(
            "sinks=True adds one learned logit per head to a softmax's denominator; pass "
            "heads=H and the default normaliser='softmax' (temperature 1)"
        )
    if softcap is not None:
        check_cap(softcap)
    if kv_heads is not None and heads is None:
        raise ValueError(
            f"kv_heads={kv_heads} shares key/value heads among query heads; pass heads=H "
            "(a multiple of kv_heads) too"
        )
    for name, width in (("key_dim", key_dim), ("value_dim", value_dim), ("hidden", hidden),
                        ("max_keys", max_keys)):  # fmt: skip
        check_size(name, width, optional=True)
    causal = canonical("alignment", align) in ("causal", "sliding-causal")
    if canonical("output", output) == "multi-dimensional":
        if position is not None:
            raise ValueError("output='multi-dimensional' takes no position stage; drop position")
        return _multidim(score, heads, align, reduce, normaliser, temperature,
                         dim=dim, key_dim=key_dim, value_dim=value_dim, hidden=hidden)  # fmt: skip
    red = _built(REDUCTIONS[reduce])
    if canonical("alignment", align).endswith("-heads") and (heads or 1) < 2:
        raise ValueError(
            f"align={align!r} splits its pattern across heads (Child et al. 2019): pass "
            f"heads >= 2, or use align={align.removesuffix('-heads')!r}, the merged pattern"
        )
    if heads is None:
        sc = _capped(build_score(score, dim, key_dim, hidden=hidden, max_keys=max_keys), softcap)
        pos = _position(position, 1, dim, key_dim, max_len, causal, (rope_scaling, rope_factor))
        return Attention(
            sc, build_alignment(align, dim, window, stride=stride),
            build_normaliser(normaliser, temperature), red,
            position=pos,
        )  # fmt: skip
    if red is not weighted_sum:
        raise ValueError(
            f"reduce={reduce!r} is built for single-head attention; leave heads=None, or use "
            "normaliser='gumbel' for hard multi-head attention"
        )
    head_dim = check_heads(dim, heads)
    sc = _capped(build_score(score, head_dim, head_dim, hidden=hidden, max_keys=max_keys), softcap)
    norm = SinkSoftmax(heads) if sinks else build_normaliser(normaliser, temperature)
    return AttentionHeads(
        dim,
        heads,
        key_dim=key_dim,
        value_dim=value_dim,
        score=sc,
        align=build_alignment(align, head_dim, window, stride=stride),
        normaliser=norm,
        dropout=dropout,
        position=_position(position, heads, head_dim, None, max_len, causal,
                           (rope_scaling, rope_factor)),
        kv_heads=check_kv_heads(heads, kv_heads),
    )


def _capped(score: Score, cap: float | None) -> Score:
    """``build``'s score, soft-capped when ``cap`` is given."""
    return score if cap is None else SoftCappedScore(score, cap)


def _position(
    name: str | None, heads: int, width: int, key_dim: int | None, max_len: int, causal: bool,
    rope: tuple[str, float] = ("none", 1.0),
) -> Position | None:  # fmt: skip
    """``build``'s position stage, or None; it needs queries and keys of one width. ``rope``:
    the scaling and factor of RoPE."""
    if name is None:
        if rope != ("none", 1.0):
            raise ValueError("rope_scaling and rope_factor stretch RoPE; pass position='rope'")
        return None
    if key_dim is not None and key_dim != width:
        raise ValueError(
            f"position={name!r} needs queries and keys of one width, got {width} and "
            f"{key_dim}; drop key_dim or the position stage"
        )
    check_size("max_len", max_len)
    return build_position(name, heads, width, max_len=max_len, causal=causal,
                          rope_scaling=rope[0], rope_factor=rope[1])


def _multidim(
    score: str, heads: int | None, align: str, reduce: str, normaliser: str, temperature: float,
    **widths: int | None,
) -> nn.Module:  # fmt: skip
    """``build(..., output="multi-dimensional")``: the options that do not apply refused."""
    from .mechanisms.multidim import MultiDimensionalAttention

    wrong = [
        f"{name}={value!r}"
        for name, value, ok in (
            ("score", score, score in ("scaled_dot", "additive")),
            ("heads", heads, heads is None),
            ("align", align, canonical("alignment", align) == "global"),
            ("reduce", reduce, canonical("reduction", reduce) == "weighted_sum"),
        )
        if not ok
    ]
    if wrong:
        raise ValueError(
            f"output='multi-dimensional' has its own feature-wise additive score over all keys, "
            f"single-head, weighted sum; drop {', '.join(wrong)}"
        )
    dim = widths["dim"]
    assert dim is not None
    return MultiDimensionalAttention(
        dim, widths["key_dim"], widths["value_dim"], widths["hidden"],
        normaliser=build_normaliser(normaliser, temperature),
    )  # fmt: skip


__all__ = [
    "ALIGNMENTS",
    "KERNEL_SCORES",
    "OUTPUTS",
    "POSITIONS",
    "NORMALISERS",
    "REDUCTIONS",
    "SCORES",
    "STAGES",
    "VARIANTS",
    "Variant",
    "STRIDED",
    "WINDOWED",
    "build",
    "build_alignment",
    "build_normaliser",
    "build_position",
    "build_score",
    "check_kernel",
    "canonical",
    "check_window_for",
    "names",
    "window_or_stride",
]
