"""The strided heads' forward and backward at n = 16,384 (the bench's case, through ``attend``)
with torch's threads left as ``OMP_NUM_THREADS`` set them, or set again by
``torch.set_num_threads`` (which turns MKL's dynamic threads off): medians of the steps after
two warm-up steps. Before the kernel ran its GEMMs on each worker's own thread, the second
read 20-35% slower (docs/perf/log-sparse.md, run 7).

    PYTHONPATH=src OMP_NUM_THREADS=2 python scripts/sparse_threads.py           # as set
    PYTHONPATH=src OMP_NUM_THREADS=2 python scripts/sparse_threads.py --set 2   # set again
"""

from __future__ import annotations

import argparse
import statistics

import torch
from sparse_parts import bench_inputs, steps  # a sibling script

import attnkit.bench.sparse as sparse


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", type=int, default=0, help="call torch.set_num_threads(N) first")
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--rounds", type=int, default=10)
    a = p.parse_args()
    if a.set:
        torch.set_num_threads(a.set)
    case, q, k, v, g = bench_inputs(a.n)
    forward, backward = steps(sparse.attention_fn(case), q, k, v, g, a.rounds, 2)
    how = f"torch.set_num_threads({a.set})" if a.set else "OMP_NUM_THREADS only"
    print(f"n={a.n} threads={torch.get_num_threads()} ({how}); medians of {a.rounds}: "
          f"forward {statistics.median(forward) * 1e3:.1f} ms, "
          f"backward {statistics.median(backward) * 1e3:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
