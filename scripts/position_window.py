"""ALiBi with a sliding window, no weights: the gathered-window kernel in query blocks (what
``attend(..., align=SlidingWindow(r), position=ALiBi(H), need_weights=False)`` runs) against
SDPA with a dense band mask and a dense bias (what it would run without ``bias_at``). One
process per measurement, forward pass, no autograd, one thread; B = 1, H = 8, d = 64, r = 64.
Prints the time of one call and the growth of the peak resident memory during it.

    python scripts/position_window.py gather 4096
    python scripts/position_window.py dense 4096
"""

from __future__ import annotations

import resource
import sys
import time

import torch

from attnkit import SlidingWindow, attend
from attnkit.masks import window_mask
from attnkit.stages.position import ALiBi


def main() -> None:
    kind, n = sys.argv[1], int(sys.argv[2])
    if kind not in ("gather", "dense"):
        raise SystemExit("usage: position_window.py gather|dense N")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    h, d, r = 8, 64, 64
    q, k, v = (torch.randn(1, h, n, d) for _ in range(3))  # (B, H, n, d)
    stage = ALiBi(h)
    band = window_mask(torch.arange(n), n, r) if kind == "dense" else None  # (n, n)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with torch.no_grad():
        start = time.perf_counter()
        if band is not None:
            attend(q, k, v, mask=band, position=stage, need_weights=False)
        else:
            attend(q, k, v, align=SlidingWindow(r), position=stage, need_weights=False)
        took = time.perf_counter() - start
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024  # KiB -> MiB
    print(f"{kind} n={n}: {took * 1000:.0f} ms, peak RSS growth {grew:.0f} MiB")


if __name__ == "__main__":
    main()
