"""The linear-attention scenario of the bench: time and peak memory against n of causal
linear attention (Katharopoulos et al. 2020) beside softmax SDPA and the sliding window,
their log-log slopes, and the crossover n past which linear attention is the faster.

    linear    attend(q, k, v, score=LinearScore(), normaliser=ratio, align=CausalAlignment(),
              need_weights=False): the chunked prefix sums of attnkit.linear, O(n·d²)
    sdpa      F.scaled_dot_product_attention(q, k, v, is_causal=True): the fused kernel, O(n²·d)
              time, no (n, n) tensor on the flash path
    sliding   attend(q, k, v, align=SlidingWindow(w, causal=True), need_weights=False): the
              O(n·w·d) band kernel of attnkit.local

The scenario runs in one fresh interpreter (``in_subprocess``), each case on one thread:
warm-up, median of ``repeats`` steps, and the resident-memory high-water mark of one step
beyond what was held (``peak_extra_mib``). A variant whose step passed ``time_limit_s`` is
not run at the larger sizes (its time there is at least twice as long). Slopes are
least-squares fits of log time (log memory) on log n.

Legend: B batch (1), H heads, n positions, d head width, w look-back.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from ..core import attend
from ..stages.alignment import CausalAlignment, SlidingWindow
from ..stages.kernels import LinearScore, ratio
from .measure import median_seconds, peak_extra_mib

VARIANTS = ("linear", "sdpa", "sliding")


@dataclass
class LinearBench:
    """The scenario's settings; ``sizes`` the n measured (1k .. 64k by default)."""

    sizes: list[int] = field(default_factory=lambda: [2**k for k in range(10, 17)])
    heads: int = 8
    head_dim: int = 64
    window: int = 512
    backward: bool = False
    warmup: int = 1
    repeats: int = 3
    time_limit_s: float = 30.0
    variants: tuple[str, ...] = VARIANTS


def _step(variant: str, n: int, cfg: LinearBench) -> Callable[[], None]:
    """One step of ``variant`` at n positions on seeded inputs (B=1, H, n, d) float32."""
    g = torch.Generator().manual_seed(0)
    shape = (1, cfg.heads, n, cfg.head_dim)
    q, k, v = (torch.randn(shape, generator=g).requires_grad_(cfg.backward) for _ in range(3))
    if variant == "linear":
        score, align = LinearScore(), CausalAlignment()

        def run() -> torch.Tensor:
            return attend(q, k, v, score=score, normaliser=ratio, align=align,
                          need_weights=False).context  # fmt: skip
    elif variant == "sdpa":

        def run() -> torch.Tensor:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    elif variant == "sliding":
        band = SlidingWindow(cfg.window, causal=True)

        def run() -> torch.Tensor:
            return attend(q, k, v, align=band, need_weights=False).context
    else:
        raise ValueError(f"unknown linear-bench variant {variant!r}; choose from {VARIANTS}")

    def step() -> None:
        out = run()
        if cfg.backward:
            out.sum().backward()
            for x in (q, k, v):
                x.grad = None

    return step


def slope(ns: list[int], values: list[float]) -> float | None:
    """The least-squares slope of log value on log n (None with fewer than two points)."""
    pts = [(math.log(n), math.log(v)) for n, v in zip(ns, values, strict=True) if v > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def crossover(rows: list[dict[str, Any]], fast: str, slow: str) -> float | None:
    """The n at which ``fast``'s time falls below ``slow``'s, interpolated log-log between
    the measured sizes; None when it never does in the range (or from the first size on,
    then the first size is an upper bound: reported as that size)."""
    both = sorted((r["n"], r[fast]["ms"], r[slow]["ms"]) for r in rows
                  if "ms" in r.get(fast, {}) and "ms" in r.get(slow, {}))  # fmt: skip
    for i, (n, f, s) in enumerate(both):
        if f < s:
            if i == 0:
                return float(n)
            n0, f0, s0 = both[i - 1]
            d0, d1 = math.log(f0 / s0), math.log(f / s)  # > 0 then < 0
            x = math.log(n0) + (math.log(n) - math.log(n0)) * d0 / (d0 - d1)
            return math.exp(x)
    return None


def run_linear_bench(cfg: LinearBench, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure every variant at every size (see the module) -> the report: rows per n,
    slopes of time and memory per variant, the crossover n of linear against SDPA and
    against the sliding window, the CPU and torch named."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    rows: list[dict[str, Any]] = []
    stopped: set[str] = set()
    try:
        for n in cfg.sizes:
            row: dict[str, Any] = {"n": n}
            for variant in cfg.variants:
                if variant in stopped:
                    row[variant] = {"skipped": f"over {cfg.time_limit_s:g} s at a smaller n"}
                    continue
                step = _step(variant, n, cfg)
                for _ in range(max(cfg.warmup, 1)):
                    step()
                peak = peak_extra_mib(step)
                seconds, _ = median_seconds(step, cfg.repeats)
                row[variant] = {"ms": seconds * 1e3, "peak_mib": peak}
                log(f"linear-bench n={n:>6} {variant:<8} {seconds * 1e3:10.1f} ms  "
                    f"peak {'-' if peak is None else f'{peak:.1f}'} MiB")  # fmt: skip
                if seconds > cfg.time_limit_s:
                    stopped.add(variant)
            rows.append(row)
    finally:
        torch.set_num_threads(before)
    slopes = {}
    for variant in cfg.variants:
        got = [r for r in rows if "ms" in r[variant]]
        ns = [r["n"] for r in got]
        mem = [r[variant]["peak_mib"] or 0.0 for r in got]
        slopes[variant] = {"time": slope(ns, [r[variant]["ms"] for r in got]),
                           "memory": slope(ns, mem)}  # fmt: skip
    report = {
        "config": asdict(cfg),
        "cpu": cpu_name(),
        "torch": torch.__version__,
        "threads": 1,
        "rows": rows,
        "slopes": slopes,
        "crossover_vs_sdpa": crossover(rows, "linear", "sdpa"),
        "crossover_vs_sliding": crossover(rows, "linear", "sliding"),
    }
    return report


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else platform's."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def format_linear(report: dict[str, Any]) -> str:
    """The report as a table: ms and MiB per n and variant, then slopes and crossovers."""
    variants = report["config"]["variants"]
    lines = [f"linear attention vs SDPA and the sliding window (w = {report['config']['window']})"
             f"; {report['cpu']}, torch {report['torch']}, 1 thread, H = "
             f"{report['config']['heads']}, d = {report['config']['head_dim']}, "
             f"{'fwd+bwd' if report['config']['backward'] else 'fwd'}",
             "n        " + "".join(f"{v + ' ms':>14}{v + ' MiB':>14}"
                                   for v in variants)]  # fmt: skip
    for r in report["rows"]:
        cells = []
        for v in variants:
            c = r[v]
            ms = f"{c['ms']:.1f}" if "ms" in c else "skipped"
            mib = "-" if c.get("peak_mib") is None else f"{c['peak_mib']:.1f}"
            cells.append(f"{ms:>14}{mib:>14}")
        lines.append(f"{r['n']:<9}" + "".join(cells))
    for v in variants:
        s = report["slopes"][v]
        t = "-" if s["time"] is None else f"{s['time']:.2f}"
        m = "-" if s["memory"] is None else f"{s['memory']:.2f}"
        lines.append(f"slope of log time / log memory on log n, {v}: {t} / {m}")
    for key, other in (("crossover_vs_sdpa", "SDPA"), ("crossover_vs_sliding", "the window")):
        x = report[key]
        lines.append(f"linear faster than {other} from n ≈ "
                     + ("never, in this range" if x is None else f"{x:.0f}"))  # fmt: skip
    return "\n".join(lines)


def in_subprocess(cfg: LinearBench) -> dict[str, Any]:
    """``run_linear_bench`` in a fresh interpreter whose allocator returns every large block
    when it is freed (as ``measure_in_subprocess``), so that the resident-memory peaks are
    honest; its progress lines pass through."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[2])  # the directory holding attnkit/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
           "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    cmd = [sys.executable, "-m", "attnkit.bench.linear", json.dumps(asdict(cfg))]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, check=False)
    lines = done.stdout.splitlines()
    for line in lines:
        if not line.startswith("{"):
            print(line)
    if done.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"the linear bench exited {done.returncode}; see its output above")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main(argv: list[str]) -> int:
    import json

    raw = json.loads(argv[0])
    raw["variants"] = tuple(raw["variants"])
    report = run_linear_bench(LinearBench(**raw), log=lambda line: print(line, flush=True))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))


__all__ = ["LinearBench", "VARIANTS", "crossover", "format_linear", "in_subprocess",
           "run_linear_bench", "slope"]
