"""Interleaved A/B of the sliding-window kernel in one process: another checkout's attnkit
(copied to a temporary folder and imported as ``attnkit_before``) against this one, with
``local-attention`` and FlexAttention as anchors. Every step is preceded by a 2048² float32
matmul, so each sample carries the load it ran under; ``--quiet`` reports the samples whose
matmul was within 20% of the best too.

    PYTHONPATH=src python scripts/sliding_ab.py --before ../before/src --n 16384 \\
        --scenario local --modes fwd,fwd+bwd --anchors local-attention,flex --rounds 8
    PYTHONPATH=src python scripts/sliding_ab.py --before ../before/src --threads 1 --cpu-time
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from _ab import import_before  # scripts/_ab.py: the other checkout, imported beside this one

from attnkit.bench.measure import _matmul_step
from attnkit.bench.variants import Case, make_step


def _own(mod: object, n: int, r: int, causal: bool, backward: bool) -> Callable[[], None]:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 8, n, 64, generator=gen).requires_grad_(backward) for _ in "qkv")
    g = torch.randn(1, 8, n, 64, generator=gen)
    fn = mod.sliding_window_attention  # type: ignore[attr-defined]

    def step() -> None:
        if not backward:
            with torch.no_grad():
                fn(q, k, v, r, causal)
            return
        for x in (q, k, v):
            x.grad = None
        fn(q, k, v, r, causal).context.backward(g)

    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="the other checkout's src folder")
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--scenario", default="local", help="local | causal")
    p.add_argument("--radius", type=int, default=256)
    p.add_argument("--modes", default="fwd,fwd+bwd")
    p.add_argument("--anchors", default="", help="bench variants, e.g. local-attention,flex")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cpu-time", action="store_true", help="process CPU time, not wall time")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    clock = time.process_time if a.cpu_time else time.perf_counter
    causal, modes = a.scenario == "causal", a.modes.split(",")
    before = import_before(a.before, "local.sliding")
    import attnkit.local.sliding as after

    steps = []
    for m in modes:
        bw = m == "fwd+bwd"
        steps += [("before", m, _own(before, a.n, a.radius, causal, bw)),
                  ("after", m, _own(after, a.n, a.radius, causal, bw))]  # fmt: skip
        anchors = [o for o in a.anchors.split(",") if o and not (o == "flex" and bw)]
        steps += [(o, m, make_step(Case(o, a.scenario, a.n, bw, radius=a.radius))) for o in anchors]
    product, mm_flops = _matmul_step(2048)
    for _, _, s in steps:
        s()  # warm-up (FlexAttention compiles here)
    times: dict[tuple[str, str], list[float]] = {(v, m): [] for v, m, _ in steps}
    rates: dict[tuple[str, str], list[float]] = {(v, m): [] for v, m, _ in steps}
    for _ in range(a.rounds):
        for v, m, s in steps:
            t = clock()
            product()
            rates[(v, m)].append(mm_flops / (clock() - t))
            t = clock()
            s()
            times[(v, m)].append(clock() - t)
    every = [x for rs in rates.values() for x in rs]
    width = a.radius + 1 if causal else 2 * a.radius + 1
    fwd_flops = 4 * a.n * width * 64 * 8
    kind = "CPU" if a.cpu_time else "wall"
    mid, top = statistics.median(every) / 1e9, max(every) / 1e9
    print(f"n={a.n} {a.scenario} threads={a.threads} {kind} time; matmul {mid:.0f}, best {top:.0f}")
    _report(times, rates, lambda x: True, statistics.median(every), fwd_flops, "all samples")
    if not a.cpu_time:
        top = max(every)
        _report(times, rates, lambda x: x >= 0.8 * top, top, fwd_flops, "quiet samples")
    for (v, m), ts in times.items():
        print(f"  runs {m} {v}: {[round(t * 1e3) for t in ts]}")


def _report(times: dict, rates: dict, keep: Callable[[float], bool], rate: float,
            fwd_flops: float, label: str) -> None:  # fmt: skip
    med = {}
    for key, ts in times.items():
        kept = [t for t, r in zip(ts, rates[key], strict=True) if keep(r)]
        if kept:
            med[key] = statistics.median(kept)
    print(f"-- {label}: medians, % of a {rate / 1e9:.0f} GFLOP/s matmul rate")
    for (v, m), t in med.items():
        flops = fwd_flops * (3 if m == "fwd+bwd" else 1)
        print(f"  {m:8s} {v:16s} {t * 1e3:7.0f} ms {100 * flops / t / rate:5.1f}%")
    for v in ("before", "after"):
        if (v, "fwd") in med and (v, "fwd+bwd") in med:
            b = med[(v, "fwd+bwd")] - med[(v, "fwd")]
            print(f"  {v}: backward alone {b * 1e3:.0f} ms, {100 * 2 * fwd_flops / b / rate:.1f}%")
    for m in ("fwd", "fwd+bwd"):
        if ("before", m) in med and ("after", m) in med:
            print(f"  {m}: after / before = {med[('after', m)] / med[('before', m)]:.2f}")
    if ("local-attention", "fwd+bwd") in med and ("after", "fwd+bwd") in med:
        ratio = med[("local-attention", "fwd+bwd")] / med[("after", "fwd+bwd")]
        print(f"  fwd+bwd: local-attention / after = {ratio:.2f}")
    if ("flex", "fwd") in med and ("after", "fwd") in med:
        print(f"  fwd: after / flex = {med[('after', 'fwd')] / med[('flex', 'fwd')]:.2f}")


if __name__ == "__main__":
    main()
