"""The Sparse Transformer's heads-split kernel (issue 30 §2) on the bench's case (``attnkit
bench --scenarios sparse``: B = 1, H = 8, d = 64, float32, l = round(√n), the public
``attend`` path), forward and forward+backward interleaved, each step preceded by a 2048²
float32 matmul, so each sample carries the load it ran under; the % are of that matmul rate,
with the FLOPs of the allowed pairs only (``attnkit.bench.sparse.pairs``), as the bench.

Two checkouts cannot share one process (their banded kernels register the same
``attnkit::band_attention`` op): for an A/B, alternate processes, e.g.

    for i in 1 2 3; do for src in ../main/src src; do
      PYTHONPATH=$src python scripts/sparse_ab.py --label $src --rounds 5; done; done
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from types import ModuleType

import torch
from sliding_ab import _report  # the same medians and % lines

from attnkit.bench.measure import _matmul_step


def _step(module: ModuleType, case: object, backward: bool) -> Callable[[], None]:
    gen = torch.Generator().manual_seed(0)
    shape = (1, 8, case.n, 64)  # type: ignore[attr-defined]
    q, k, v = (torch.randn(shape, generator=gen).requires_grad_(backward) for _ in "qkv")
    g = torch.randn(shape, generator=gen)
    fn = module.attention_fn(case)  # type: ignore[attr-defined]

    def step() -> None:
        if not backward:
            with torch.no_grad():
                fn(q, k, v)
            return
        for x in (q, k, v):
            x.grad = None
        fn(q, k, v).backward(g)

    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--label", default="after", help="the name of this checkout in the report")
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--scenario", default="sparse", help="sparse | sparse-fixed")
    p.add_argument("--stride", type=int, default=None, help="l (default round(√n))")
    p.add_argument("--modes", default="fwd,fwd+bwd")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    import attnkit.bench.sparse as sparse
    from attnkit.bench.variants import Case

    l = a.stride or sparse.default_stride(a.n)
    steps = []
    for m in a.modes.split(","):
        case = Case("attnkit", a.scenario, a.n, m == "fwd+bwd", radius=l)
        steps.append(("after", m, _step(sparse, case, m == "fwd+bwd")))
    fwd_flops = 4 * 64 * sparse.pairs(case)
    product, mm_flops = _matmul_step(2048)
    for _, _, s in steps:
        s()  # warm-up (the native kernel builds here on a fresh machine)
    times: dict[tuple[str, str], list[float]] = {(v, m): [] for v, m, _ in steps}
    rates: dict[tuple[str, str], list[float]] = {(v, m): [] for v, m, _ in steps}
    for _ in range(a.rounds):
        for v, m, s in steps:
            t = time.perf_counter()
            product()
            rates[(v, m)].append(mm_flops / (time.perf_counter() - t))
            t = time.perf_counter()
            s()
            times[(v, m)].append(time.perf_counter() - t)
    every = [x for rs in rates.values() for x in rs]
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    mid, top = statistics.median(every) / 1e9, max(every) / 1e9
    print(f"{a.label}: n={a.n} {a.scenario} l={l} threads={a.threads}; load {' '.join(load)}; "
          f"matmul {mid:.0f}, best {top:.0f} GFLOP/s")  # fmt: skip
    _report(times, rates, lambda x: True, statistics.median(every), fwd_flops, "all samples")
    _report(times, rates, lambda x: x >= 0.8 * max(every), max(every), fwd_flops,
            "quiet samples")  # fmt: skip
    for (v, m), ts in times.items():
        print(f"  runs {m} {v}: {[round(t * 1e3) for t in ts]}")


if __name__ == "__main__":
    main()
