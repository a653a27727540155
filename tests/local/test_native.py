"""The banded flash kernel in C++ (``attnkit.local.native``): its context and gradients equal
the reference path's (the dense band of ``attend(..., align=SlidingWindow)``, plain autograd)
to 1e-10 in float64, it passes gradcheck, gives zero (never NaN) on rows with no allowed key,
compiles with ``fullgraph=True``, and ``kernel='auto'`` falls back to the SDPA tiles, with a
warning that says why, where it does not apply or could not be built."""

import re
import warnings
from pathlib import Path

import pytest
import torch
from _band import TIGHT, band_inputs, matches_reference
from _spies import graph_has
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
import attnkit.local.native as native
from attnkit.local import sliding_window_attention

if native.kernel() is None:  # pragma: no cover - a machine without a C++ compiler
    pytest.skip("the native kernel could not be built here", allow_module_level=True)


def _uses_native(out: torch.Tensor) -> bool:
    return graph_has(out, "band_attention")


def _check(
    tq: int, tk: int, radius: int, causal: bool, mask: torch.Tensor | None,
    block: int | None = None, lead: tuple[int, ...] = (2, 3), d: int = 8, dv: int = 5,
    seed: int = 0,
) -> list[torch.Tensor]:  # fmt: skip
    """Context and (dq, dk, dv) of kernel='native' against the reference; -> the gradients."""
    inputs = band_inputs(lead, tq, tk, d, dv, seed)
    out = sliding_window_attention(*inputs, radius, causal, mask, block=block, kernel="native")
    return matches_reference(out.context, inputs, radius, causal, mask)


def _key_mask(kind: str, tk: int, seed: int = 1) -> torch.Tensor | None:
    gen = torch.Generator().manual_seed(seed)
    if kind == "none":
        return None
    if kind == "key":  # a padding mask per sentence, broadcast over heads
        return torch.rand(2, 1, 1, tk, generator=gen) > 0.3
    if kind == "head":  # one per sentence and head
        return torch.rand(2, 3, 1, tk, generator=gen) > 0.3
    return torch.rand(tk, generator=gen) > 0.3  # "row": one (Tk,) row for all


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", ["none", "key", "head", "row"])
def test_context_and_gradients_equal_reference(causal: bool, kind: str) -> None:
    """n = 301 (not a multiple of the block), many blocks, D != Dv, every key-mask kind."""
    _check(301, 301, 20, causal, _key_mask(kind, 301), block=16)


def test_default_block_and_band_wider_than_a_block() -> None:
    _check(200, 200, 70, False, None)  # default block 64: blocks reach 64 + 140 keys
    _check(200, 200, 70, True, _key_mask("key", 200))


def test_rectangular_and_wide_radius() -> None:
    _check(17, 25, 4, False, None, block=5)
    _check(25, 17, 4, True, None, block=3)  # queries past the last key's reach
    _check(40, 9, 3, False, None, block=4)  # whole blocks that reach no key
    _check(9, 9, 50, False, None, block=1)  # radius clipped to the sequence
    _check(9, 9, 0, True, None, block=2)  # a query attends itself only


def test_rows_with_no_allowed_key_give_zero_output_and_gradient() -> None:
    inputs = band_inputs((2, 3), 40, 40, 8, 8, 0)
    mask = torch.ones(2, 1, 1, 40, dtype=torch.bool)
    mask[0, ..., 5:30] = False  # queries 9..25 of sentence 0 see no key within radius 3
    mask[1] = False  # sentence 1: nothing at all
    out = sliding_window_attention(*inputs, 3, False, mask, block=4, kernel="native")
    assert torch.isfinite(out.context).all()
    assert out.context[0, :, 9:26].abs().max() == 0 and out.context[1].abs().max() == 0
    out.context.sum().backward()
    for x in inputs:
        assert x.grad is not None and torch.isfinite(x.grad).all()
    assert inputs[0].grad[1].abs().max() == 0 and inputs[2].grad[1].abs().max() == 0
    _check(40, 40, 3, False, mask, block=4)


def test_many_blocks_of_one_head_run_in_parallel_without_races() -> None:
    """G = 1: the backward's chunks of one colour run on both threads and add into disjoint
    key rows; a race would lose additions to dK/dV."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for block in (1, 4, 7):
            _check(400, 400, 9, False, None, block=block, lead=(1,), d=4, dv=3)
            _check(400, 400, 9, True, None, block=block, lead=(1,), d=4, dv=3)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", ["none", "key", "head"])
def test_every_other_head_is_read_in_place(causal: bool, kind: str) -> None:
    """The even heads of (B, H, T, D) (the Sparse Transformer's heads split passes them): rows
    contiguous, a stride of two heads along G. The kernel reads them in place (no copy in the
    forward pass) and the context and gradients equal the dense reference's."""
    full = band_inputs((2, 6), 77, 77, 8, 8, 3)  # (B, H, T, ·) leaves
    even = [x.unflatten(1, (3, 2))[:, :, 0] for x in full]  # (B, H/2, T, ·) views
    assert not even[0].is_contiguous()
    mask = _key_mask(kind, 77)  # "head": (2, 3, 1, Tk), one per sentence and even head
    with torch.profiler.profile(record_shapes=True) as prof:
        out = sliding_window_attention(*even, 9, causal, mask, block=16, kernel="native")
    copied = [e.input_shapes for e in prof.events() if e.name in ("aten::copy_", "aten::clone")]
    assert not [s for s in copied if s and s[0][-2:] == [77, 8]], copied  # (.., T, D): none
    assert native.rows(even[0].reshape(-1, 77, 8)).data_ptr() == even[0].data_ptr()
    matches_reference(out.context, even, 9, causal, mask)


@pytest.mark.parametrize("causal", [False, True])
def test_rows_apart_are_read_in_place(causal: bool) -> None:
    """Every other row (a stride of 2·D along T, as the residue classes' rows l·D apart) is
    read in place too, and equals the reference; a stride other than 1 along D is refused."""
    full = band_inputs((2, 3), 60, 60, 8, 8, 4)
    alternate = [x[..., ::2, :] for x in full]  # (B, H, 30, ·) views, rows 2·D apart
    assert native.rows(alternate[0].reshape(-1, 30, 8)).data_ptr() == full[0].data_ptr()
    out = sliding_window_attention(*alternate, 5, causal, None, block=8, kernel="native")
    matches_reference(out.context, alternate, 5, causal, None)
    q = full[0].detach().reshape(-1, 60, 8)
    with pytest.raises(RuntimeError, match="unit stride along D"):
        native.band_attention(q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2), 3,
                              causal, None, 4)  # fmt: skip


def test_staged_groups_run_in_parallel_without_races() -> None:
    """Rows apart, G = 18 slices (groups of 8 staged together, the last one short) and many
    chunks per colour, on two threads: each group's dK, dV are added back into disjoint rows."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for causal in (False, True):
            full = band_inputs((2, 9), 600, 600, 4, 3, 5)
            alternate = [x[..., ::2, :] for x in full]  # (2, 9, 300, ·), rows 2·E apart
            out = sliding_window_attention(*alternate, 9, causal, None, block=4, kernel="native")
            matches_reference(out.context, alternate, 9, causal, None)
    finally:
        torch.set_num_threads(before)


def test_gradcheck_tiny() -> None:
    q, k, v = band_inputs((1, 2), 11, 11, 3, 2, 3)
    mask = torch.rand(1, 1, 1, 11, generator=torch.Generator().manual_seed(4)) > 0.3

    def f(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return sliding_window_attention(q, k, v, 2, False, mask, block=4, kernel="native").context

    def g(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return sliding_window_attention(q, k, v, 3, True, block=3, kernel="native").context

    assert torch.autograd.gradcheck(f, (q, k, v))
    assert torch.autograd.gradcheck(g, (q, k, v))


def test_float32_near_float64() -> None:
    q, k, v = (x.detach() for x in band_inputs((1, 4), 500, 500, 64, 64, 5))
    want = attnkit.attend(q, k, v, align=attnkit.SlidingWindow(40, False)).context
    got = sliding_window_attention(q.float(), k.float(), v.float(), 40, kernel="native").context
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=1e-4)


@settings(max_examples=40, deadline=None)
@given(
    tq=st.integers(1, 40),
    tk=st.integers(1, 40),
    radius=st.integers(0, 45),
    causal=st.booleans(),
    kind=st.sampled_from(["none", "key", "head", "row"]),
    block=st.sampled_from([1, 2, 5, 8, None]),
    seed=st.integers(0, 2**16),
)
def test_equals_reference_over_shapes(
    tq: int, tk: int, radius: int, causal: bool, kind: str, block: int | None, seed: int
) -> None:
    _check(tq, tk, radius, causal, _key_mask(kind, tk, seed), block=block, d=4, dv=3, seed=seed)


def test_auto_picks_native_where_it_applies_and_tiles_elsewhere() -> None:
    q, k, v = band_inputs((2, 3), 30, 30, 8, 8, 0)
    assert _uses_native(sliding_window_attention(q, k, v, 3).context)
    through_attend = attnkit.attend(q, k, v, align=attnkit.SlidingWindow(3), need_weights=False)
    assert _uses_native(through_attend.context)
    query_mask = torch.rand(2, 1, 30, 1) > 0.3  # depends on the query: the tiles take it
    out = sliding_window_attention(q, k, v, 3, mask=query_mask)
    assert not _uses_native(out.context)
    ref = attnkit.attend(q, k, v, align=attnkit.SlidingWindow(3), mask=query_mask)
    torch.testing.assert_close(out.context, ref.context, **TIGHT)
    half = sliding_window_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), 3)
    assert not _uses_native(half.context)
    assert not _uses_native(sliding_window_attention(q, k, v, 3, kernel="tiles").context)


def test_native_says_where_it_does_not_apply() -> None:
    q, k, v = band_inputs((1, 1), 10, 10, 4, 4, 0)
    with pytest.raises(ValueError, match="bfloat16"):
        sliding_window_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), 2, kernel="native")
    with pytest.raises(ValueError, match="need_weights"):
        sliding_window_attention(q, k, v, 2, need_weights=True, kernel="native")
    with pytest.raises(ValueError, match="depends on the query"):
        full = torch.ones(10, 10, dtype=torch.bool)
        sliding_window_attention(q, k, v, 2, mask=full, kernel="native")
    with pytest.raises(ValueError, match="'auto', 'native' or 'tiles'"):
        sliding_window_attention(q, k, v, 2, kernel="fast")


def test_disabled_kernel_falls_back_and_native_says_so(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(native, "USE", False)
    assert native.kernel() is None
    q, k, v = band_inputs((1, 2), 20, 20, 4, 4, 0)
    out = sliding_window_attention(q, k, v, 2)
    assert not _uses_native(out.context)
    with pytest.raises(RuntimeError, match="ATTNKIT_NATIVE=0"):
        sliding_window_attention(q, k, v, 2, kernel="native")


def test_a_failed_build_warns_once_and_falls_back(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from torch.utils import cpp_extension

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))  # no published build to load

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("Error building extension 'attnkit_band_flash': no compiler")

    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setattr(cpp_extension, "load", broken)
    q, k, v = band_inputs((1, 2), 20, 20, 4, 4, 0)
    with pytest.warns(RuntimeWarning, match="could not be built.*no compiler.*ATTNKIT_NATIVE=0"):
        out = sliding_window_attention(q, k, v, 2)
    ref = attnkit.attend(q, k, v, align=attnkit.SlidingWindow(2))
    torch.testing.assert_close(out.context, ref.context, **TIGHT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not warned again, not rebuilt
        assert not _uses_native(sliding_window_attention(q, k, v, 2).context)


def test_compiles_with_fullgraph_and_equals_eager() -> None:
    q, k, v = (x.detach().float() for x in band_inputs((2, 2), 50, 50, 8, 8, 0))
    mask = torch.rand(2, 1, 1, 50) > 0.2

    def f(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return sliding_window_attention(q, k, v, 5, True, mask).context

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    qs = [x.clone().requires_grad_() for x in (q, k, v)]
    qe = [x.clone().requires_grad_() for x in (q, k, v)]
    got, want = compiled(*qs), f(*qe)
    torch.testing.assert_close(got, want)
    got.sum().backward()
    want.sum().backward()
    for a, b in zip(qs, qe, strict=True):
        torch.testing.assert_close(a.grad, b.grad)


def test_flop_counter_counts_the_products_it_runs() -> None:
    """n = 10, r = 2, blocks of 4: block 0 reaches keys 0..5 (6), block 1 keys 2..9 (8),
    block 2 (queries 8, 9) keys 6..9 (4): 4·6 + 4·8 + 2·4 = 64 pairs. Forward 2·(D + Dv)
    FLOPs per pair and (B·H = 3) heads; backward 2·(3D + 2Dv)."""
    from torch.utils.flop_counter import FlopCounterMode

    q, k, v = band_inputs((1, 3), 10, 10, 8, 5, 0)
    assert native.band_pairs(10, 10, 2, False, 4) == 64
    assert native.band_pairs(10, 10, 2, True, 4) == 4 * 4 + 4 * 6 + 2 * 4  # keys t0-2..t_last
    with FlopCounterMode(display=False) as fc:
        out = sliding_window_attention(q, k, v, 2, block=4, kernel="native").context
    assert fc.get_total_flops() == 3 * 64 * 2 * (8 + 5)
    with FlopCounterMode(display=False) as fc:
        out.sum().backward()
    assert fc.get_total_flops() == 3 * 64 * 2 * (3 * 8 + 2 * 5)


@pytest.mark.parametrize(
    ("tq", "tk", "radius", "causal", "block"),
    [(400, 400, 9, False, 4), (400, 400, 9, True, 7), (1000, 1000, 256, False, 64),
     (300, 200, 30, False, 1), (50, 50, 100, True, 8), (64, 64, 0, False, 64)],
)  # fmt: skip
def test_backward_chunks_of_one_colour_reach_disjoint_keys(
    tq: int, tk: int, radius: int, causal: bool, block: int
) -> None:
    """The backward pass adds each block's dK/dV into its key range from two threads at once;
    that is safe only because the chunks run together (one colour) never reach the same key.
    Every block is in exactly one chunk. Ranges by hand: block i reaches keys
    [i·b - r, last + r] (last for causal) within [0, Tk)."""
    colours = native.kernel().backward_chunks(tq, tk, radius, causal, block)
    blocks = sorted(i for chunks in colours for first, stop in chunks for i in range(first, stop))
    assert blocks == list(range(-(-tq // block)))
    for chunks in colours:
        ranges = []
        for first, stop in chunks:
            last = min(tq, stop * block) - 1
            hi = min(tk, (last if causal else last + radius) + 1)
            ranges.append((max(0, first * block - radius), hi))
        ranges.sort()
        for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False):
            assert hi <= lo, (ranges, radius, block)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["rows", "chunks", "classes"])
def test_backward_into_overwrites_whatever_dk_and_dv_hold(layout: str, causal: bool) -> None:
    """``backward_into`` writes every row of dq, dk, dv whatever they hold on entry (NaN
    here), Tk > Tq so that some keys are reached by no query: "rows" (contiguous) and "chunks"
    (rows apart, staged, a small radius: many chunks) add into dK, dV, which the kernel zeroes
    first; "classes" (rows apart, the radius spanning the slice: one chunk, as the Sparse
    Transformer's residue classes) copies its rows in and zeroes the keys no query reaches."""
    tq, tk, radius, block = 40, 52, (52 if layout == "classes" else 3), 8
    if layout == "rows":
        inputs = band_inputs((2, 3), tq, tk, 8, 5, 6)
    else:  # rows 2·E apart, views of leaves
        full = band_inputs((2, 3), 2 * tq, 2 * tk, 8, 5, 6)
        inputs = [x[..., ::2, :].detach().requires_grad_() for x in full]
    module = native.kernel()
    chunks = sum(len(c) for c in module.backward_chunks(tq, tk, radius, causal, block))
    assert (chunks == 1) == (layout == "classes")
    q, k, v = (x.detach().reshape(6, *x.shape[-2:]) for x in inputs)  # (G, T, ·) views
    assert (q.stride(1) == 8) == (layout == "rows")
    out, lse = module.forward(q, k, v, radius, causal, None, block)
    grad = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(7))
    got = [torch.full(x.shape, float("nan"), dtype=x.dtype) for x in (q, k, v)]
    module.backward_into(grad, q, k, v, out, lse, *got, radius, causal, None, block)
    ref = attnkit.attend(*inputs, align=attnkit.SlidingWindow(radius, causal))
    want = torch.autograd.grad(ref.context, inputs, grad.view(ref.context.shape))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.view(b.shape), b, **TIGHT)
    if causal or layout != "classes":  # else the radius reaches every key
        assert not want[1][..., -1, :].any()  # the last key: reached by no query


def test_cached_blocks_lie_on_huge_pages() -> None:
    """``cached_empty`` takes a 2 MiB-aligned block advised onto 2 MiB pages before its first
    touch: where Linux's transparent huge pages are on ("madvise" or "always"), the written
    tensor lies on them (its mapping's AnonHugePages in /proc/self/smaps), and its values are
    those written."""
    setting = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not setting.exists() or "[never]" in setting.read_text():
        pytest.skip("no transparent huge pages on this machine")
    native.release_cache()
    x = native.kernel().cached_empty([16 * 2**20], torch.empty(0))  # 64 MiB float32
    assert x.data_ptr() % 2**21 == 0
    x.fill_(1.5)
    assert bool((x == 1.5).all())
    start, stop, huge, inside = x.data_ptr(), x.data_ptr() + 64 * 2**20, 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():  # the advice splits the
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):  # mapping: sum over the tensor's parts
            lo, hi = (int(a, 16) for a in line.split()[0].split("-"))
            inside = lo < stop and start < hi
        elif inside and line.startswith("AnonHugePages:"):
            huge += int(line.split()[1])  # kB
    assert huge >= 32 * 1024, huge  # most of the 64 MiB


def test_the_cache_hands_a_block_out_again_only_once_it_is_freed() -> None:
    """A freed tensor's block goes back to the cache and the next request of its size takes it;
    a block still held is never handed out twice; a size more than twice smaller takes a new
    block, one under 1 MiB plain memory; the limit bounds what stays cached, and
    ``release_cache`` frees it all."""
    module = native.kernel()
    native.release_cache()
    before = native.cache_limit(2**30)
    try:
        like = torch.empty(0, dtype=torch.float64)
        a = module.cached_empty([3, 2**18], like)  # 6 MiB
        assert a.shape == (3, 2**18) and a.dtype == torch.float64 and a.is_contiguous()
        b = module.cached_empty([3, 2**18], like)
        assert b.data_ptr() != a.data_ptr()  # a is still held
        a.fill_(2.0)
        b.fill_(3.0)
        assert bool((a == 2.0).all()) and bool((b == 3.0).all())  # disjoint
        kept, view = a.data_ptr(), a[1]
        del a
        assert module.cache_held() == 0  # a view still holds the storage
        del view
        assert module.cache_held() == 6 * 2**20
        tiny = module.cached_empty([10], like)  # 80 bytes: torch.empty, not from the cache
        assert tiny.shape == (10,) and tiny.dtype == torch.float64
        assert tiny.data_ptr() != kept and module.cache_held() == 6 * 2**20
        small = module.cached_empty([2**16], like)  # 512 KiB: below 1 MiB, not cached either
        assert module.cache_held() == 6 * 2**20
        mib = module.cached_empty([2**17], like)  # 1 MiB: a new block of 2 MiB, not the 6
        assert mib.data_ptr() % 2**21 == 0 and mib.data_ptr() != kept
        assert module.cache_held() == 6 * 2**20
        c = module.cached_empty([2**17, 6], like)  # the same bytes, another shape
        assert c.data_ptr() == kept and module.cache_held() == 0
        del b, c, tiny, small, mib
        assert module.cache_held() == 6 * 2**20 + 6 * 2**20 + 2**21
        assert native.cache_limit(7 * 2**20) == 2**30  # over the new limit: freed now
        assert module.cache_held() == 0
        d = module.cached_empty([2**20], torch.empty(0))  # 4 MiB
        e = module.cached_empty([2**20], torch.empty(0))
        del d, e  # the second would pass the limit: freed at once
        assert module.cache_held() == 4 * 2**20
        assert native.release_cache() == 4 * 2**20 and module.cache_held() == 0
        with pytest.raises(ValueError, match="must be >= 0"):
            native.cache_limit(-1)
        with pytest.raises(RuntimeError, match="sizes must be >= 0"):
            module.cached_empty([-1], like)
    finally:
        native.cache_limit(before)
        native.release_cache()


def test_the_strided_heads_outputs_reuse_the_cache() -> None:
    """A training step's context, P and gradients come from the cache: a second step of the
    same shapes takes the blocks the first freed (nothing left cached while it runs), and the
    gradients are the same."""
    from attnkit.local.strided_heads import strided_heads

    module = native.kernel()
    native.release_cache()
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 1024, 64, generator=gen).requires_grad_() for _ in "qkv")
    grads = []  # 1 MiB each: from the cache
    for _ in range(2):
        strided_heads(q, k, v, 32, True, None).sum().backward()
        grads.append([x.grad.clone() for x in (q, k, v)])
        for x in (q, k, v):
            x.grad = None
        held = module.cache_held()
        assert held > 0  # the step's blocks, back in the cache
    out = strided_heads(q, k, v, 32, True, None)
    assert module.cache_held() < held  # the context and P took cached blocks
    del out
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    native.release_cache()


def test_blas_runs_on_the_worker_alone_inside_the_kernel() -> None:
    """Inside the kernel's parallel regions each worker's GEMMs run on its own thread, also
    after ``torch.set_num_threads`` (which turns MKL's dynamic threads off, so that a GEMM in
    a parallel region would start nested threads), and the setting is restored after."""
    threads = native.kernel().blas_threads()
    if not threads:
        pytest.skip("torch is not linked with MKL here")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert native.kernel().blas_threads() == [1, 2]
    finally:
        torch.set_num_threads(before)


def test_the_op_refuses_mismatched_inputs_with_a_clear_error() -> None:
    """Called directly (not through sliding_window_attention), the op checks what it reads:
    no out-of-bounds read, an error naming the shapes."""
    q, k, v = (torch.randn(2, 10, 4) for _ in range(3))
    with pytest.raises(RuntimeError, match=r"values \(G, Tk, Dv\)"):
        native.band_attention(q, k, torch.randn(2, 9, 4), 2, False, None, 4)
    with pytest.raises(RuntimeError, match=r"keys \(G, Tk, D\)"):
        native.band_attention(q, torch.randn(3, 10, 4), v, 2, False, None, 4)
    with pytest.raises(RuntimeError, match="one dtype"):
        native.band_attention(q, k, v.double(), 2, False, None, 4)
    with pytest.raises(RuntimeError, match=r"keep: a contiguous bool \(1 \| G, Tk\)"):
        native.band_attention(q, k, v, 2, False, torch.ones(2, 9, dtype=torch.bool), 4)
    with pytest.raises(RuntimeError, match="unit stride along D"):
        native.band_attention(q.transpose(1, 2), k, v, 2, False, None, 4)


def test_bench_variants_take_the_kernel_they_name(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``attnkit`` (the default) runs the native kernel, ``attnkit-tiles`` and
    ``attnkit-autograd`` never do: the bench's ratio between them would be a lie otherwise."""
    from attnkit.bench.variants import Case, make_step

    calls: list[int] = []
    real = native.band_attention

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(native, "band_attention", spy)
    cases = (("attnkit", True), ("attnkit-tiles", False), ("attnkit-autograd", False))
    for name, expected in cases:
        calls.clear()
        make_step(Case(name, "local", 64, True, radius=4))()
        assert bool(calls) is expected, name


def test_ninja_of_the_package_is_put_on_path(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A venv's console script run without activating the venv has no ``ninja`` on PATH: the
    build puts the ``ninja`` package's there."""
    ninja = pytest.importorskip("ninja")
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    monkeypatch.setenv("PATH", "/nowhere")
    native._ninja_on_path()
    import os

    assert os.environ["PATH"].split(os.pathsep)[0] == ninja.BIN_DIR


def _saved_offsets(tq: int, tk: int, radius: int, causal: bool, block: int) -> list[int]:
    """Where each block's saved weights start in a slice's share, written from the kernel's
    contract (rows × the block's key range [t0 - r, last + r], last causal), not its code."""
    off = [0]
    for t0 in range(0, tq, block):
        last = min(tq, t0 + block) - 1
        hi = min(tk, (last if causal else last + radius) + 1)
        off.append(off[-1] + (last - t0 + 1) * max(0, hi - max(0, t0 - radius)))
    return off


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["rows", "chunks", "classes"])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("blocks", [(8, 8), (16, 8), (16, 4)])
def test_saved_weights_are_the_softmax_and_give_the_same_gradients(
    layout: str, causal: bool, masked: bool, blocks: tuple[int, int]
) -> None:
    """``forward_saving`` (the strided heads' training path) writes the context ``forward``
    writes and keeps P block by block: each block's rows × key range equals the dense
    reference's softmax there (0 off the band, on masked keys and on a row with no allowed
    key), laid out by the backward's blocks (the forward's or a divisor); ``backward_saved``
    from it gives the reference's gradients, every row of dq, dk, dv overwritten (NaN on
    entry), in the three layouts of ``backward_into``'s test."""
    tq, tk, radius = 40, 52, (52 if layout == "classes" else 3)
    forward_block, block = blocks
    if layout == "rows":
        inputs = band_inputs((2, 3), tq, tk, 8, 5, 6)
    else:  # rows 2·E apart, views of leaves
        full = band_inputs((2, 3), 2 * tq, 2 * tk, 8, 5, 6)
        inputs = [x[..., ::2, :].detach().requires_grad_() for x in full]
    keep = None
    if masked:  # one row per slice; slice 0 allows no key at all
        keep = torch.rand(6, tk, generator=torch.Generator().manual_seed(3)) > 0.4
        keep[0] = False
    module = native.kernel()
    q, k, v = (x.detach().reshape(6, *x.shape[-2:]) for x in inputs)  # (G, T, ·) views
    out, _ = module.forward(q, k, v, radius, causal, keep, forward_block)
    got_out = torch.full(out.shape, float("nan"), dtype=out.dtype)
    weights = module.forward_saving(q, k, v, got_out, radius, causal, keep, forward_block,
                                    block)[1]  # fmt: skip
    torch.testing.assert_close(got_out, out, **TIGHT)
    mask = None if keep is None else keep.view(2, 3, 1, tk)
    ref = attnkit.attend(*inputs, align=attnkit.SlidingWindow(radius, causal), mask=mask)
    p = ref.weights.reshape(6, tq, tk)  # (G, Tq, Tk)
    off = _saved_offsets(tq, tk, radius, causal, block)
    assert weights.shape == (6, off[-1])
    for i, t0 in enumerate(range(0, tq, block)):
        rows = min(block, tq - t0)
        lo = max(0, t0 - radius)
        block_p = weights[:, off[i] : off[i + 1]].view(6, rows, -1)
        torch.testing.assert_close(block_p, p[:, t0 : t0 + rows, lo : lo + block_p.shape[-1]],
                                   **TIGHT)  # fmt: skip
    grad = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(7))
    got = [torch.full(x.shape, float("nan"), dtype=x.dtype) for x in (q, k, v)]
    module.backward_saved(grad, q, k, v, weights, *got, radius, causal, keep, block)
    want = torch.autograd.grad(ref.context, inputs, grad.view(ref.context.shape))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.view(b.shape), b, **TIGHT)
    if masked:
        assert not got[0][0].any()  # slice 0 reached no key: zero dq, no NaN


def test_backward_saved_refuses_weights_of_another_band() -> None:
    """Weights of another block (another layout of P) are refused with a message that says
    which weights are needed, not read out of bounds."""
    q, k, v = (x.detach() for x in band_inputs((2,), 40, 40, 8, 5, 0))
    module = native.kernel()
    out = torch.empty(2, 40, 5, dtype=torch.float64)
    weights = module.forward_saving(q, k, v, out, 3, True, None, 16, 8)[1]
    grads = [torch.empty_like(x) for x in (q, k, v)]
    with pytest.raises(RuntimeError, match="the weights .* that forward_saving returned"):
        module.backward_saved(torch.ones_like(out), q, k, v, weights, *grads, 3, True, None, 16)
    with pytest.raises(RuntimeError, match="must divide the forward's"):
        module.forward_saving(q, k, v, out, 3, True, None, 16, 6)


def test_the_build_name_follows_the_source_and_its_headers(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The build is cached by a hash of the kernel's source and the headers it includes: a
    change to either names another build (a stale one is never loaded)."""
    import shutil

    csrc = tmp_path / "csrc"
    shutil.copytree(native.SOURCE.parent, csrc)
    monkeypatch.setattr(native, "SOURCE", csrc / native.SOURCE.name)
    names = [native._build_name()]
    header = csrc / "block_cache.h"
    header.write_text(header.read_text() + "\n// changed\n")
    names.append(native._build_name())
    native.SOURCE.write_text(native.SOURCE.read_text() + "\n// changed\n")
    names.append(native._build_name())
    assert len(set(names)) == 3, names


def test_large_outputs_written_with_streaming_stores_equal_the_float64_kernel() -> None:
    """Past 4 MiB the kernel writes P and the classes' dK, dV with streaming stores (float32
    only): at n = 8,000, l = 70 (P rows of 102 values, classes of 115 and 114 rows) and
    d = 72 (rows not a multiple of the vector), float32 context and gradients equal the float64
    kernel's, which writes as usual, to float32 rounding."""
    from attnkit.local.strided_heads import strided_heads

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 8000, 72, generator=gen) for _ in "qkv")
    g = torch.randn(1, 4, 8000, 72, generator=gen)
    got, want = [], []
    for dtype, into in ((torch.float32, got), (torch.float64, want)):
        xs = [x.detach().to(dtype).requires_grad_() for x in (q, k, v)]
        out = strided_heads(*xs, 70, True, None)
        out.backward(g.to(dtype))
        into += [out.detach(), *(x.grad for x in xs)]
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.double(), b, rtol=2e-4, atol=2e-5)
    native.release_cache()
