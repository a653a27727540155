"""Each half of the strided heads split (``attnkit.local.strided_heads``) on the banded kernel,
timed alone: the even heads' band of radius l and the odd heads' classes (radius R = n/l along
rows l·D apart), forward (``forward_into``) and backward (``backward_into``, dK and dV zeroed
in place first), at several query blocks, and with ``--even-saved`` / ``--class-saved`` the
forward that keeps P (``forward_saving``, its P on fresh pages each call) and the backward
from it (``backward_saved``) at forward/backward block pairs, other buffers allocated once.
B = 1, H = 8, d = 64, float32, causal, l = round(√n); medians of --rounds, interleaved.

    PYTHONPATH=src OMP_NUM_THREADS=1 python scripts/sparse_halves.py --n 16384 --threads 1
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import torch

from attnkit.local import native, strided_heads


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--even-blocks", default="32,64,96")
    p.add_argument("--class-blocks", default="16,32,64")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--even-saved",
        default="",
        help="forward/backward block pairs of forward_saving and backward_saved "
        "(the forward's P kept) for the band, e.g. 64/64,64/32",
    )
    p.add_argument("--class-saved", default="", help="the same for the classes, e.g. 32/32")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    module = native.kernel()
    if module is None:
        raise SystemExit("the banded kernel is not built here")
    n, step = a.n, round(math.sqrt(a.n))
    gen = torch.Generator().manual_seed(0)
    q, k, v, grad = (torch.randn(1, 8, n, 64, generator=gen) for _ in range(4))
    out, dq, dk, dv = (torch.zeros_like(q) for _ in range(4))
    halves = [strided_heads._halves(x, step) for x in (q, k, v, out, grad, dq, dk, dv)]
    steps: dict[str, Callable[[], object]] = {}
    for half, blocks in ((0, a.even_blocks), (1, a.class_blocks)):
        qh, kh, vh, oh, gh, dqh, dkh, dvh = (x[half] for x in halves)
        radius = step if half == 0 else qh.shape[-2]
        lse = module.forward_into(qh, kh, vh, oh, radius, True, None, 64)
        for b in (int(x) for x in blocks.split(",")):
            name = ("even heads, band" if half == 0 else "odd heads, classes") + f", block {b}"

            def fwd(qh=qh, kh=kh, vh=vh, oh=oh, radius=radius, b=b) -> object:  # type: ignore[no-untyped-def]
                return module.forward_into(qh, kh, vh, oh, radius, True, None, b)

            def bwd(qh=qh, kh=kh, vh=vh, oh=oh, gh=gh, dqh=dqh, dkh=dkh, dvh=dvh, lse=lse,
                    radius=radius, b=b) -> object:  # type: ignore[no-untyped-def]  # fmt: skip
                dkh.zero_()
                dvh.zero_()
                return module.backward_into(gh, qh, kh, vh, oh, lse, dqh, dkh, dvh, radius, True,
                                            None, b)  # fmt: skip

            steps[f"{name}: forward"], steps[f"{name}: backward"] = fwd, bwd
    for half, pairs in ((0, a.even_saved), (1, a.class_saved)):
        qh, kh, vh, oh, gh, dqh, dkh, dvh = (x[half] for x in halves)
        radius = step if half == 0 else qh.shape[-2]
        for fb, bb in (tuple(int(y) for y in x.split("/")) for x in pairs.split(",") if x):
            name = ("even heads, band" if half == 0 else "odd heads, classes") + f", {fb}/{bb}"
            weights = module.forward_saving(qh, kh, vh, oh, radius, True, None, fb, bb)[1]

            def fwd_saving(qh=qh, kh=kh, vh=vh, oh=oh, radius=radius, fb=fb, bb=bb) -> object:  # type: ignore[no-untyped-def]
                return module.forward_saving(qh, kh, vh, oh, radius, True, None, fb, bb)

            def bwd_saved(qh=qh, kh=kh, vh=vh, gh=gh, dqh=dqh, dkh=dkh, dvh=dvh, w=weights,
                          radius=radius, bb=bb) -> object:  # type: ignore[no-untyped-def]  # fmt: skip
                dkh.zero_()
                dvh.zero_()
                return module.backward_saved(gh, qh, kh, vh, w, dqh, dkh, dvh, radius, True,
                                             None, bb)  # fmt: skip

            steps[f"{name}: forward saving P"] = fwd_saving
            steps[f"{name}: backward from P"] = bwd_saved
    for s in steps.values():
        s()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(a.rounds):
        for name, s in steps.items():
            t = time.perf_counter()
            s()
            times[name].append(time.perf_counter() - t)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"n={n} l={step} threads={a.threads}; load {load}; medians of {a.rounds}")
    for name, ts in times.items():
        print(f"  {name:40s} {statistics.median(ts) * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
