"""The Sparse Transformer's factorised patterns (Child et al. 2019; attnkit.stages.sparse):
the masks against the sets written from §4.2 with loops, the heads split of §4.3, attention
through them against a float64 softmax over exactly those keys, gradcheck, and the O(n·√n)
count of allowed pairs at l = √n."""

from __future__ import annotations

import math

import pytest
import torch
from _reference import factorised_sets, sdpa_ref
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit.core import attend
from attnkit.modules import split_heads
from attnkit.stages.scores import ScaledDotScore
from attnkit.stages.sparse import FactorisedAlignment, PatternSpec, allowed_pairs, pattern_mask


def reference_mask(pattern, positions, tk, l, c, causal, part=None) -> torch.Tensor:
    out = torch.zeros(len(positions), tk, dtype=torch.bool)
    for row, i in enumerate(positions):
        first, second = factorised_sets(pattern, i, tk, l, c, causal)
        chosen = {None: first | second, 1: first, 2: second}[part]
        for j in chosen:
            out[row, j] = True
    return out


@settings(max_examples=80, deadline=None)
@given(pattern=st.sampled_from(["strided", "fixed"]), tq=st.integers(1, 20),
       extra=st.integers(0, 6), l=st.integers(1, 7), data=st.data(), causal=st.booleans())
def test_masks_are_the_papers_sets(pattern, tq, extra, l, data, causal) -> None:  # fmt: skip
    c = data.draw(st.integers(1, l))
    tk = tq + extra
    positions = torch.tensor(data.draw(st.lists(st.integers(0, tk - 1), min_size=tq,
                                                max_size=tq)))  # fmt: skip
    spec = PatternSpec(pattern, l, c, causal=causal)
    got = pattern_mask(spec, positions, tk)
    want = reference_mask(pattern, positions.tolist(), tk, l, c, causal)
    assert torch.equal(got, want)
    split = pattern_mask(PatternSpec(pattern, l, c, causal=causal, split_heads=True),
                         positions, tk, heads=4)  # fmt: skip
    for h in range(4):
        part = reference_mask(pattern, positions.tolist(), tk, l, c, causal, part=1 + h % 2)
        assert torch.equal(split[h], part), h
    assert torch.equal(split[0] | split[1], want)  # two heads cover the merged pattern


@pytest.mark.parametrize("name", ["strided", "strided-causal", "fixed-causal",
                                  "fixed-causal-heads", "strided-heads"])  # fmt: skip
def test_attention_through_a_pattern_equals_a_float64_softmax_over_its_keys(name: str) -> None:
    torch.manual_seed(0)
    layer = attnkit.build("scaled_dot", dim=16, align=name, stride=3, heads=4).double()
    x = torch.randn(2, 11, 16, dtype=torch.float64)
    lengths = torch.tensor([11, 8])
    pad = attnkit.padding_mask(lengths)  # (B, 1, Tk)
    out = layer(x, mask=pad)
    q, k, v = (split_heads(proj(x), 4) for proj in (layer.q_proj, layer.k_proj, layer.v_proj))
    spec = layer.align.spec
    pos = torch.arange(11)
    allowed = pattern_mask(spec, pos, 11, heads=4 if spec.split_heads else None)
    allowed = allowed & pad[:, None]  # (B, H|1, Tq, Tk)
    _, w = sdpa_ref(q, k, v, allowed)
    torch.testing.assert_close(out.weights, w, rtol=1e-10, atol=1e-12)


def test_gradcheck_through_the_fixed_pattern() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 9, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    align = FactorisedAlignment(PatternSpec("fixed", 3, 1, causal=True, split_heads=True))

    def f(q, k, v):
        return attend(q, k, v, score=ScaledDotScore(), align=align).context

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_strided_reaches_order_sqrt_n_keys() -> None:
    """At l = √n each query reaches at most l + 1 + ⌈n / l⌉ keys: O(n·√n) pairs in all."""
    n = 1024
    l = int(math.isqrt(n))
    allowed = pattern_mask(PatternSpec("strided", l, causal=True), torch.arange(n), n)
    per_query = allowed.sum(-1)
    assert int(per_query.max()) <= l + 1 + math.ceil(n / l)
    assert int(allowed.sum()) <= n * (l + 1 + math.ceil(n / l)) < n * n // 10


def test_bad_patterns_fail_clearly() -> None:
    with pytest.raises(ValueError, match="stride l must be at least 1"):
        PatternSpec("strided", 0)
    with pytest.raises(ValueError, match="summary columns c must be in 1 .. stride"):
        PatternSpec("fixed", 4, 5)
    with pytest.raises(ValueError, match="needs queries with a heads dimension"):
        q = torch.randn(2, 5, 8)
        FactorisedAlignment(PatternSpec("strided", 2, split_heads=True))(q, q)
    with pytest.raises(ValueError, match="needs stride="):
        attnkit.build("scaled_dot", dim=8, align="strided")


@settings(max_examples=60, deadline=None)
@given(
    pattern=st.sampled_from(["strided", "fixed"]),
    n=st.integers(1, 40),
    l=st.integers(1, 12),
    data=st.data(),
    causal=st.booleans(),
    split=st.booleans(),
    heads=st.integers(1, 5),
)
def test_allowed_pairs_counts_the_papers_sets(pattern, n, l, data, causal, split, heads) -> None:
    """``allowed_pairs`` (a closed form in O(n), the bench's FLOPs) equals the pairs of the
    sets written from §4.2, counted with loops, and the dense mask's True count."""
    c = data.draw(st.integers(1, l))
    split = split and heads >= 2
    total = 0
    for h in range(heads):
        for i in range(n):
            first, second = factorised_sets(pattern, i, n, l, c, causal)
            total += len((first if h % 2 == 0 else second) if split else first | second)
    spec = PatternSpec(pattern, l, c, causal, split)
    assert allowed_pairs(spec, n, heads) == total
    mask = pattern_mask(spec, torch.arange(n), n, heads if split else None)
    assert int(mask.sum()) * (1 if split else heads) == total


def test_allowed_pairs_grows_as_n_sqrt_n() -> None:
    """With l = round(√n) a strided-causal-heads query reaches about √n keys: half the heads
    l + 1, half about i / l + 1; pairs / (n·√n·H) tends to (1 + 1/2) / 2 = 0.75."""
    for n in (4096, 16384, 65536):
        spec = PatternSpec("strided", round(math.sqrt(n)), causal=True, split_heads=True)
        per = allowed_pairs(spec, n, 8) / (n * math.sqrt(n) * 8)
        assert 0.74 < per < 0.76, (n, per)
