"""The Sparse Transformer's patterns (split across heads, and merged), no weights: the
factorised kernel (``attnkit.local.factorised.factorised_attention``, what
``attend(..., align=<name>, need_weights=False)`` calls) against
SDPA with the dense (n, n) pattern mask (attend's dense path: the alignment's mask, then
``sdpa_context``). Forward pass, no autograd; B = 1, H = 8, d = 64, stride l = √n (rounded),
c = 1 summary column (fixed). Prints the time of one call (the median of 3 after a warm-up)
and the peak memory: on a GPU ``torch.cuda.max_memory_allocated`` above the inputs, on the
CPU the growth of the peak resident memory after a small warm-up call (one call; one thread;
run one measurement per process).

    python scripts/sparse_factorised.py cuda 4096 16384            # every name, both paths
    python scripts/sparse_factorised.py cpu 4096 strided-causal-heads fast
"""

from __future__ import annotations

import math
import resource
import statistics
import sys
import time

import torch

from attnkit.core import attend, sdpa_context
from attnkit.local.factorised import factorised_attention
from attnkit.registry import build_alignment
from attnkit.stages.sparse import FactorisedAlignment

NAMES = ("strided-heads", "strided-causal-heads", "fixed-heads", "fixed-causal-heads",
         "strided", "strided-causal", "fixed", "fixed-causal")  # fmt: skip


def run(device: str, n: int, name: str, kind: str) -> str:
    torch.manual_seed(0)
    h, d = 8, 64
    stride = round(math.sqrt(n))
    q, k, v = (torch.randn(1, h, n, d, device=device) for _ in range(3))  # (B, H, n, d)
    align = build_alignment(name, d, stride=stride)
    assert isinstance(align, FactorisedAlignment)

    def call() -> torch.Tensor:
        if kind == "fast":
            return factorised_attention(q, k, v, align.spec)
        return sdpa_context(q, k, v, align(q, k).mask)  # the (.., H, n, n) pattern mask

    cuda = device == "cuda"
    with torch.no_grad():
        if cuda:
            call()  # warm-up
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        else:  # load the native sliding kernel on a small call: ru_maxrss only grows
            small = q[..., :64, :]
            attend(small, small, small, align=build_alignment(name, d, stride=8),
                   need_weights=False)  # fmt: skip
            base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        times = []
        for _ in range(3 if cuda else 1):
            start = time.perf_counter()
            call()
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    if cuda:
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024  # KiB->MiB
    ms = statistics.median(times) * 1000
    return f"{device} {name} {kind} n={n} l={stride}: {ms:.2f} ms, peak +{peak:.0f} MiB"


def main() -> None:
    device, args = sys.argv[1], sys.argv[2:]
    if device not in ("cpu", "cuda") or not args:
        raise SystemExit("usage: sparse_factorised.py cuda N [N ..] | cpu N NAME fast|dense")
    if device == "cpu":
        torch.set_num_threads(1)
        print(run("cpu", int(args[0]), args[1], args[2]), flush=True)
        return
    for n in map(int, args):
        for name in NAMES:
            for kind in ("fast", "dense"):
                print(run("cuda", n, name, kind), flush=True)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
