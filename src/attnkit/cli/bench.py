"""``attnkit bench``: time, GFLOP/s, % of the matmul rate and peak memory of attnkit's
attention kernels and their anchors, measured in one run; writes JSON and log-log plots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._flags import int_list, str_list


def _sizes(text: str) -> list[int]:
    sizes = int_list(text, "sizes", "1024,4096")
    if not sizes or min(sizes) < 1:
        raise ValueError(f"--sizes {text!r}: sizes must be positive integers")
    return sizes


MODEL_SCENARIOS = {"train", "decode", "models"}
QUICK_NOTE = (
    "bench --quick: a smoke run (tiny sizes, one repeat, one process) that checks the bench "
    "runs; at these sizes per-call costs dominate, so its times and % of matmul mean nothing"
)


def _models(args: argparse.Namespace, scenarios: list[str]) -> int:
    """``--scenarios train,decode,models``: whole models on toy-ko (bench/models.py)."""
    import json

    import torch

    from ..bench.baseline import environment
    from ..bench.models import decode_speed, train_speed, versus_speed

    if args.quick:
        print(QUICK_NOTE)
    torch.set_num_threads(1)
    report: dict[str, Any] = {"threads": 1, "environment": environment(threads=1)}
    if "train" in scenarios:
        # eager; compiled as `attnkit train --compile`; compiled with inductor's defaults
        runs: list[tuple[bool, dict[str, Any] | None]] = [(False, None), (True, None)]
        runs += [] if args.quick else [(True, {})]
        steps = 3 if args.quick else 30
        report["train"] = [train_speed(c, steps=steps, options=o) for c, o in runs]
        eager = report["train"][0]
        for r in report["train"]:
            name = "eager" if not r["compile"] else f"compiled, options {r['options']}"
            ratio = r["steps_per_s"] / eager["steps_per_s"]  # < 1: slower than eager
            print(f"train  {name}: {r['steps_per_s']:7.2f} steps/s ({r['step_ms']:.1f} ms/step; "
                  f"{r['warmup']} warm-up steps {r['warmup_s']:.1f} s); "
                  f"x{ratio:.2f} eager's speed")  # fmt: skip
    if "decode" in scenarios:
        report["decode"] = decode_speed(
            updates=20 if args.quick else 300, test=64 if args.quick else 256,
            repeats=1 if args.quick else 3, weights=args.decode_weights,
        )  # fmt: skip
    if "models" in scenarios:
        quick = dict(preset="tiny", steps=1, warmup=1, repeats=1, batch_size=16)
        same = getattr(args, "same_as", None)  # --baseline: the baseline's settings
        chosen = same if same is not None else quick if args.quick else {"repeats": args.repeats}
        report["models"] = versus_speed(**chosen)
        for r in report["models"]["rows"]:
            print(f"models {r['model']:<16} attnkit {r['attnkit_ms']:8.1f} ms/update  "
                  f"{r['plain']} {r['plain_ms']:8.1f} ms/update  speed x{r['ratio']:.2f} "
                  f"(median of {len(r['rounds'])} rounds)")  # fmt: skip
        print(f"models load average {report['models']['load']}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "bench_models.json"
    path.write_text(json.dumps(report, indent=1))
    print(f"wrote {path}")
    return _against_baseline(args, report)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="measure attention kernels against SDPA, FlexAttention and local-attention",
        description=(
            "Each case runs in a fresh process: warm-up, median of repeats, its GFLOP/s as a % "
            "of the 2048x2048 float32 matmul rate measured just before, and its peak memory "
            "(resident-set high-water mark beyond the inputs). B=1, H=8 (--heads), d=64, float32."
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
        default="global,local,causal,additive,sparse",
        help="any of global (every key), local (radius each side), causal (look-back), "
        "additive (Bahdanau scores, chunked), sparse (the Sparse Transformer's causal strided "
        "pattern split across heads, stride --stride), sparse-fixed (its fixed pattern, c = 8 "
        "summary columns); linear (causal linear attention, Katharopoulos 2020, beside causal "
        "SDPA and the sliding window of look-back --lookback: time and memory slopes in n, "
        "the crossover n; --modes fwd or fwd+bwd; runs alone); or whole models: train "
        "(steps/s of a small "
        "Transformer eager vs torch.compile), decode (greedy and beam 5 sentences/s), models "
        "(RNNsearch and Transformer 'base' training speed against the same networks in plain "
        "PyTorch, --repeats rounds)",
    )
    p.add_argument(
        "--decode-weights",
        default="",
        help="decode: a state_dict file, loaded if it exists, else saved after training "
        "(decode two builds with the same parameters)",
    )
    p.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="run the kernel cases and the matmul anchor on this device; cuda needs a GPU "
        "and a CUDA build of torch (the whole-model scenarios run on the CPU)",
    )
    p.add_argument("--variants", help="only these variants, comma-separated")
    p.add_argument("--modes", default="fwd,fwd+bwd", help="fwd and/or fwd+bwd")
    p.add_argument("--radius", type=int, default=256, help="local radius each side")
    p.add_argument("--lookback", type=int, default=512, help="causal look-back")
    p.add_argument(
        "--stride",
        type=int,
        default=0,
        help="the sparse scenarios' stride l (0: round(√n) at each n, the paper's l ≈ √n)",
    )
    p.add_argument(
        "--heads",
        type=int,
        default=8,
        help="attention heads H of the kernel cases; fewer lets the dense forms fit "
        "in memory at larger n",
    )
    p.add_argument(
        "--repeats", type=int, default=3, help="timed runs of each case (the median counts)"
    )
    p.add_argument("--warmup", type=int, default=1, help="untimed runs of each case first")
    p.add_argument("--time-limit", type=float, default=30.0, help="skip steps over this (s)")
    p.add_argument("--memory-limit", type=float, default=8.0, help="skip cases over this (GiB)")
    p.add_argument("--out", type=Path, default=Path("runs/bench"), help="JSON and PNG folder")
    p.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="FILE",
        help="a bench.json or bench_models.json written before: re-run its cases with its "
        "settings (other options but --out are ignored) and print each case's ratio to it, "
        "flagging a case slower by more than 5% beyond the measured run-to-run spread (exit "
        "1 when one is)",
    )
    p.set_defaults(run=run)


def _load_baseline(path: Path) -> dict[str, Any]:
    """A report written by ``attnkit bench`` (bench.json or bench_models.json), read within a
    size limit and checked (``attnkit.bench.baseline_file``)."""
    from ..bench.baseline import cases
    from ..bench.baseline_file import read_baseline

    report = read_baseline(path)
    try:
        found = bool(cases(report))
    except (KeyError, TypeError, ValueError, AttributeError):
        found = False
    if not found:
        raise ValueError(
            f"--baseline {path}: no timed case in it; give a bench.json or bench_models.json "
            "that attnkit bench wrote"
        )
    return report


BASELINE_WRITES = {"kernels": ("bench.json", "bench.md"), "models": ("bench_models.json",)}
"""What a re-run writes into --out besides comparison.txt, by the kind of baseline."""


def _keep_baseline(args: argparse.Namespace, kind: str) -> None:
    """Refuse an --out where the re-run would write over the baseline itself (the default
    --out runs/bench with --baseline runs/bench/bench.json): the next comparison would be
    against this run."""
    import os

    for name in (*BASELINE_WRITES[kind], "comparison.txt"):
        target = args.out / name
        same = target.exists() and os.path.samefile(target, args.baseline)
        if same or target.resolve() == args.baseline.resolve():
            raise ValueError(
                f"--baseline {args.baseline} is the file this re-run writes (--out "
                f"{args.out}); it would be overwritten: pass another --out"
            )


def _rerun_baseline(args: argparse.Namespace) -> int:
    """``--baseline FILE``: the same cases again (FILE's settings, not the command line's),
    then each beside its baseline."""
    from ..bench.baseline_file import kernel_settings, model_settings
    from ..bench.suite import SuiteConfig

    args.baseline_report = base = _load_baseline(args.baseline)
    if "models" in base:
        args.same_as = model_settings(base, args.baseline)
        _keep_baseline(args, "models")
        return _models(args, ["models"])
    settings = kernel_settings(base, args.baseline)
    _keep_baseline(args, "kernels")
    try:
        cfg = SuiteConfig(**settings)
    except (TypeError, ValueError) as e:
        raise ValueError(f"--baseline {args.baseline}: its config cannot be re-run ({e})") from None
    return _kernels(args, cfg)


def _against_baseline(args: argparse.Namespace, report: dict[str, Any]) -> int:
    """Print the comparison with ``--baseline`` (when given) and write comparison.txt;
    exit 1 when a case is slower beyond the tolerance and the measured spread."""
    base = getattr(args, "baseline_report", None)
    if base is None:
        return 0
    from ..bench.baseline import compare, differences, format_comparison, missing

    for line in differences(base, report):
        print(f"warning: measured on another machine or set-up ({line})")
    rows = compare(base, report)
    text = format_comparison(rows, missing(base, report))
    print(text)
    path = args.out / "comparison.txt"
    path.write_text(f"baseline {args.baseline}\n{text}\n", encoding="utf-8")
    print(f"wrote {path}")
    return 1 if any(r.flagged for r in rows) else 0


def run(args: argparse.Namespace) -> int:
    from ..bench.suite import SuiteConfig
    from ..bench.variants import VARIANTS

    if getattr(args, "baseline", None) is not None:
        return _rerun_baseline(args)
    scenarios = str_list(args.scenarios)
    if "linear" in scenarios:
        if scenarios != ["linear"]:
            raise ValueError("--scenarios linear runs apart from the other scenarios")
        return _linear(args)
    if args.decode_weights and "decode" not in scenarios:
        raise ValueError("--decode-weights goes with --scenarios decode (it is unused otherwise)")
    if set(scenarios) & MODEL_SCENARIOS:
        if not set(scenarios) <= MODEL_SCENARIOS:
            raise ValueError(
                "--scenarios train,decode,models (whole models) run apart from the kernels"
            )
        if args.device != "cpu":
            raise ValueError(
                f"--device {args.device}: the whole-model scenarios (train, decode, models) run "
                "on the CPU; --device applies to the kernel scenarios (global, local, causal, "
                "additive)"
            )
        return _models(args, scenarios)
    modes = str_list(args.modes)
    if not set(modes) <= {"fwd", "fwd+bwd"} or not modes:
        raise ValueError(f"--modes {args.modes!r}: choose fwd, fwd+bwd or both")
    cfg = SuiteConfig(
        scenarios=str_list(args.scenarios),
        backward=[m == "fwd+bwd" for m in modes],
        variants=None
        if args.variants is None
        else str_list(args.variants),
        warmup=args.warmup,
        repeats=args.repeats,
        time_limit_s=args.time_limit,
        memory_limit_gib=args.memory_limit,
        local_radius=args.radius,
        causal_radius=args.lookback,
        sparse_stride=args.stride or None,
        heads=args.heads,
        device=args.device,
    )
    if args.quick:
        print(QUICK_NOTE)
        cfg.global_sizes = cfg.local_sizes = cfg.additive_sizes = [256, 512]
        cfg.local_radius, cfg.causal_radius = min(args.radius, 32), min(args.lookback, 64)
        cfg.repeats, cfg.warmup, cfg.isolate, cfg.matmul_repeats = 1, 1, False, 1
        cfg.matmul_size = 512  # a smoke run: its % of matmul is not the 2048 reference
        if not args.variants:  # FlexAttention compiles for ~15 s: not a smoke test
            quick = ["attnkit", "sdpa", "sdpa-band", "sdpa-mask", "naive", "local-attention"]
            ran = {v for name in cfg.scenarios for v in VARIANTS[name]}
            cfg.variants = [v for v in quick if v in ran]  # the report re-runs as it is
    if args.sizes:
        cfg.global_sizes = cfg.local_sizes = cfg.additive_sizes = _sizes(args.sizes)
    return _kernels(args, cfg)


def _linear(args: argparse.Namespace) -> int:
    """``--scenarios linear``: linear attention's time and memory slopes beside SDPA and the
    sliding window (--lookback w), and the crossover n (bench/linear.py)."""
    import json

    from ..bench.linear import LinearBench, format_linear, in_subprocess

    if args.device != "cpu":
        raise ValueError("--scenarios linear runs on the CPU; drop --device")
    modes = str_list(args.modes)
    cfg = LinearBench(heads=args.heads, window=args.lookback, backward=modes == ["fwd+bwd"],
                      warmup=args.warmup, repeats=args.repeats,
                      time_limit_s=args.time_limit)  # fmt: skip
    if args.quick:
        print(QUICK_NOTE)
        cfg.sizes, cfg.window, cfg.repeats, cfg.heads = [256, 512], min(args.lookback, 64), 1, 2
    if args.sizes:
        cfg.sizes = _sizes(args.sizes)
    if args.variants:
        cfg.variants = tuple(str_list(args.variants))
    report = in_subprocess(cfg)
    text = format_linear(report)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_linear.json").write_text(json.dumps(report, indent=1))
    (args.out / "bench_linear.txt").write_text(text + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'bench_linear.json'} and bench_linear.txt")
    return 0


def _kernels(args: argparse.Namespace, cfg: Any) -> int:
    """Run the kernel suite ``cfg``, print and write its report (with the environment)."""
    from ..bench.baseline import environment
    from ..bench.suite import HEADER, format_targets, run_suite, write_report

    print(HEADER)
    report = {"environment": environment(), **run_suite(cfg)}
    print(format_targets(report))
    for path in write_report(report, args.out):
        print(f"wrote {path}")
    return _against_baseline(args, report)
