"""How one case is measured: in a fresh Python process, so that its peak memory is its own.

* time: ``warmup`` untimed steps (FlexAttention compiles in its first), then the median of
  ``repeats`` timed steps (``time.perf_counter``);
* the matmul rate: a 2048 x 2048 float32 matmul timed just before each timed step, in the
  same process, so that the case's % of it is taken under the same load (the median of the
  per-pair ratios);
* peak memory: torch's CPU tensors live outside Python's heap (tracemalloc does not see them),
  so this reads the kernel's resident-set high-water mark: after the warm-up the process's
  peak is reset (``/proc/self/clear_refs`` = 5), one more step runs, and the result is
  VmHWM - VmRSS (from ``/proc/self/status``) — the memory the step needed beyond its inputs
  and the interpreter, whatever allocated it. The process runs with glibc's mmap threshold
  fixed at 64 KiB, so freed tensors leave the RSS at once (else a warm step reuses retained
  heap and shows no growth), and attnkit's kernel cache is emptied first
  (``native.release_cache``) for the same reason. Linux only; elsewhere it is reported as None.
* on CUDA (``--device cuda``): every step and matmul ends with ``torch.cuda.synchronize()``,
  the matmul is the same float32 product on the GPU (TF32 off, PyTorch's default), and the
  peak memory is the allocator's: ``torch.cuda.max_memory_allocated()`` over the step minus
  what was allocated before it.

Run as ``python -m attnkit.bench.measure '<case as JSON>' WARMUP REPEATS``; prints one JSON line.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .variants import Case, Step, make_step, synchronised

MATMUL_SIZE = 2048


def median_seconds(step: Step, repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def _matmul_step(size: int = MATMUL_SIZE, device: str = "cpu") -> tuple[Step, float]:
    """One size x size float32 matmul (2048 unless a smoke run asks less) and its FLOPs."""
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=gen).to(device) for _ in range(2))

    def product() -> None:
        torch.mm(a, b)

    return synchronised(product, device), 2.0 * size**3


def matmul_gflops(repeats: int = 3, size: int = MATMUL_SIZE, device: str = "cpu") -> float:
    """The device's float32 matmul rate now (GFLOP/s), median of ``repeats`` products."""
    product, flops = _matmul_step(size, device)
    product()  # warm-up
    seconds, _ = median_seconds(product, repeats)
    return flops / seconds / 1e9


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_extra_mib(step: Step, device: str = "cpu") -> float | None:
    """Memory one step needs beyond what is already held (MiB), or None: resident memory on
    the CPU, the CUDA allocator's on the GPU."""
    gc.collect()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
        step()
        return max(torch.cuda.max_memory_allocated() - held, 0) / 2**20
    from .._alloc import give_back_freed_memory
    from ..local.native import release_cache

    release_cache()  # what the step takes from the kernel's block cache counts as its own
    give_back_freed_memory()  # and what it takes from the heap's free memory (the CLI keeps it)
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    except OSError:
        return None
    base = _status_kib("VmRSS")
    step()
    peak = _status_kib("VmHWM")
    if base is None or peak is None:
        return None
    return max(peak - base, 0) / 1024


def measure(
    case: Case, warmup: int, repeats: int, matmul_size: int = MATMUL_SIZE
) -> dict[str, Any]:
    """Time and peak memory of one case. Each timed step is paired with a matmul timed just
    before it, so that its % of the matmul rate is taken under the same load (the machine is
    shared); the reported % is the median of the per-pair ratios."""
    torch.manual_seed(0)
    product, mm_flops = _matmul_step(matmul_size, case.device)
    step = make_step(case)
    product()
    for _ in range(max(warmup, 1)):
        step()
    peak = peak_extra_mib(step, case.device)
    step_s, mm_s = [], []
    for _ in range(repeats):
        mm_s.append(median_seconds(product, 1)[0])
        step_s.append(median_seconds(step, 1)[0])
    seconds, mm_seconds = statistics.median(step_s), statistics.median(mm_s)
    pct = [100 * (case.flops / s) / (mm_flops / m) for s, m in zip(step_s, mm_s, strict=True)]
    return {
        "ms": seconds * 1e3,
        "times_ms": [t * 1e3 for t in step_s],
        "gflops": case.flops / seconds / 1e9,
        "matmul_gflops": mm_flops / mm_seconds / 1e9,
        "pct_matmul": statistics.median(pct),
        "peak_mib": peak,
    }


def measure_in_subprocess(
    case: Case, warmup: int, repeats: int, timeout: float, threads: int | None = None
) -> dict[str, Any]:
    """Run ``measure`` in a fresh interpreter; {"error": ...} if it fails or times out."""
    src = str(Path(__file__).resolve().parents[2])  # the directory holding attnkit/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    # glibc keeps freed blocks resident and raises its mmap threshold as blocks are freed, so
    # a step after the warm-up would reuse memory without growing the RSS: a fixed threshold
    # makes every large tensor its own mapping, returned when freed, and the RSS honest.
    env.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")
    env.setdefault("MALLOC_TRIM_THRESHOLD_", "65536")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, "-m", "attnkit.bench.measure", json.dumps(asdict(case))]
    try:
        done = subprocess.run(
            [*cmd, str(warmup), str(repeats)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:200]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main(argv: list[str]) -> int:
    case = Case(**json.loads(argv[0]))
    print(json.dumps(measure(case, int(argv[1]), int(argv[2]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


class SavedBytes(torch.autograd.graph.saved_tensors_hooks):
    """Bytes of the distinct storages autograd saves for backward inside the block, leaving out
    those of ``skip`` (parameters or inputs: they exist without a forward pass): the
    activation memory of what runs in the block."""

    def __init__(self, skip: Iterable[Tensor]) -> None:
        self.seen: dict[int, int] = {}
        known = {t.untyped_storage().data_ptr() for t in skip}

        def pack(t: Tensor) -> Tensor:
            s = t.untyped_storage()
            if s.data_ptr() not in known:
                self.seen[s.data_ptr()] = s.nbytes()
            return t

        super().__init__(pack, lambda t: t)

    @property
    def total(self) -> int:
        return sum(self.seen.values())


def graph_depth(root: Tensor) -> tuple[int, int]:
    """(longest path, number of nodes) of the autograd graph under ``root``: nodes on the
    path from ``root.grad_fn`` to the deepest leaf (AccumulateGrad) inclusive, walking
    ``grad_fn.next_functions`` with memoisation (each node once: linear in the graph, not
    in its paths); iterative, as an RNN's graph is thousands of nodes deep."""
    if root.grad_fn is None:
        return 0, 0
    depth: dict[Any, int] = {}
    stack: list[tuple[Any, bool]] = [(root.grad_fn, False)]
    while stack:
        node, expanded = stack.pop()
        if node in depth:
            continue
        kids = [k for k, _ in node.next_functions if k is not None]
        if expanded:
            depth[node] = 1 + max((depth[k] for k in kids), default=0)
        else:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if k not in depth)
    return depth[root.grad_fn], len(depth)
