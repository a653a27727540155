"""attnkit.build for every registered score x alignment x normaliser, single-head and heads=4:
finite outputs of the right shapes, padded keys at exactly zero weight; names and aliases."""

import itertools

import pytest
import torch

import attnkit
from attnkit import Attention, AttentionHeads
from attnkit.registry import (
    ALIGNMENTS,
    KERNEL_SCORES,
    NORMALISERS,
    OUTPUTS,
    POSITIONS,
    REDUCTIONS,
    SCORES,
    STRIDED,
    VARIANTS,
    build_alignment,
    build_normaliser,
    build_score,
)

pytestmark = pytest.mark.usefixtures("one_thread")

COMBOS = list(itertools.product(sorted(SCORES), sorted(ALIGNMENTS), sorted(NORMALISERS)))
B, T, D = 2, 6, 8


@pytest.mark.parametrize("heads", [None, 4])
@pytest.mark.parametrize("score,align,normaliser", COMBOS)
def test_every_combination_builds_and_runs(score, align, normaliser, heads) -> None:
    torch.manual_seed(0)
    size = {"stride" if align in STRIDED else "window": 2}  # a pattern's l, a window's radius
    if normaliser == "ratio" and (score not in KERNEL_SCORES or align not in ("global", "causal")):
        with pytest.raises(ValueError, match="kernel scores|honours all keys"):  # linear attention
            attnkit.build(score, dim=D, heads=heads, align=align, **size, normaliser=normaliser)
        return
    if align.endswith("-heads") and heads is None:  # a pattern split across heads needs them
        with pytest.raises(ValueError, match="splits its pattern across heads"):
            attnkit.build(score, dim=D, heads=heads, align=align, **size, max_keys=T,
                          normaliser=normaliser)  # fmt: skip
        return
    module = attnkit.build(
        score, dim=D, heads=heads, align=align, **size, normaliser=normaliser, max_keys=T
    )
    assert isinstance(module, Attention if heads is None else AttentionHeads)
    x = torch.randn(B, T, D, requires_grad=True)
    mask = attnkit.padding_mask(torch.tensor([T, 4]))  # (B, 1, T)
    out = module(x, x, x, mask=mask) if heads is None else module(x, mask=mask)
    assert out.context.shape == (B, T, D)
    assert out.weights is not None
    assert out.weights.shape == ((B, T, T) if heads is None else (B, heads, T, T))
    assert torch.isfinite(out.context).all() and torch.isfinite(out.weights).all()
    assert (out.weights >= 0).all()
    assert (out.weights[1, ..., 4:] == 0).all()  # padded keys
    out.context.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_build_with_different_key_width_and_temperature() -> None:
    torch.manual_seed(0)
    m = attnkit.build("general", dim=4, key_dim=6, normaliser="softmax", temperature=2.0)
    q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 6)
    out = m(q, k)
    assert out.context.shape == (2, 3, 6)
    assert m.normaliser.temperature == 2.0
    mh = attnkit.build("additive", dim=8, heads=2, key_dim=6, value_dim=3)
    assert mh(torch.randn(2, 3, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 3)).context.shape == (
        2,
        3,
        8,
    )


@pytest.mark.parametrize(
    "alias,name",
    [
        ("scaled-dot", "scaled_dot"),
        ("sdp", "scaled_dot"),
        ("bilinear", "general"),
        ("concat", "additive"),
        ("bahdanau", "additive"),
    ],
)
def test_score_aliases(alias: str, name: str) -> None:
    assert build_score(alias, 4).name == name


def test_normaliser_and_alignment_names() -> None:
    assert build_normaliser("entmax-1.5").name == "entmax15"
    assert build_normaliser("entmax").name == "entmax15"
    assert build_alignment("sliding-causal", 4, 3).causal
    assert build_alignment("local-p", 4, 3).window == 3


def test_every_variant_is_registered_with_a_paper() -> None:
    tables = (SCORES, ALIGNMENTS, NORMALISERS, REDUCTIONS, POSITIONS, OUTPUTS)
    assert [(t.kind, len(t)) for t in tables] == [("score", 8), ("alignment", 14),
                                                  ("normaliser", 5), ("reduction", 2),
                                                  ("position", 6), ("output", 2)]  # fmt: skip
    assert all(v.stage == t.kind for t in tables for v in t.values())
    assert all(v.paper and v.formula for v in VARIANTS)
    assert all(v.build is not None for t in tables[:-1] for v in t.values())


def test_temperature_is_not_silently_dropped() -> None:
    with pytest.raises(ValueError, match="temperature=2.0 applies to softmax and gumbel only"):
        attnkit.build("dot", dim=4, normaliser="sparsemax", temperature=2.0)
    assert build_normaliser("softmax", 2.0).temperature == 2.0


def test_hard_attention_from_names() -> None:
    from attnkit.mechanisms.hard import GumbelSoftmax, SampleReduce

    m = attnkit.build("additive", dim=4, reduce="hard")
    assert isinstance(m.reduce, SampleReduce)
    assert isinstance(build_normaliser("gumbel-softmax", 0.5), GumbelSoftmax)
    assert build_normaliser("gumbel", 0.5).temperature == 0.5
    with pytest.raises(ValueError, match="single-head"):
        attnkit.build("scaled_dot", dim=8, heads=2, reduce="sample")
    with pytest.raises(ValueError, match="unknown reduction"):
        attnkit.build("dot", dim=4, reduce="max")


def test_one_source_of_names() -> None:
    from attnkit.registry import canonical, check_window_for, names

    assert canonical("score", "concat") == "additive" and canonical("score", "dot") == "dot"
    assert canonical("alignment", "local-p") == "local-p"
    assert names("score") == tuple(sorted(SCORES))
    assert "bahdanau" in names("score", aliases=True)
    with pytest.raises(ValueError, match="choose one of"):
        canonical("score", "additive-ish")
    with pytest.raises(ValueError, match="stage kind"):
        names("scorer")
    check_window_for("global", None)  # no window: nothing to check
    check_window_for("local-m", 0)
    with pytest.raises(ValueError, match="needs window=..."):
        check_window_for("sliding", None)
    with pytest.raises(ValueError, match=r"local-p.*>= 1"):
        check_window_for("local-p", 0)
    for align in ALIGNMENTS:  # WINDOWED and STRIDED name exactly the alignments that need one
        needs = {"window": attnkit.registry.WINDOWED, "stride": attnkit.registry.STRIDED}
        what = [size for size, table in needs.items() if align in table]
        if what:
            with pytest.raises(ValueError, match=f"needs {what[0]}="):
                build_alignment(align, 4, None)
        else:
            build_alignment(align, 4, None)


def test_scores_declare_capabilities() -> None:
    from attnkit.stages.capabilities import is_gatherable, is_plain_scaled_dot

    assert is_plain_scaled_dot(attnkit.ScaledDotScore()) and is_plain_scaled_dot(
        attnkit.stages.scores.scaled_dot_score
    )
    assert not is_plain_scaled_dot(attnkit.ScaledDotScore(0.5))
    assert not is_plain_scaled_dot(attnkit.DotScore()) and not is_plain_scaled_dot(len)
    for name in SCORES:
        score = build_score(name, 4, max_keys=3)
        assert is_gatherable(score) == (name != "location"), name
