"""Ratios measured in one process, the variants' steps interleaved: on a shared host the load
moves by tens of % between the bench's one-process-per-case runs, but two steps timed back to
back see nearly the same load, so their ratio holds where their absolute times do not.

Each round times one 2048² float32 matmul, then one step of every (variant, mode) in turn;
the report is the median over rounds of each time, the matmul rate, each step's % of it
(FLOPs as in ``Case.flops``), and every variant's time over the first variant's.

    python -m attnkit.bench.interleave --scenario local --n 16384 \\
        --variants attnkit,local-attention --modes fwd,fwd+bwd --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from .measure import _matmul_step
from .variants import Case, available, make_step


def interleaved(cases: list[Case], rounds: int, matmul_size: int = 2048) -> dict[str, Any]:
    """Median seconds of each case over ``rounds`` interleaved rounds (one warm-up step each
    first), the median matmul rate, and each case's % of it. -> JSON-able dict."""
    if rounds < 1:
        raise ValueError(f"rounds={rounds}: need at least one timed round")
    for case in cases:
        why = available(case)
        if why is not None:
            raise ValueError(f"{case.variant} {case.scenario}: {why}")
    product, mm_flops = _matmul_step(matmul_size)
    steps = [make_step(c) for c in cases]
    for step in (product, *steps):
        step()  # warm-up (FlexAttention compiles here)
    times: list[list[float]] = [[] for _ in cases]
    mm: list[float] = []
    for _ in range(rounds):
        for i, step in enumerate((product, *steps)):
            start = time.perf_counter()
            step()
            (mm if i == 0 else times[i - 1]).append(time.perf_counter() - start)
    rate = mm_flops / statistics.median(mm)  # FLOP/s
    rows = []
    for case, ts in zip(cases, times, strict=True):
        s = statistics.median(ts)
        rows.append({"variant": case.variant, "mode": "fwd+bwd" if case.backward else "fwd",
                     "n": case.n, "ms": s * 1e3, "pct_matmul": 100 * case.flops / s / rate,
                     "all_ms": [t * 1e3 for t in ts]})  # fmt: skip
    return {"matmul_gflops": rate / 1e9, "rounds": rounds, "rows": rows}


def _ratios(rows: list[dict[str, Any]]) -> list[str]:
    """Per mode: every variant's time over the first variant's."""
    lines = []
    for mode in dict.fromkeys(r["mode"] for r in rows):
        same = [r for r in rows if r["mode"] == mode]
        base = same[0]
        for r in same[1:]:
            lines.append(f"{mode}: {r['variant']} / {base['variant']} = {r['ms'] / base['ms']:.2f}")
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default="local", help="local | causal | global | additive")
    p.add_argument("--n", type=int, default=16384, help="sequence length")
    p.add_argument("--radius", type=int, default=256, help="window radius (look-back causal)")
    p.add_argument("--variants", default="attnkit,local-attention", help="first = the base")
    p.add_argument("--modes", default="fwd,fwd+bwd", help="fwd and/or fwd+bwd")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    cases = [Case(v, a.scenario, a.n, m == "fwd+bwd", radius=a.radius)
             for m in a.modes.split(",") for v in a.variants.split(",")]  # fmt: skip
    out = interleaved(cases, a.rounds)
    print(f"matmul 2048² float32: {out['matmul_gflops']:.0f} GFLOP/s (median), "
          f"{a.rounds} rounds, {a.threads} threads")  # fmt: skip
    for r in out["rows"]:
        times = ", ".join(f"{t:.0f}" for t in r["all_ms"])
        print(f"{a.scenario} {r['mode']:8s} n={r['n']} {r['variant']:16s} {r['ms']:9.1f} ms "
              f"{r['pct_matmul']:5.1f} %mm  [{times}]")  # fmt: skip
    for line in _ratios(out["rows"]):
        print(line)


if __name__ == "__main__":
    main()
