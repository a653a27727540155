"""``attnkit bench``: time, GFLOP/s, % of the matmul rate and peak memory of attnkit's
attention kernels and their anchors, measured in one run; writes JSON and log-log plots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(
            f"--sizes {text!r}: give comma-separated integers, e.g. 1024,4096"
        ) from None
    if not sizes or min(sizes) < 1:
        raise ValueError(f"--sizes {text!r}: sizes must be positive integers")
    return sizes


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="measure attention kernels against SDPA, FlexAttention and local-attention",
        description=(
            "Each case runs in a fresh process: warm-up, median of repeats, its GFLOP/s as a % "
            "of the 2048x2048 float32 matmul rate measured just before, and its peak memory "
            "(resident-set high-water mark beyond the inputs). B=1, H=8, d=64, float32."
        ),
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a seconds-long smoke run: n=256,512, small windows, in one process",
    )
    p.add_argument("--sizes", help="comma-separated n for every scenario (default 1k..32k/64k)")
    p.add_argument(
        "--scenarios",
        default="global,local,causal,additive",
        help="any of global (every key), local (radius each side), causal (look-back), "
        "additive (Bahdanau scores, chunked)",
    )
    p.add_argument("--variants", help="only these variants, comma-separated")
    p.add_argument("--modes", default="fwd,fwd+bwd", help="fwd and/or fwd+bwd")
    p.add_argument("--radius", type=int, default=256, help="local radius each side (256)")
    p.add_argument("--lookback", type=int, default=512, help="causal look-back (512)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--time-limit", type=float, default=30.0, help="skip steps over this (s)")
    p.add_argument("--memory-limit", type=float, default=8.0, help="skip cases over this (GiB)")
    p.add_argument("--out", type=Path, default=Path("runs/bench"), help="JSON and PNG folder")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..bench.suite import HEADER, SuiteConfig, format_targets, run_suite, write_report

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not set(modes) <= {"fwd", "fwd+bwd"} or not modes:
        raise ValueError(f"--modes {args.modes!r}: choose fwd, fwd+bwd or both")
    cfg = SuiteConfig(
        scenarios=[s.strip() for s in args.scenarios.split(",") if s.strip()],
        backward=[m == "fwd+bwd" for m in modes],
        variants=None
        if args.variants is None
        else [v.strip() for v in args.variants.split(",") if v.strip()],
        warmup=args.warmup,
        repeats=args.repeats,
        time_limit_s=args.time_limit,
        memory_limit_gib=args.memory_limit,
        local_radius=args.radius,
        causal_radius=args.lookback,
    )
    if args.quick:
        cfg.global_sizes = cfg.local_sizes = cfg.additive_sizes = [256, 512]
        cfg.local_radius, cfg.causal_radius = min(args.radius, 32), min(args.lookback, 64)
        cfg.repeats, cfg.warmup, cfg.isolate, cfg.matmul_repeats = 1, 1, False, 1
        cfg.matmul_size = 512  # a smoke run: its % of matmul is not the 2048 reference
        if not args.variants:  # FlexAttention compiles for ~15 s: not a smoke test
            cfg.variants = ["attnkit", "sdpa", "sdpa-band", "naive", "local-attention"]
    if args.sizes:
        cfg.global_sizes = cfg.local_sizes = cfg.additive_sizes = _sizes(args.sizes)
    print(HEADER)
    report = run_suite(cfg)
    print(format_targets(report))
    for path in write_report(report, args.out):
        print(f"wrote {path}")
    return 0
