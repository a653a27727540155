"""attend under a document mask function runs document by document (attnkit.document_blocks):
equal to plain softmax attention under the dense mask (float64, written with loops), for
batched and shared ids, heads, grouped key/value heads, bands, padding (fully masked rows)
and position stages at the global positions; it builds no (T, T) mask; ids that are not
contiguous runs take the dense path."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

import attnkit.core
import attnkit.document_blocks
from attnkit import CausalAlignment, SlidingWindow, attend
from attnkit.mask_mods import MaskMod, band, causal, document
from attnkit.stages.position import ALiBi, LearnedPosition, RotaryPosition
from tests._reference import grouped_ref, sdpa_ref

pytestmark = pytest.mark.usefixtures("one_thread_module")


def allowed_ref(ids: list[int], radius: int | None, is_causal: bool) -> torch.Tensor:
    """ids[i] == ids[j] and the band, with loops: (T, T) bool."""
    t = len(ids)

    def ok(i: int, j: int) -> bool:
        if ids[i] != ids[j] or (is_causal and j > i):
            return False
        return radius is None or abs(i - j) <= radius

    return torch.tensor([[ok(i, j) for j in range(t)] for i in range(t)])


def mod_for(ids, radius: int | None, is_causal: bool) -> MaskMod:
    doc = document(ids)
    if radius is not None:
        return doc & band(radius, causal=is_causal)
    return doc & causal() if is_causal else doc


@pytest.fixture
def no_dense(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """MaskMod.dense refuses (no (T, T) mask may be built); counts the per-document calls."""
    calls: list[int] = []
    real = attnkit.document_blocks.by_document

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    def refuse(*args, **kwargs):
        raise AssertionError("a dense (T, T) mask was built")

    monkeypatch.setattr(attnkit.core, "by_document", spy)
    monkeypatch.setattr(MaskMod, "dense", refuse)
    return calls


def rand(*shape: int, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


ROWS = [[0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4], [5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 7, 7]]


@pytest.mark.parametrize("radius, is_causal", [(None, False), (None, True), (2, False), (3, True),
                                               (0, False)])  # fmt: skip
@pytest.mark.parametrize("heads", [None, 3])
def test_batched_ids_equal_the_dense_mask(no_dense, radius, is_causal, heads) -> None:
    ids = torch.tensor(ROWS)  # (B, T): a different segmentation per row
    shape = (2, 12, 8) if heads is None else (2, heads, 12, 8)
    q, k, v = rand(*shape, seed=1), rand(*shape, seed=2), rand(*shape, seed=3)
    out = attend(q, k, v, mask=mod_for(ids, radius, is_causal), need_weights=False)
    allowed = torch.stack([allowed_ref(r, radius, is_causal) for r in ROWS])  # (B, T, T)
    ref, _ = sdpa_ref(q, k, v, allowed if heads is None else allowed[:, None])
    torch.testing.assert_close(out.context, ref, rtol=1e-10, atol=1e-10)
    assert no_dense == [1]


def test_shared_ids_over_any_leading_dims_and_float32(no_dense) -> None:
    ids = ROWS[0]
    q, k, v = (rand(2, 3, 2, 12, 4, seed=s, dtype=torch.float32) for s in (4, 5, 6))
    out = attend(q, k, v, mask=mod_for(ids, 2, True), need_weights=False)
    ref, _ = sdpa_ref(q, k, v, allowed_ref(ids, 2, True))
    torch.testing.assert_close(out.context.double(), ref, rtol=1e-5, atol=1e-5)
    assert out.context.dtype == torch.float32 and no_dense == [1]


@pytest.mark.parametrize("mask_args", [(None, True), (2, True), (None, False)])
def test_grouped_key_value_heads(no_dense, mask_args) -> None:
    ids = torch.tensor(ROWS)
    q = rand(2, 4, 12, 8, seed=7)
    k, v = rand(2, 2, 12, 8, seed=8), rand(2, 2, 12, 8, seed=9)
    out = attend(q, k, v, mask=mod_for(ids, *mask_args), need_weights=False)
    allowed = torch.stack([allowed_ref(r, *mask_args) for r in ROWS])[:, None]  # (B, 1, T, T)
    ref, _ = grouped_ref(q, k, v, allowed)
    torch.testing.assert_close(out.context, ref, rtol=1e-10, atol=1e-10)
    assert no_dense == [1]


def test_padding_with_fully_masked_rows(no_dense) -> None:
    """A key-padding tensor and-ed in: document 3 is all padding, so its rows see no key and
    give zeros; the padded keys of document 4 are hidden from its queries."""
    ids = torch.tensor(ROWS)
    keep = torch.ones(2, 1, 12, dtype=torch.bool)
    keep[0, 0, 9] = False  # all of document 3 (one token)
    keep[1, 0, 11] = False  # half of document 7
    q, k, v = rand(2, 2, 12, 4, seed=10), rand(2, 2, 12, 4, seed=11), rand(2, 2, 12, 4, seed=12)
    out = attend(q, k, v, mask=document(ids) & causal() & keep, need_weights=False)
    allowed = torch.stack([allowed_ref(r, None, True) for r in ROWS]) & keep  # (B, T, T)
    ref, _ = sdpa_ref(q, k, v, allowed[:, None])
    torch.testing.assert_close(out.context, ref, rtol=1e-10, atol=1e-10)
    assert (out.context[0, :, 9] == 0).all()  # the fully masked row
    assert no_dense == [1]


def test_a_sliding_window_alignment_runs_inside_each_document(no_dense) -> None:
    ids = torch.tensor(ROWS)
    q, k, v = rand(2, 2, 12, 4, seed=13), rand(2, 2, 12, 4, seed=14), rand(2, 2, 12, 4, seed=15)
    out = attend(q, k, v, align=SlidingWindow(1, causal=True), mask=document(ids) & band(2),
                 need_weights=False)  # fmt: skip
    allowed = torch.stack([allowed_ref(r, 1, True) for r in ROWS])[:, None]
    torch.testing.assert_close(out.context, sdpa_ref(q, k, v, allowed)[0], rtol=1e-10,
                               atol=1e-10)  # fmt: skip
    out = attend(q, k, v, align=CausalAlignment(), mask=document(ids), need_weights=False)
    allowed = torch.stack([allowed_ref(r, None, True) for r in ROWS])[:, None]
    torch.testing.assert_close(out.context, sdpa_ref(q, k, v, allowed)[0], rtol=1e-10,
                               atol=1e-10)  # fmt: skip
    assert no_dense == [1, 1]


@pytest.mark.parametrize("stage", ["learned", "rope", "alibi"])
def test_position_stages_see_the_global_positions(stage) -> None:
    """Each document's tokens keep their places in the packed row: learned absolute positions
    (which tell position 0 from 7) give what the dense path gives, not what a document at 0
    would get."""
    torch.manual_seed(0)
    position = {"learned": lambda: LearnedPosition(2, 4, max_len=16).double(),
                "rope": lambda: RotaryPosition(4), "alibi": lambda: ALiBi(2)}[stage]()  # fmt: skip
    ids = torch.tensor(ROWS)
    q, k, v = rand(2, 2, 12, 4, seed=16), rand(2, 2, 12, 4, seed=17), rand(2, 2, 12, 4, seed=18)
    mod = document(ids) & band(2, causal=True)
    dense = torch.stack([allowed_ref(r, 2, True) for r in ROWS])[:, None]  # (B, 1, T, T)
    out = attend(q, k, v, mask=mod, position=position, need_weights=False)
    ref = attend(q, k, v, mask=dense, position=position, need_weights=False)  # the dense path
    torch.testing.assert_close(out.context, ref.context, rtol=1e-10, atol=1e-10)
    if stage == "learned":  # the same document moved to position 0 reads other positions
        alone = attend(q[1:, :, 7:10], k[1:, :, 7:10], v[1:, :, 7:10], position=position,
                       align=SlidingWindow(2, causal=True), need_weights=False)  # fmt: skip
        assert not torch.allclose(alone.context, out.context[1:, :, 7:10])


def test_gradients_match_the_dense_path_and_gradcheck() -> None:
    ids = torch.tensor([[0, 0, 0, 1, 1, 2], [3, 3, 4, 4, 4, 4]])
    q, k, v = (rand(2, 2, 6, 3, seed=s).requires_grad_() for s in (19, 20, 21))
    for mod in (document(ids) & causal(), document(ids) & band(1, causal=True),
                document(ids) & band(1)):  # fmt: skip
        out = attend(q, k, v, mask=mod, need_weights=False).context
        got = torch.autograd.grad(out.square().sum(), (q, k, v))
        allowed = mod.dense(6, 6)[:, None]  # (B, 1, T, T)
        ref = torch.autograd.grad(sdpa_ref(q, k, v, allowed)[0].square().sum(), (q, k, v))
        for g, r in zip(got, ref, strict=True):
            torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-10)
    small = (rand(2, 1, 6, 2, seed=s).requires_grad_() for s in (22, 23, 24))
    mod = document(ids) & band(1, causal=True)
    assert torch.autograd.gradcheck(
        lambda q, k, v: attend(q, k, v, mask=mod, need_weights=False).context, tuple(small)
    )


@st.composite
def packing(draw):
    rows = []
    t = draw(st.integers(1, 14))
    for _ in range(draw(st.integers(1, 3))):
        cuts = sorted(set(draw(st.lists(st.integers(1, t - 1), max_size=5)))) if t > 1 else []
        bounds = [0, *cuts, t]
        rows.append([d for d in range(len(bounds) - 1) for _ in range(bounds[d + 1] - bounds[d])])
    radius = draw(st.one_of(st.none(), st.integers(0, 4)))
    return rows, radius, draw(st.booleans())


@settings(max_examples=40, deadline=None)
@given(c=packing())
def test_random_packings_equal_the_dense_mask(c) -> None:
    rows, radius, is_causal = c
    ids = torch.tensor(rows)  # (B, T)
    b, t = ids.shape
    q, k, v = rand(b, 2, t, 4, seed=22), rand(b, 2, t, 4, seed=23), rand(b, 2, t, 4, seed=24)
    calls: list[int] = []
    real = attnkit.document_blocks.by_document
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(attnkit.core, "by_document", lambda *a, **kw: calls.append(1) or real(*a, **kw))
        out = attend(q, k, v, mask=mod_for(ids, radius, is_causal), need_weights=False)
    allowed = torch.stack([allowed_ref(r, radius, is_causal) for r in rows])[:, None]
    torch.testing.assert_close(out.context, sdpa_ref(q, k, v, allowed)[0], rtol=1e-10,
                               atol=1e-10)  # fmt: skip
    assert calls == [1]


def test_ids_that_are_not_runs_take_the_dense_path_and_stay_right() -> None:
    ids = [0, 0, 1, 1, 0, 0, 2, 2]  # document 0 in two pieces
    q, k, v = rand(1, 8, 4, seed=25), rand(1, 8, 4, seed=26), rand(1, 8, 4, seed=27)
    calls: list[int] = []
    real = attnkit.document_blocks.by_document
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(attnkit.core, "by_document", lambda *a, **kw: calls.append(1) or real(*a, **kw))
        out = attend(q, k, v, mask=document(ids) & causal(), need_weights=False)
    torch.testing.assert_close(out.context, sdpa_ref(q, k, v, allowed_ref(ids, None, True))[0],
                               rtol=1e-10, atol=1e-10)  # fmt: skip
    assert calls == []


def test_weights_asked_for_take_the_dense_path() -> None:
    ids = ROWS[0]
    q = rand(12, 4, seed=28)
    out = attend(q, q, q, mask=document(ids) & causal())
    assert out.weights is not None and out.weights.shape == (12, 12)
    assert torch.equal(out.weights > 0, allowed_ref(ids, None, True))


def test_malformed_ids_keep_their_one_line() -> None:
    q = torch.randn(1, 5, 4)
    with pytest.raises(ValueError, match="give one id per position"):
        attend(q, q, q, mask=document([0, 0, 1]) & causal(), need_weights=False)
