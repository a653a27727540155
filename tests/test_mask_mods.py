"""Masks as functions (attnkit.mask_mods): document, prefix and global-token masks, their
compositions with the band, causal and padding masks, against dense boolean references
written with loops; given to attend and to the modules as objects; the errors."""

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

import attnkit
from attnkit import SlidingWindow, attend
from attnkit.mask_mods import band, causal, document, global_tokens, prefix
from tests._reference import sdpa_ref
from tests._spies import only_path

pytestmark = pytest.mark.usefixtures("one_thread_module")


def document_ref(ids: list[int]) -> torch.Tensor:
    n = len(ids)
    return torch.tensor([[ids[i] == ids[j] for j in range(n)] for i in range(n)])


def prefix_ref(n: int, t: int) -> torch.Tensor:
    return torch.tensor([[j < n or j <= i for j in range(t)] for i in range(t)])


def global_ref(idx: list[int], t: int) -> torch.Tensor:
    return torch.tensor([[i in idx or j in idx for j in range(t)] for i in range(t)])


def band_ref(r: int | None, t: int, is_causal: bool) -> torch.Tensor:
    def ok(i: int, j: int) -> bool:
        if is_causal:
            return 0 <= i - j and (r is None or i - j <= r)
        return r is None or abs(i - j) <= r

    return torch.tensor([[ok(i, j) for j in range(t)] for i in range(t)])


@st.composite
def case(draw):
    t = draw(st.integers(1, 9))
    ids = sorted(draw(st.lists(st.integers(0, 3), min_size=t, max_size=t)))  # packed runs
    n = draw(st.integers(0, t))
    glob = sorted(set(draw(st.lists(st.integers(0, t - 1), max_size=2))))
    r = draw(st.integers(0, 3))
    return t, ids, n, glob, r


@settings(max_examples=40, deadline=None)
@given(c=case())
def test_each_mask_and_its_compositions_equal_the_loops(c) -> None:
    t, ids, n, glob, r = c
    doc, pre, gl = document_ref(ids), prefix_ref(n, t), global_ref(glob, t)
    causal_ref, win = band_ref(None, t, True), band_ref(r, t, False)
    for mod, ref in (
        (document(ids), doc),
        (prefix(n), pre),
        (global_tokens(glob), gl),
        (document(ids) & causal(), doc & causal_ref),
        (global_tokens(glob) | band(r), gl | win),
        (attnkit.and_masks(document(ids), band(r, causal=True)), doc & band_ref(r, t, True)),
        (attnkit.or_masks(prefix(n), document(ids)) & causal(), (pre | doc) & causal_ref),
    ):
        assert torch.equal(mod.dense(t, t), ref), repr(mod)


def test_batched_ids_and_prefixes_give_a_mask_per_sequence() -> None:
    ids = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 2, 2]])
    m = document(ids).dense(5, 5)
    assert m.shape == (2, 5, 5)
    assert torch.equal(m[1], document_ref([0, 1, 1, 2, 2]))
    p = prefix(torch.tensor([1, 3])).dense(5, 5)
    assert torch.equal(p[0], prefix_ref(1, 5)) and torch.equal(p[1], prefix_ref(3, 5))
    pad = attnkit.padding_mask(torch.tensor([5, 3]))  # (B, 1, Tk)
    both = attnkit.and_masks(pad, document(ids)).dense(5, 5)
    assert torch.equal(both, pad & m)


@pytest.mark.parametrize("need_weights", [True, False])
def test_attend_takes_the_objects(need_weights: bool) -> None:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 8, 4, generator=g, dtype=torch.float64) for _ in range(3))
    ids = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 2], [0, 0, 0, 0, 0, 1, 1, 1]])
    mod = document(ids) & causal()
    dense = torch.stack([document_ref(r.tolist()) for r in ids]) & band_ref(None, 8, True)
    out = attend(q, k, v, mask=mod, need_weights=need_weights)
    ctx, w = sdpa_ref(q, k, v, dense[:, None])
    torch.testing.assert_close(out.context, ctx, rtol=1e-10, atol=1e-12)
    if need_weights:
        torch.testing.assert_close(out.weights, w, rtol=1e-10, atol=1e-12)


def test_a_decoding_step_sees_its_row() -> None:
    """At query position t (a decoder's step) the mask function gives row t."""
    mod = document([0, 0, 1, 1, 1, 2]) | global_tokens([0])
    full = mod.dense(6, 6)
    for t in range(6):
        row = mod.dense(1, t + 1, positions=torch.tensor([t]))  # (1, t + 1)
        assert torch.equal(row, full[t : t + 1, : t + 1])


def test_modules_take_the_objects_with_grouped_heads() -> None:
    torch.manual_seed(0)
    m = attnkit.SelfAttention(16, 4, kv_heads=2).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    ids = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 2, 2, 2]])
    out = m(x, mask=document(ids) & causal())
    dense = torch.stack([document_ref(r.tolist()) for r in ids]) & band_ref(None, 7, True)
    ref = m(x, mask=dense)  # (B, Tq, Tk): the module adds the heads dim
    torch.testing.assert_close(out.context, ref.context, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out.weights, ref.weights, rtol=1e-12, atol=1e-12)
    assert (out.weights[0, :, 3, :3] == 0).all()  # no attention across documents


def test_a_document_mask_under_a_sliding_window_keeps_the_band_kernel() -> None:
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 2, 40, 8, generator=g) for _ in range(3))
    ids = torch.arange(40).div(7, rounding_mode="floor")  # documents of 7 tokens
    mod = document(ids)
    with only_path("sliding"):
        fast = attend(q, k, v, align=SlidingWindow(3, causal=True), mask=mod, need_weights=False)
    dense = document_ref(ids.tolist()) & band_ref(3, 40, True)
    ctx, _ = sdpa_ref(q, k, v, dense)
    torch.testing.assert_close(fast.context.double(), ctx, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "call, fix",
    [
        (lambda: document(torch.zeros(2, 3, 4, dtype=torch.long)), r"give integer ids \(T,\)"),
        (lambda: document(torch.zeros(5)), r"give integer ids \(T,\)"),
        (lambda: document([0, 0, 1]).dense(4, 4), "give one id per position"),
        (lambda: attend(*(torch.randn(1, 5, 4),) * 3, mask=document([0, 0, 1])),
         "give one id per position"),  # fmt: skip
        (lambda: prefix(-1), "give lengths >= 0"),
        (lambda: global_tokens([[0]]), "integer positions"),
        (lambda: band(-1), "an int >= 0"),
        (lambda: document([0, 1]).dense(2, 2, positions=torch.zeros(2, 2)),
         "one position per query"),  # fmt: skip
    ],
)
def test_bad_input_is_one_clear_error(call, fix: str) -> None:
    with pytest.raises(ValueError, match=fix):
        call()
