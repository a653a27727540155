"""The strided heads' forward+backward at n = 16,384 (the bench's case: B = 1, H = 8, d = 64,
float32, l = 128, causal) with each choice of ``strided_heads.KEEP_WEIGHTS`` (which halves'
P the forward keeps), interleaved in one process round by round, each step preceded by a
2048² matmul: medians of the steps after the first of each choice, and the backward's share
as the bench's target computes it (2 × forward FLOPs in fwd+bwd − fwd ms).

    PYTHONPATH=src OMP_NUM_THREADS=2 python scripts/sparse_keep.py --threads 2 --rounds 9
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from sparse_parts import bench_inputs  # a sibling script

import attnkit.bench.sparse as sparse
import attnkit.local.strided_heads as strided_heads
from attnkit.bench.measure import _matmul_step

CHOICES: dict[str, tuple[bool, bool]] = {
    "none": (False, False),
    "classes": (False, True),
    "both": (True, True),
}


def backward_share(fwd_flops: float, fwd_s: float, both_s: float, rate: float) -> float:
    """The backward pass alone as a % of the matmul rate, as the bench's target computes it:
    twice the forward's FLOPs in the time forward+backward takes beyond the forward."""
    return 100 * 2 * fwd_flops / (both_s - fwd_s) / rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    case, q, k, v, g = bench_inputs(a.n)
    l = case.radius
    fn = sparse.attention_fn(case)
    flops = 4 * 64 * sparse.pairs(case)
    product, mm_flops = _matmul_step(2048)

    def fwd() -> None:
        with torch.no_grad():
            fn(q, k, v)

    def both() -> None:
        for x in (q, k, v):
            x.grad = None
        fn(q, k, v).backward(g)

    times: dict[str, list[float]] = {}
    rates: list[float] = []
    for r in range(a.rounds + 1):
        arms = [("fwd", None), *((f"fwd+bwd, P kept: {c}", w) for c, w in CHOICES.items())]
        for name, keep in arms:
            if keep is not None:
                strided_heads.KEEP_WEIGHTS = keep
            t = time.perf_counter()
            product()
            rates.append(mm_flops / (time.perf_counter() - t))
            t = time.perf_counter()
            (fwd if keep is None else both)()
            if r:  # the first round warms up
                times.setdefault(name, []).append(time.perf_counter() - t)
    with open("/proc/loadavg") as file:
        load = " ".join(file.read().split()[:3])
    rate = statistics.median(rates)
    print(
        f"n={a.n} l={l} threads={a.threads}; load {load}; medians of {a.rounds}; "
        f"matmul {rate / 1e9:.0f} GFLOP/s"
    )
    f = statistics.median(times["fwd"])
    for name, ts in times.items():
        m = statistics.median(ts)
        line = f"  {name:28s} {m * 1e3:7.1f} ms  [{min(ts) * 1e3:.1f}, {max(ts) * 1e3:.1f}]"
        if name != "fwd":
            line += f"  backward alone {backward_share(flops, f, m, rate):.1f}% of the matmul rate"
        print(line)


if __name__ == "__main__":
    main()
