"""Where the strided heads' forward and backward spend their time in the bench's case
(``attnkit bench --scenarios sparse``: B = 1, H = 8, d = 64, float32, n = 16,384, l = 128,
through ``attend``): each call of the native kernel timed through a proxy of the module, and
the whole forward and backward (autograd's, the gradients' allocation included), medians of
the rounds after a warm-up.

    PYTHONPATH=src OMP_NUM_THREADS=2 python scripts/sparse_parts.py --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

import attnkit.bench.sparse as sparse
import attnkit.local.native as native
from attnkit.bench.variants import Case


class _Timed:
    """The native module, each kernel call timed into ``calls`` by name and half (the band's
    operands are n rows long, the classes' n / l); ``cached_empty`` untimed, and with
    ``plain`` a fresh ``new_empty`` instead (the outputs on new pages, as before the cache)."""

    def __init__(self, module: Any, n: int, calls: dict[str, list[float]], plain: bool) -> None:
        self.module, self.n, self.calls, self.plain = module, n, calls, plain

    def __getattr__(self, name: str) -> Any:
        f = getattr(self.module, name)
        if not callable(f):
            return f
        if name == "cached_empty" and self.plain:
            return lambda sizes, like: like.new_empty(sizes)
        if name == "cached_empty":
            return f

        def timed(*args: Any) -> Any:
            t = time.perf_counter()
            out = f(*args)
            dt = time.perf_counter() - t
            half = "band" if args[0].shape[-2] == self.n else "classes"
            self.calls.setdefault(f"{name}, {half}", []).append(dt)
            return out

        return timed


def bench_inputs(n: int) -> tuple[Case, Tensor, Tensor, Tensor, Tensor]:
    """The bench's case at n (B = 1, H = 8, d = 64, float32, causal, l = round(√n)), seeded:
    the case, q, k, v (leaves that need gradients) and an incoming gradient (1, 8, n, 64)."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 8, n, 64, generator=gen).requires_grad_() for _ in "qkv")
    g = torch.randn(1, 8, n, 64, generator=gen)
    return Case("attnkit", "sparse", n, True, radius=sparse.default_stride(n)), q, k, v, g


Step = Callable[[Tensor, Tensor, Tensor], Tensor]


Times = tuple[list[float], list[float]]


def steps(fn: Step, q: Tensor, k: Tensor, v: Tensor, g: Tensor, rounds: int, warmup: int,
          warmed: Callable[[], object] = lambda: None) -> Times:  # fmt: skip
    """(forward, backward) seconds of ``rounds`` steps after ``warmup`` untimed ones (the
    gradients cleared before each); ``warmed()`` runs when the warm-up ends."""
    forward, backward = [], []
    for r in range(warmup + rounds):
        if r == warmup:
            warmed()
        for x in (q, k, v):
            x.grad = None
        t = time.perf_counter()
        out = fn(q, k, v)
        t1 = time.perf_counter()
        out.backward(g)
        t2 = time.perf_counter()
        if r >= warmup:
            forward.append(t1 - t)
            backward.append(t2 - t1)
    return forward, backward


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-cache", action="store_true",
                   help="fresh memory for the context, P and the gradients, not the kernel's "
                        "cache")  # fmt: skip
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    case, q, k, v, g = bench_inputs(a.n)
    fn = sparse.attention_fn(case)
    calls: dict[str, list[float]] = {}
    timed = _Timed(native._loaded(), a.n, calls, a.no_cache)
    loaded: Callable[[], Any] = native._loaded
    native._loaded = lambda: timed
    try:
        forward, backward = steps(fn, q, k, v, g, a.rounds, 1, calls.clear)  # not the warm-up's
    finally:
        native._loaded = loaded
    with open("/proc/loadavg") as file:
        load = " ".join(file.read().split()[:3])
    fwd, bwd = (statistics.median(x) * 1e3 for x in (forward, backward))
    print(f"n={a.n} threads={a.threads}; load {load}; medians of {a.rounds}: forward {fwd:.1f} ms, "
          f"backward {bwd:.1f} ms")  # fmt: skip
    for name, ts in calls.items():
        print(f"  {name:28s} {statistics.median(ts) * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
