"""The bench's Sparse Transformer scenarios (issue 30 §2): their FLOPs from the exact pair
count (``allowed_pairs``, tested in tests/stages/test_sparse_patterns.py), every variant
computing the same context, the attnkit variant on the factorised kernel,
the quick run, and the targets from hand-made rows."""

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from attnkit.bench import sparse
from attnkit.bench.suite import SuiteConfig, plan_cases, skip_reason, targets
from attnkit.bench.variants import Case, _attention_fn, available
from attnkit.cli import main
from attnkit.stages.sparse import PatternSpec, allowed_pairs, pattern_mask


def test_case_flops_count_the_allowed_pairs() -> None:
    case = Case("attnkit", "sparse", 64, False, heads=4, radius=8)
    spec = PatternSpec("strided", 8, 8, causal=True, split_heads=True)
    assert case.flops == 4 * 64 * allowed_pairs(spec, 64, 4)
    assert Case("naive", "sparse", 64, True, heads=4, radius=8).flops == 3 * case.flops
    fixed = Case("attnkit", "sparse-fixed", 64, False, heads=4, radius=8)
    mask = pattern_mask(PatternSpec("fixed", 8, 8, True, True), torch.arange(64), 64, 4)
    assert fixed.flops == 4 * 64 * int(mask.sum())


def context(case: Case, dtype: torch.dtype) -> tuple[torch.Tensor, list[torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    shape = (case.batch, case.heads, case.n, case.dim)
    q, k, v = (torch.randn(shape, generator=gen, dtype=dtype).requires_grad_() for _ in range(3))
    out = _attention_fn(case)(q, k, v)
    grads = torch.autograd.grad(out.sum() if dtype == torch.float64 else out.square().sum(),
                                (q, k, v)) if case.variant != "flex" else []  # fmt: skip
    return out.detach(), list(grads)


def reference(scenario: str, n: int, l: int, heads: int, q: np.ndarray, k: np.ndarray,
              v: np.ndarray) -> np.ndarray:  # fmt: skip
    """softmax(q kᵀ / √d) v over the paper's sets, float64 numpy, one (h, i) at a time."""
    pattern, c = sparse.SCENARIOS[scenario], min(sparse.SUMMARY, l)
    out = np.zeros_like(q)
    for h, i in itertools.product(range(heads), range(n)):
        keys = [j for j in range(n) if j <= i and (
            (0 <= i - j <= l if h % 2 == 0 else (i - j) % l == 0) if pattern == "strided"
            else (i // l == j // l if h % 2 == 0 else j % l >= l - c))]  # fmt: skip
        if not keys:  # fixed, before the first summary column: a zero context
            continue
        s = q[0, h, i] @ k[0, h, keys].T / math.sqrt(q.shape[-1])
        w = np.exp(s - s.max())
        out[0, h, i] = (w / w.sum()) @ v[0, h, keys]
    return out


@pytest.mark.parametrize("scenario", ["sparse", "sparse-fixed"])
@pytest.mark.parametrize("n,l", [(50, 7), (36, 6), (40, 12)])  # c = 7, 6, 8: 12 has empty rows
def test_every_variant_computes_the_same_context(scenario: str, n: int, l: int) -> None:
    """attnkit, sdpa-mask and naive in float64 against a numpy softmax over the paper's sets
    (context and gradients against naive's); flex (compiled, float32) to 1e-5."""
    heads, dim = 4, 16
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, heads, n, dim, generator=gen, dtype=torch.float64)
               for _ in range(3))  # fmt: skip
    want = reference(scenario, n, l, heads, q.numpy(), k.numpy(), v.numpy())
    grads: dict[str, tuple[torch.Tensor, ...]] = {}
    for variant in ("attnkit", "sdpa-mask", "naive"):
        fn = _attention_fn(Case(variant, scenario, n, False, heads=heads, dim=dim, radius=l))
        x = [t.clone().requires_grad_() for t in (q, k, v)]
        out = fn(*x)
        np.testing.assert_allclose(out.detach().numpy(), want, atol=1e-10, err_msg=variant)
        grads[variant] = torch.autograd.grad(out.square().sum(), x)
    for a, b in zip(grads["attnkit"] + grads["sdpa-mask"], grads["naive"] * 2, strict=True):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


@pytest.mark.slow  # it compiles FlexAttention (about 50 s here)
def test_flex_computes_the_same_context() -> None:
    """FlexAttention with the pattern's block mask (compiled, float32; n = 256 spans two of
    its 128-blocks) against the float64 reference, both scenarios in one test (it compiles)."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    n, l, heads, dim = 256, 16, 2, 16
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, heads, n, dim, generator=gen) for _ in range(3))
    for scenario in ("sparse", "sparse-fixed"):
        want = reference(scenario, n, l, heads, *(t.double().numpy() for t in (q, k, v)))
        fn = _attention_fn(Case("flex", scenario, n, False, heads=heads, dim=dim, radius=l))
        with torch.no_grad():
            got = fn(q, k, v)
        np.testing.assert_allclose(got.double().numpy(), want, atol=2e-5, err_msg=scenario)


def test_attnkit_variant_runs_the_factorised_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The attnkit variant goes through attend's public path and lands on the O(n·√n) kernel,
    never on the dense mask."""
    import attnkit.local.dispatch as dispatch
    import attnkit.stages.sparse as stages

    calls: list[PatternSpec] = []
    kernel = dispatch.factorised_attention

    def spy(q: Any, k: Any, v: Any, spec: PatternSpec, mask: Any = None) -> Any:
        calls.append(spec)
        return kernel(q, k, v, spec, mask)

    def no_mask(*a: Any, **kw: Any) -> Any:
        raise AssertionError("the dense pattern mask was built")

    monkeypatch.setattr(dispatch, "factorised_attention", spy)
    monkeypatch.setattr(stages, "pattern_mask", no_mask)
    case = Case("attnkit", "sparse", 4096, True, heads=2, dim=8, radius=64)
    x = [torch.randn(1, 2, 4096, 8, requires_grad=True) for _ in range(3)]
    _attention_fn(case)(*x).sum().backward()
    assert calls == [PatternSpec("strided", 64, 8, causal=True, split_heads=True)]


def test_plan_uses_round_sqrt_n_or_the_stride_flag() -> None:
    cfg = SuiteConfig(scenarios=["sparse"], local_sizes=[4096, 8192], backward=[False],
                      variants=["attnkit"])  # fmt: skip
    assert [c.radius for c in plan_cases(cfg)] == [64, 91]  # round(90.51)
    cfg.sparse_stride = 32
    assert [c.radius for c in plan_cases(cfg)] == [32, 32]
    with pytest.raises(ValueError, match="--stride"):
        SuiteConfig(sparse_stride=-1)


def test_skips_grow_dense_as_n_squared_and_attnkit_as_n_sqrt_n() -> None:
    cfg = SuiteConfig(time_limit_s=10.0)
    prev = {"n": 4096, "ms": 1000.0, "peak_mib": 1.0}
    # 1 s at 4096: x16 at 16384 for a dense variant (16 s > 10), x8 for attnkit (8 s)
    assert "est. 16 s" in str(skip_reason(Case("sdpa-mask", "sparse", 16384, False), prev, cfg))
    assert "est. 16 s" in str(skip_reason(Case("flex", "sparse", 16384, False), prev, cfg))
    assert skip_reason(Case("attnkit", "sparse", 16384, False), prev, cfg) is None
    assert "backward" in str(available(Case("flex", "sparse", 64, True)))
    naive = skip_reason(Case("naive", "sparse", 16384, False), None, cfg)  # 8 GiB of scores
    assert naive is not None and "GiB" in naive


def test_quick_run_includes_the_sparse_scenario(tmp_path: Path) -> None:
    assert main(["bench", "--quick", "--sizes", "256", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    rows = [r for r in report["rows"] if r["scenario"] == "sparse"]
    measured = {(r["variant"], r["mode"]) for r in rows if "ms" in r}
    assert measured == {(v, m) for v in ("attnkit", "sdpa-mask", "naive")
                        for m in ("fwd", "fwd+bwd")}  # fmt: skip
    assert all(r["radius"] == 16 for r in rows)
    assert any(t["target"].startswith("sparse n=16384") for t in report["targets"])


def row(variant: str, n: int, ms: float, pct: float, **kw: Any) -> dict[str, Any]:
    return {"variant": variant, "scenario": "sparse", "n": n, "mode": kw.pop("mode", "fwd"),
            "ms": ms, "pct_matmul": pct, "peak_mib": kw.pop("peak_mib", None)}  # fmt: skip


def test_targets_from_hand_made_rows() -> None:
    peaks = {4096: 10.0, 8192: 10.0 * 2**1.5, 16384: 80.0, 32768: 80.0 * 2**1.5, 65536: 640.0}
    rows = [row("attnkit", n, 1.0, 1.0, peak_mib=p) for n, p in peaks.items() if n != 16384]
    rows += [
        row("attnkit", 16384, 100.0, 20.0, peak_mib=80.0),
        row("flex", 16384, 400.0, 5.0),
        row("attnkit", 16384, 400.0, 30.0, mode="fwd+bwd", peak_mib=80.0),
        row("sdpa-mask", 16384, 1800.0, 4.0, mode="fwd+bwd"),
    ]
    got = targets(rows)[-8:]
    assert got[0]["target"].startswith("sparse n=16384 fwd: attnkit <= Flex")
    values = [(t["measured"], t["met"]) for t in got]
    assert values[0] == (pytest.approx(100 / 400), True)  # attnkit / flex time
    assert values[1] == (pytest.approx(5 / 20), True)  # %mm(flex) / %mm(attnkit)
    assert values[2] == (pytest.approx(1800 / 400), False)  # 4.5x < 5
    assert values[3] == (pytest.approx(30 / 4), True)  # load-corrected 7.5x (the load moved)
    assert values[4] == (pytest.approx(1.5), True)  # fwd peaks: n^1.5 exactly
    assert values[5] == (None, None)  # fwd+bwd: only n = 16384 measured
    assert values[6] == (pytest.approx(2 * 20 * 100 / 300), False)  # 13.3% < 35
    # in matmul units: fwd+bwd 3F / 30, fwd F / 20, so the backward's 2F at 2 / (3/30 - 1/20)
    assert values[7] == (pytest.approx(2 / (3 / 30 - 1 / 20)), True)  # 40% >= 35
    assert not any(t["target"].startswith("sparse") for t in targets(rows[:0]))


@pytest.mark.parametrize(("exponent", "met"), [(1.0, True), (1.5, True), (1.7, True),
                                               (1.8, False), (2.0, False)])  # fmt: skip
def test_the_memory_target_is_n_root_n_at_most(exponent: float, met: bool) -> None:
    """Peak memory growing as n (the kernel holds no scores) or n·√n meets the target; closer
    to the dense n² does not."""
    rows = [row("attnkit", n, 1.0, 1.0, peak_mib=(n / 4096) ** exponent) for n in SLOPE]
    (memory,) = [t for t in targets(rows) if t["target"].startswith("sparse fwd: attnkit peak")]
    assert memory["measured"] == pytest.approx(exponent)
    assert memory["met"] is met


SLOPE = (4096, 8192, 16384, 32768, 65536)


def test_memory_slope_needs_both_ends() -> None:
    two = [
        row("attnkit", 4096, 1.0, 1.0, peak_mib=10.0),
        row("attnkit", 65536, 1, 1, peak_mib=2560.0),
    ]
    assert sparse.memory_slope(two) == pytest.approx(2.0)
    assert sparse.memory_slope(two[:1]) is None
    assert sparse.memory_slope([two[0], {**two[1], "peak_mib": None}]) is None


@pytest.mark.parametrize("banded", [True, False], ids=["banded-kernel", "no-banded-kernel"])
@pytest.mark.parametrize("variant", ["attnkit", "sdpa-mask"])
@pytest.mark.parametrize("scenario", ["sparse", "sparse-fixed"])
@pytest.mark.parametrize("n", [1024, 1030])  # l = 32: n a multiple of l, and not
def test_sdpa_stays_on_its_fused_kernel(variant: str, scenario: str, n: int, banded: bool,
                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """SDPA's CPU flash kernel takes 4-D inputs and a 2-D or 4-D mask only; any other shape
    falls back to the math path, which builds every score (n² memory, several times slower).
    Neither attnkit's kernel (its class and block parts) nor the masked anchor may fall back,
    forward or backward. With the banded flash kernel built, attnkit's strided split runs both
    halves on it (the window and the classes), n a multiple of l or not, and SDPA not at all;
    without it, on SDPA."""
    from torch.profiler import profile

    import attnkit.local.native as native

    if not banded:
        monkeypatch.setattr(native, "USE", False)
    elif native.kernel() is None:  # pragma: no cover - a machine without a C++ compiler
        pytest.skip("the native kernel could not be built here")
    fn = _attention_fn(Case(variant, scenario, n, True, heads=4, dim=16, radius=32))
    x = [torch.randn(1, 4, n, 16, requires_grad=True) for _ in range(3)]
    with profile() as prof:
        fn(*x).sum().backward()
    ops = {e.key for e in prof.key_averages()}
    if banded and (variant, scenario) == ("attnkit", "sparse"):
        # attnkit.local.strided_heads, in place (n padded to a multiple of l when it is not)
        assert "_StridedHeadsBackward" in ops, ops
        assert not [op for op in ops if "scaled_dot_product" in op], ops
    else:
        assert "aten::_scaled_dot_product_flash_attention_for_cpu_backward" in ops
    assert "aten::_scaled_dot_product_attention_math" not in ops


@pytest.mark.parametrize("heap_keeps_freed_memory", [False, True])
def test_a_steps_peak_counts_what_it_takes_from_the_kernels_cache(
    heap_keeps_freed_memory: bool,
) -> None:
    """The bench empties the kernel's block cache before it measures a step's peak memory: a
    step that takes a 64 MiB block counts it even when an earlier step left one cached (else
    the block is resident already and the step would show no growth); and it gives the heap's
    free memory back first, so that the same holds where the command line keeps freed memory
    in the heap (``_alloc.keep_freed_memory``, process-wide, as every ``attnkit`` command)."""
    from pathlib import Path

    from attnkit import _alloc
    from attnkit.bench.measure import peak_extra_mib
    from attnkit.local import native

    if heap_keeps_freed_memory and not _alloc.keep_freed_memory():
        pytest.skip("needs glibc's mallopt")

    if native.kernel() is None or not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs the native kernel and Linux's /proc/self/clear_refs")
    module = native.kernel()
    like = torch.empty(0)

    def step() -> None:
        x = module.cached_empty([16 * 2**20], like)  # 64 MiB
        x.fill_(1.0)

    step()  # a block of 64 MiB, touched, now cached
    assert module.cache_held() >= 64 * 2**20
    peak = peak_extra_mib(step)
    native.release_cache()
    if peak is None:
        pytest.skip("this kernel does not report VmHWM")
    assert peak >= 48, peak
