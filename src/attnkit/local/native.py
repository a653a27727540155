"""The banded flash kernel in C++ (``csrc/band_flash.cpp``): sliding-window attention that
computes, per block of queries, only the contiguous key range the block reaches, as two GEMMs
forward and five backward, with a vectorised masked softmax between them.

    c_t = Σ_{j ∈ band(t)} p_tj v_j,   p_tj = exp(s_tj - ℓ_t),   s_tj = q_t·k_j / √d

Forward keeps ℓ_t (the row's log-sum-exp); backward recomputes p from it (FlashAttention,
Dao et al. 2022, Alg. 2 and 4) and adds each block's dK, dV into the key range in place.
It reads its operands in place with any strides but a unit one along the last dim (every
other head of (B, H, T, D); ``rows``), and its ``forward_into`` and ``backward_into`` take 4-D
(G1, G2, T, ·) views and write into the caller's outputs: ``attnkit.local.strided_heads`` runs
the Sparse Transformer's strided heads split that way, without a copy. Its ``forward_saving``
also keeps P, block by block (O(n·(block + 2r)) memory), and ``backward_saved`` reads it:
four GEMMs a block instead of five, no exponentials (the strided heads' training path).
The strided heads' outputs (context, P, gradients) come from a block cache the kernel takes
back when PyTorch frees them (``cached_empty``; ``release_cache``, ``cache_limit``), so a
training step reuses the last step's memory instead of faulting in fresh pages. Inside its
parallel regions each worker's GEMMs run on that worker's thread alone (MKL's thread-local
limit), also after ``torch.set_num_threads``, which would otherwise nest MKL's threads.
Built on first use with ``torch.utils.cpp_extension`` (about 30 s, once per machine: the
build is cached in ``TORCH_EXTENSIONS_DIR``, by default ``~/.cache/torch_extensions``), in a
private folder published by an atomic rename, under a lock that nobody holds for longer than
a lease without refreshing it, and checked against its recorded size and SHA-256 before each
load, so a damaged cache file is rebuilt rather than loaded (``_build``). It needs a C++
compiler (g++ or clang++) and ninja (a dependency); without a compiler, a writable cache, or
with ``ATTNKIT_NATIVE=0`` (or false, no, off), ``kernel()`` is None and
``sliding_window_attention`` runs its SDPA tiles (same results), after one warning saying why.
Ctrl-C during the build interrupts the program, as anywhere else. The ops are registered as
``torch.library`` custom ops (``attnkit::band_attention`` and its backward, with their FLOP
formulas for ``FlopCounterMode``), so ``torch.compile(fullgraph=True)`` keeps them in the
graph.

Why a kernel of our own: PyTorch's fused CPU flash kernels on band tiles stay near 30% of the
matmul rate in the backward pass and 40% forward (docs/perf/log-performance.md); this one reaches
53–55% forward and 42–52% backward at n = 16,384, r = 256, 2 threads (``attnkit bench`` and
``python -m attnkit.bench.interleave``; docs/perf/log-performance.md, "The banded flash kernel").

Legend: G flattened leading dims (B·H), Tq queries, Tk keys, D query/key width, Dv value
width, ℓ log-sum-exp.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

from .. import _env

SOURCE = Path(__file__).with_name("csrc") / "band_flash.cpp"
"""The kernel's C++ source, shipped in the package and compiled on first use; it includes the
headers beside it (``csrc/*.h``: the block cache), which the build's name hashes too."""
# query block of both passes, the fastest of a sweep over 32..192 in both
# (docs/perf/log-performance.md, "The banded flash kernel in C++"); the key range is b + 2r keys
BLOCK = 64
"""Query block of both passes (``block=`` of ``sliding_window_attention`` overrides it)."""
# flags per CPU capability that PyTorch reports: the same build runs on every CPU that has it
# (not -march=native, which a build cache shared across machines could not trust)
_ISA = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma", "-mavx2"],
    "AVX2": ["-mavx2", "-mfma"],
}


def _use_from_env() -> bool:
    """ATTNKIT_NATIVE as read at import; a value it cannot read leaves the kernel on here,
    and ``kernel()`` raises its ValueError before anything is built."""
    try:
        return _env.native()
    except ValueError:
        return True


USE = _use_from_env()
"""False with ``ATTNKIT_NATIVE=0`` (or false, no, off): ``kernel()`` is then None and nothing
is compiled."""
_state: dict[str, Any] = {}


def kernel() -> Any | None:
    """The compiled extension (built on the first call), or None: disabled
    (``ATTNKIT_NATIVE=0`` or ``native.USE = False``), a build that failed (warned once), or
    inside ``torch.compile`` before any eager call built it (tracing never compiles C++)."""
    if not USE:
        return None
    if "module" in _state or torch.compiler.is_compiling():
        return _state.get("module")
    _env.native()  # an unreadable ATTNKIT_NATIVE: a ValueError naming it, at every call
    _state["module"] = None  # a failed build is not retried in this process
    _state["module"] = _build()
    return _state["module"]


def _build() -> Any | None:
    from . import _build as build

    _ninja_on_path()
    isa = torch.backends.cpu.get_cpu_capability()
    flags = ["-O3", "-fopenmp", *_ISA.get(isa, [])]  # -fopenmp: at::parallel_for's OpenMP path
    try:
        return build.load_or_build(_build_name(), [SOURCE], flags)
    except build.BuildError as err:
        warnings.warn(
            f"attnkit: the banded flash kernel could not be built: {err}. The sliding window "
            "runs on SDPA tiles instead (same results, slower); ATTNKIT_NATIVE=0 skips the "
            "build and this warning.",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _build_name() -> str:
    """One build per CPU capability, torch version and kernel source: a cache shared by
    machines, by environments with another torch, or by checkouts with another version of the
    source, never hands this process a build it cannot load or one of other code."""
    isa = torch.backends.cpu.get_cpu_capability().lower()
    version = "".join(c if c.isalnum() else "_" for c in torch.__version__)
    digest = hashlib.sha256(SOURCE.read_bytes())
    for header in sorted(SOURCE.parent.glob("*.h")):  # included by the source
        digest.update(header.name.encode() + header.read_bytes())
    source = digest.hexdigest()[:10]
    return f"attnkit_band_flash_{isa}_torch{version}_{source}"


def _ninja_on_path() -> None:
    """torch's builder runs ``ninja`` from PATH: add the ``ninja`` package's (a dependency)
    when none is there, e.g. a venv's console script run without activating the venv."""
    if shutil.which("ninja") is not None:
        return
    try:
        import ninja  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return
    os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")


def band_attention(
    q: Tensor, k: Tensor, v: Tensor, radius: int, causal: bool, keep: Tensor | None, block: int
) -> tuple[Tensor, Tensor]:
    """q (G, Tq, D), k (G, Tk, D), v (G, Tk, Dv) float32/float64 read in place (``rows``);
    keep (1|G, Tk)
    bool or None -> context (G, Tq, Dv), ℓ (G, Tq) (+inf on a row with no allowed key, whose
    context is 0). Query t may attend key j when |t - j| <= radius (0 <= t - j <= radius
    causal) and keep[j]. Differentiable in q, k, v (the op ``attnkit::band_attention`` and
    its backward); ``sliding_window_attention`` is the checked entry point."""
    return _forward_op(q, k, v, radius, causal, keep, block)


@torch.library.custom_op("attnkit::band_attention", mutates_args=())
def _forward_op(
    q: Tensor, k: Tensor, v: Tensor, radius: int, causal: bool, keep: Tensor | None, block: int
) -> tuple[Tensor, Tensor]:
    module = _loaded()
    out, lse = module.forward(q, k, v, radius, causal, keep, block)
    return out, lse


@_forward_op.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, radius: int, causal: bool, keep: Tensor | None,
      block: int) -> tuple[Tensor, Tensor]:  # fmt: skip
    return q.new_empty(q.shape[0], q.shape[1], v.shape[2]), q.new_empty(q.shape[:2])


@torch.library.custom_op("attnkit::band_attention_backward", mutates_args=())
def _backward_op(
    grad: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, radius: int,
    causal: bool, keep: Tensor | None, block: int,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """(dQ, dK, dV) of ``band_attention`` for the incoming gradient grad (G, Tq, Dv)."""
    module = _loaded()
    dq, dk, dv = module.backward(grad, q, k, v, out, lse, radius, causal, keep, block)
    return dq, dk, dv


@_backward_op.register_fake
def _(grad: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, radius: int,
      causal: bool, keep: Tensor | None, block: int) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, Tensor]) -> None:
    q, k, v, radius, causal, keep, block = inputs
    ctx.save_for_backward(q, k, v, output[0], output[1])
    ctx.band = (radius, causal, keep, block)


def _backward(ctx: Any, grad: Tensor, _grad_lse: Tensor | None) -> tuple[Tensor | None, ...]:
    q, k, v, out, lse = ctx.saved_tensors
    radius, causal, keep, block = ctx.band
    dq, dk, dv = _backward_op(rows(grad), q, k, v, out, lse, radius, causal, keep, block)
    return dq, dk, dv, None, None, None, None


_forward_op.register_autograd(_backward, setup_context=_setup)


def rows(x: Tensor) -> Tensor:
    """x (G, T, E) itself when the kernel reads it in place (unit stride along E, rows at least
    E apart, any stride along G: every other head of a (B, H, T, E) tensor), else a
    contiguous copy."""
    g, t, e = x.shape
    if (e <= 1 or x.stride(2) == 1) and (t <= 1 or x.stride(1) >= e):
        return x
    return x.contiguous()


def band_pairs(tq: int, tk: int, radius: int, causal: bool, block: int) -> int:
    """The (query, key) pairs the kernel computes: per block of ``block`` queries, every key
    of the contiguous range [t0 - r, t_last + r] (causal: t_last) that exists."""
    total = 0
    for t0 in range(0, tq, block):
        last = min(tq, t0 + block) - 1
        hi = min(tk, (last if causal else last + radius) + 1)
        total += (last - t0 + 1) * max(0, hi - max(0, t0 - radius))
    return total


@register_flop_formula(torch.ops.attnkit.band_attention)
def forward_flops(q: Any, k: Any, v: Any, radius: int, causal: bool, keep: Any, block: int,
                  *args: Any, **kwargs: Any) -> int:  # fmt: skip
    """FLOPs of ``band_attention`` on these shapes (``FlopCounterMode`` counts it): the two
    products per block, QKᵀ (2·pairs·D) and PV (2·pairs·Dv)."""
    pairs = band_pairs(q[1], k[1], radius, causal, block)
    return 2 * q[0] * pairs * (q[2] + v[2])


@register_flop_formula(torch.ops.attnkit.band_attention_backward)
def backward_flops(
    grad: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, radius: int, causal: bool,
    keep: Any, block: int, *args: Any, **kwargs: Any,
) -> int:  # fmt: skip
    """FLOPs of ``band_attention_backward``: QKᵀ again, dP = dO Vᵀ, dQ, dK and dV."""
    pairs = band_pairs(q[1], k[1], radius, causal, block)
    return 2 * q[0] * pairs * (3 * q[2] + 2 * v[2])


def release_cache() -> int:
    """Give the kernel's cached blocks back to the system -> the bytes given back (0 when the
    kernel is not built in this process; this never builds it).

    The strided heads' context, P and gradients (``strided_heads``) live on blocks the kernel
    takes back when PyTorch frees them, and the next step of the same size reuses, already
    faulted in (``cached_empty`` in ``csrc/band_flash.cpp``): a training loop no longer pays
    for fresh pages every step. At most ``cache_limit`` bytes (1 GiB unless set) stay cached
    between steps; this frees them now (``attnkit bench`` does, before it measures a step's
    peak memory, so that the peak counts what the step takes from the cache)."""
    module = _state.get("module")
    return int(module.cache_release()) if module is not None else 0


def cache_limit(nbytes: int) -> int:
    """Keep at most ``nbytes`` of freed blocks cached (0: none, every block freed at once)
    -> the previous limit. Builds the kernel if it is not built yet (see ``kernel``)."""
    if nbytes < 0:
        raise ValueError(f"cache_limit: nbytes must be >= 0; got {nbytes}")
    return int(_loaded().cache_limit(nbytes))


def _loaded() -> Any:
    module = kernel()
    if module is None:
        raise RuntimeError(
            "attnkit's banded flash kernel is not available (ATTNKIT_NATIVE=0, or its build "
            "failed: see the warning); call sliding_window_attention(..., kernel='tiles')"
        )
    return module


__all__ = [
    "BLOCK",
    "SOURCE",
    "USE",
    "backward_flops",
    "band_attention",
    "band_pairs",
    "cache_limit",
    "forward_flops",
    "kernel",
    "release_cache",
    "rows",
]
