"""The factorised kernel (attnkit.local.factorised, .factorised_merged) for the Sparse
Transformer's patterns (Child et al. 2019, §4.2-4.3), split across heads and merged:
``attend(..., need_weights=False)`` takes it (a spy proves it, and that no (Tq, Tk) pattern
mask is built), and its context and gradients equal attend's dense path and a float64 softmax
over the keys of the paper's sets, written with loops (tests/_reference.py
``factorised_sets``)."""

from __future__ import annotations

import pytest
import torch
from _reference import factorised_sets, sdpa_ref
from _spies import graph_has, only_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnkit
import attnkit.local.native as native
import attnkit.local.strided_heads as strided_heads
import attnkit.stages.sparse as sparse
from attnkit.core import attend
from attnkit.local.factorised import factorised_attention
from attnkit.registry import build_alignment
from attnkit.stages.sparse import FactorisedAlignment, PatternSpec

pytestmark = pytest.mark.usefixtures("one_thread")

HEADS_NAMES = ["strided-heads", "strided-causal-heads", "fixed-heads", "fixed-causal-heads"]
NAMES = HEADS_NAMES + [name.removesuffix("-heads") for name in HEADS_NAMES]


@pytest.fixture(params=["banded", "sdpa"])
def class_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The strided heads' residue classes on the banded flash kernel (its default where the
    kernel is built) or, with the kernel off (no compiler, ``ATTNKIT_NATIVE=0``), on SDPA."""
    if request.param == "sdpa":
        monkeypatch.setattr(native, "USE", False)
    elif native.kernel() is None:  # pragma: no cover - a machine without a C++ compiler
        pytest.skip("the native kernel could not be built here")
    return str(request.param)


def allowed_ref(spec: PatternSpec, n: int, heads: int, lengths: list[int]) -> torch.Tensor:
    """(B, H, n, n) bool with loops: head h takes A⁽¹⁾ (h even) or A⁽²⁾ (h odd) of query i,
    or A⁽¹⁾ ∪ A⁽²⁾ when merged, keys j < the sentence's length."""
    out = torch.zeros(len(lengths), heads, n, n, dtype=torch.bool)
    for b, length in enumerate(lengths):
        for i in range(n):
            parts = factorised_sets(spec.pattern, i, n, spec.stride, spec.summary, spec.causal)
            for h in range(heads):
                for j in parts[h % 2] if spec.split_heads else parts[0] | parts[1]:
                    out[b, h, i, j] = j < length
    return out


def _qkv(b: int, h: int, n: int, d: int = 6, seed: int = 0, grad: bool = False):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, n, d, generator=g, dtype=torch.float64).requires_grad_(grad)
                 for _ in range(3))  # fmt: skip


@pytest.mark.parametrize("padded", [False, True], ids=["no-mask", "padding"])
@pytest.mark.parametrize("name", NAMES)
def test_fast_path_equals_the_dense_path_and_the_papers_sets(name: str, padded: bool) -> None:
    n, heads, lengths = 23, 4, [23, 14]  # n = 23 is no multiple of l = 5
    align = build_alignment(name, 6, stride=5)
    assert isinstance(align, FactorisedAlignment)
    assert align.spec.split_heads == name.endswith("-heads")
    q, k, v = _qkv(2, heads, n)
    mask = attnkit.padding_mask(torch.tensor(lengths))[:, None] if padded else None  # (B,1,1,n)
    with only_path("factorised"):
        fast = attend(q, k, v, align=align, mask=mask, need_weights=False)
    with only_path("reference"):
        dense = attend(q, k, v, align=align, mask=mask, need_weights=True)
    torch.testing.assert_close(fast.context, dense.context, rtol=1e-12, atol=1e-12)
    want, _ = sdpa_ref(q, k, v, allowed_ref(align.spec, n, heads, lengths if padded else [n, n]))
    torch.testing.assert_close(fast.context, want, rtol=1e-12, atol=1e-12)


# the class_kernel fixture holds for every drawn input on purpose (one kernel per test run)
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    pattern=st.sampled_from(["strided", "fixed"]),
    causal=st.booleans(),
    split=st.booleans(),
    n=st.integers(1, 19),
    l=st.integers(1, 8),
    heads=st.integers(2, 5),
    data=st.data(),
)
def test_any_shape_and_padding_equals_the_papers_sets(pattern, causal, split, n, l, heads,
                                                      data, class_kernel) -> None:  # fmt: skip
    c = data.draw(st.integers(1, l))
    lengths = data.draw(st.lists(st.integers(0, n), min_size=2, max_size=2))  # 0: all masked
    spec = PatternSpec(pattern, l, c, causal=causal, split_heads=split)
    q, k, v = _qkv(2, heads, n, seed=n * 31 + l)
    mask = attnkit.padding_mask(torch.tensor(lengths), n)[:, None]  # (B, 1, 1, n)
    got = factorised_attention(q, k, v, spec, mask)
    want, _ = sdpa_ref(q, k, v, allowed_ref(spec, n, heads, lengths))
    assert torch.isfinite(got).all()  # a query with no allowed key: a zero row, never NaN
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_equal_the_dense_paths(name: str, class_kernel: str) -> None:
    align = build_alignment(name, 6, stride=4)
    mask = attnkit.padding_mask(torch.tensor([18, 11]))[:, None]  # (B, 1, 1, n)
    grads = []
    for need_weights, path in ((False, "factorised"), (True, "reference")):
        q, k, v = _qkv(2, 4, 18, grad=True)
        with only_path(path):
            out = attend(q, k, v, align=align, mask=mask, need_weights=need_weights).context
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        grads.append([x.grad for x in (q, k, v)])
    for fast, dense in zip(*grads, strict=True):
        torch.testing.assert_close(fast, dense, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("split", [True, False], ids=["heads", "merged"])
@pytest.mark.parametrize("pattern", ["strided", "fixed"])
def test_gradcheck_the_kernel(pattern: str, split: bool, class_kernel: str) -> None:
    spec = PatternSpec(pattern, 3, 2, causal=True, split_heads=split)
    mask = attnkit.padding_mask(torch.tensor([10, 6]))[:, None]  # (B, 1, 1, n)
    q, k, v = _qkv(2, 2, 10, d=3, grad=True)
    assert torch.autograd.gradcheck(lambda q, k, v: factorised_attention(q, k, v, spec, mask),
                                    (q, k, v))  # fmt: skip


def test_no_dense_pattern_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """n = 4096: the dense path would build the (n, n) pattern mask through ``pattern_mask``;
    the fast path never calls it."""

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("pattern_mask called: a dense (Tq, Tk) pattern was built")

    monkeypatch.setattr(sparse, "pattern_mask", refuse)
    n = 4096
    q, k, v = (torch.randn(1, 2, n, 4) for _ in range(3))
    for name in NAMES:
        with only_path("factorised"):
            out = attend(q, k, v, align=build_alignment(name, 4, stride=64), need_weights=False)
        assert out.context.shape == (1, 2, n, 4) and torch.isfinite(out.context).all()
    with pytest.raises(AssertionError, match="pattern_mask called"):  # the spy can fail
        attend(q[..., :8, :], k[..., :8, :], v[..., :8, :],
               align=build_alignment("strided-heads", 4, stride=2), need_weights=True)  # fmt: skip


@pytest.mark.parametrize(
    "case,path",
    [
        ("query-mask", "sdpa"),  # a mask that depends on the query
        ("positions", "sdpa"),  # an incremental decoder's positions
        ("weights", "reference"),
        ("no-heads", "reference"),  # (Tq, D) queries: the dense path raises its error
    ],
)
def test_other_calls_keep_the_dense_path(case: str, path: str) -> None:
    n = 9
    q, k, v = _qkv(1, 2, n)
    spec = PatternSpec("strided", 3, causal=True, split_heads=True)
    kw: dict = dict(align=FactorisedAlignment(spec), need_weights=case == "weights")
    if case == "query-mask":
        kw["mask"] = torch.rand(n, n, generator=torch.Generator().manual_seed(1)) < 0.8
    if case == "positions":
        kw["positions"] = torch.arange(n)
    if case == "no-heads":
        with pytest.raises(ValueError, match="heads dimension"):
            attend(q[0, 0], k[0, 0], v[0, 0], **kw)
        return
    with only_path(path):
        attend(q, k, v, **kw)


@pytest.mark.parametrize("name", ["strided", "fixed-causal"])
def test_merged_without_a_heads_dim_takes_the_kernel(name: str) -> None:
    """Queries (B, n, D): a merged pattern needs no heads; the keys both parts hold (j = i,
    j = i ± l, a block's own summary columns) count once, as in the dense softmax."""
    q, k, v = (x[:, 0] for x in _qkv(2, 1, 17))  # (B, n, D)
    align = build_alignment(name, 6, stride=4)
    mask = attnkit.padding_mask(torch.tensor([17, 9]))  # (B, 1, n)
    with only_path("factorised"):
        fast = attend(q, k, v, align=align, mask=mask, need_weights=False)
    want, _ = sdpa_ref(q, k, v, allowed_ref(align.spec, 17, 1, [17, 9])[:, 0])
    torch.testing.assert_close(fast.context, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [9, 10])  # l = 3: a multiple (no padding), and not
@pytest.mark.parametrize("heads", [2, 3])  # even: the heads' unbind; odd: strided slices
@pytest.mark.parametrize("pattern", ["strided", "fixed"])
def test_gradcheck_the_kernel_without_a_mask(pattern: str, heads: int, n: int,
                                             class_kernel: str) -> None:  # fmt: skip
    """No key mask: the causal parts run on SDPA's own is_causal (no mask at all), the padded
    rows closing each class or block."""
    spec = PatternSpec(pattern, 3, 2, causal=True, split_heads=True)
    q, k, v = _qkv(1, heads, n, d=3, grad=True)
    want, _ = sdpa_ref(q, k, v, allowed_ref(spec, n, heads, [n]))
    torch.testing.assert_close(factorised_attention(q, k, v, spec), want, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(lambda q, k, v: factorised_attention(q, k, v, spec),
                                    (q, k, v))  # fmt: skip


@pytest.mark.parametrize("keep", [(False, True), (True, True), (False, False)],
                         ids=["classes-P", "both-P", "no-P"])  # fmt: skip
@pytest.mark.parametrize("padded", [False, True], ids=["no-mask", "padding"])
@pytest.mark.parametrize("n", [48, 50, 4])  # l = 6: a multiple, not (classes of 9 and 8
@pytest.mark.parametrize("heads", [4, 3])  # rows), fewer than l (one row each); even heads:
# the heads' unbind; odd: strided slices
@pytest.mark.parametrize("causal", [True, False])
def test_strided_heads_gradients_equal_the_papers_sets(
    causal: bool, heads: int, n: int, padded: bool, keep: tuple[bool, bool], class_kernel: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Context and dQ, dK, dV of the strided heads split against a float64 softmax over the
    paper's sets (plain autograd through ``sdpa_ref``), B = 2, several rows per class, with
    each half's P kept by the forward or recomputed (``strided_heads.KEEP_WEIGHTS``)."""
    monkeypatch.setattr(strided_heads, "KEEP_WEIGHTS", keep)
    spec = PatternSpec("strided", 6, causal=causal, split_heads=True)
    lengths = [n, max(n - 13, 1)] if padded else [n, n]
    mask = attnkit.padding_mask(torch.tensor(lengths), n)[:, None] if padded else None
    q, k, v = _qkv(2, heads, n, d=5, seed=heads + n, grad=True)
    got = factorised_attention(q, k, v, spec, mask)
    want, _ = sdpa_ref(q, k, v, allowed_ref(spec, n, heads, lengths))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    g = torch.randn(got.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for a, b in zip(torch.autograd.grad(got, (q, k, v), g),
                    torch.autograd.grad(want, (q, k, v), g), strict=True):  # fmt: skip
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n", [64, 61])  # l = 8: a multiple, and not (5 classes of 8 rows)
@pytest.mark.parametrize("causal", [True, False])
def test_strided_heads_run_in_place_on_the_banded_kernel(causal: bool, n: int) -> None:
    """H even, CPU float32, any n: both halves run on the banded flash kernel
    (``attnkit.local.strided_heads``), forward and backward, with no SDPA call and no copy,
    pad, stack or cat of the inputs, the context or the gradients."""
    if native.kernel() is None:  # pragma: no cover - a machine without a C++ compiler
        pytest.skip("the native kernel could not be built here")
    spec = PatternSpec("strided", 8, causal=causal, split_heads=True)
    q, k, v = (torch.randn(1, 4, n, 8, requires_grad=True) for _ in range(3))
    with torch.profiler.profile() as prof:
        out = factorised_attention(q, k, v, spec)
        out.backward(torch.randn(out.shape))
    assert graph_has(out, "StridedHeads")
    names = {e.name for e in prof.events()}
    assert not [x for x in names if "scaled_dot_product" in x], names
    copies = {"aten::copy_", "aten::clone", "aten::cat", "aten::stack", "aten::constant_pad_nd"}
    assert not names & copies, names


@pytest.mark.parametrize("keep", [(False, True), (True, True), (False, False)],
                         ids=["classes-P", "both-P", "no-P"])  # fmt: skip
@pytest.mark.parametrize("n", [12, 13, 2])  # l = 3: a multiple, not, fewer than l
@pytest.mark.parametrize("heads", [2, 4])
@pytest.mark.parametrize("causal", [True, False])
def test_gradcheck_the_strided_heads_in_place(
    causal: bool, heads: int, n: int, keep: tuple[bool, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-place path (l = 3; n = 13: classes of 5 and of 4 rows; n = 2: one row each) with
    a padding mask: gradcheck, with each half's P kept or recomputed."""
    monkeypatch.setattr(strided_heads, "KEEP_WEIGHTS", keep)
    spec = PatternSpec("strided", 3, causal=causal, split_heads=True)
    mask = attnkit.padding_mask(torch.tensor([n, min(n, 7)]), n)[:, None]  # (B, 1, 1, n)
    q, k, v = _qkv(2, heads, n, d=3, grad=True)
    assert torch.autograd.gradcheck(lambda q, k, v: factorised_attention(q, k, v, spec, mask),
                                    (q, k, v))  # fmt: skip


@pytest.mark.parametrize("causal", [True, False])
def test_strided_heads_take_any_layout(causal: bool) -> None:
    """Inputs laid out (B, n, H, D) and transposed (as a projection gives them), and the
    gradient of a sum (stride 0 everywhere): the in-place path equals the paper's sets."""
    spec = PatternSpec("strided", 4, causal=causal, split_heads=True)
    g = torch.Generator().manual_seed(3)
    leaves = [torch.randn(2, 24, 4, 5, generator=g, dtype=torch.float64, requires_grad=True)
              for _ in range(3)]  # fmt: skip
    q, k, v = (x.transpose(1, 2) for x in leaves)  # (B, H, n, D), not contiguous
    got = factorised_attention(q, k, v, spec)
    if native.kernel() is not None:
        assert graph_has(got, "StridedHeads")
    want, _ = sdpa_ref(q, k, v, allowed_ref(spec, 24, 4, [24, 24]))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for a, b in zip(torch.autograd.grad(got.sum(), leaves),
                    torch.autograd.grad(want.sum(), leaves), strict=True):  # fmt: skip
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_strided_heads_refuse_a_second_derivative() -> None:
    """The kernel's backward is not differentiable: a second derivative raises, never a
    silent zero."""
    if native.kernel() is None:  # pragma: no cover - a machine without a C++ compiler
        pytest.skip("the native kernel could not be built here")
    spec = PatternSpec("strided", 4, causal=True, split_heads=True)
    q, k, v = _qkv(1, 4, 16, d=3, grad=True)
    (dq,) = torch.autograd.grad(factorised_attention(q, k, v, spec).sum(), q, create_graph=True)
    with pytest.raises(RuntimeError):
        dq.sum().backward()


@pytest.mark.parametrize("threads", [1, 2])
def test_the_forward_keeps_both_halves_p_on_any_number_of_threads(threads: int) -> None:
    """``KEEP_WEIGHTS`` None (the default): the forward keeps both halves' P for the backward
    pass (the measured gains, once P lies on the kernel's cache), on one thread and on two,
    and the gradients are the same."""
    if native.kernel() is None:  # pragma: no cover - a machine without a C++ compiler
        pytest.skip("the native kernel could not be built here")
    assert strided_heads.KEEP_WEIGHTS is None
    spec = PatternSpec("strided", 8, causal=True, split_heads=True)
    q, k, v = _qkv(1, 4, 64, d=8, seed=3, grad=True)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert strided_heads.keeping() == (True, True)
        out = factorised_attention(q, k, v, spec)
    finally:
        torch.set_num_threads(before)
    node = out.grad_fn
    while "StridedHeads" not in type(node).__name__:  # the view(s) above the kernel's node
        node = node.next_functions[0][0]
    kept = node.saved_tensors[4:]  # after q, k, v and the context
    # an lse is (G, n) for the band and (G·l, R) for the classes; P of every block is wider
    lse_like = [x.shape[-1] == rows for x, rows in zip(kept, (64, 64 // 8), strict=True)]
    assert lse_like == [False, False]
    dense = attend(q, k, v, align=build_alignment("strided-causal-heads", 8, stride=8))
    want = torch.autograd.grad(dense.context.sum(), (q, k, v))  # the dense path's
    for a, b in zip(torch.autograd.grad(out.sum(), (q, k, v)), want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
