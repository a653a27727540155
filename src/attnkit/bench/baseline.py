"""Figures that stay true: what a bench run was measured on, and a re-run compared with a
committed baseline, case by case.

    env = environment()                        # commit, torch, CPU, threads, ... of this run
    rows = compare(baseline_report, new_report)
    print(format_comparison(rows))             # ratio new/baseline, flagged where slower

A *case* is one timed thing with its run-to-run samples: a kernel row of ``attnkit bench``
(``scenario/variant/mode/n``, its per-repeat times) or a whole-model row of ``--scenarios
models`` (``models/NAME``: attnkit's ms per update and the ratio to the plain model, per
round). A case is flagged when the re-run is slower than the baseline by more than
``tolerance`` (5%) beyond the run-to-run spread measured in the two runs: the relative
half-width of the interquartile range of each run's samples, the larger of the two. A
case with one sample has no measured spread (0): only the tolerance protects it.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOLERANCE = 0.05


def environment(threads: int | None = None) -> dict[str, Any]:
    """What a bench run was measured on: the attnkit commit (None outside a git checkout),
    the torch and Python versions, the CPU model, the thread count and the load average."""
    import torch

    from .. import __version__

    return {
        "commit": _commit(),
        "attnkit": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": _cpu(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads() if threads is None else threads,
        "load": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def _commit() -> str | None:
    """The commit of the checkout attnkit runs from, with ``+dirty`` when files changed."""
    root = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head


def _cpu() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what platform says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class Case:
    """One timed case: its name, the unit its samples are in, the samples of one run, and
    whether larger is faster (a speed ratio) or slower (milliseconds)."""

    name: str
    unit: str  # "ms" or "x" (a speed ratio, larger = faster)
    samples: tuple[float, ...]

    @property
    def value(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        """The relative half-width of the samples' interquartile range (0 for one sample)."""
        if len(self.samples) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples, n=4, method="inclusive")
        return (q3 - q1) / 2 / abs(self.value) if self.value else 0.0


def cases(report: dict[str, Any]) -> dict[str, Case]:
    """The timed cases of a kernel report (``bench.json``) or a whole-model report
    (``bench_models.json``), by name; skipped rows have none."""
    out: dict[str, Case] = {}
    for row in report.get("rows", []):
        if "ms" in row:
            name = f"{row['scenario']}/{row['variant']}/{row['mode']}/n={row['n']}"
            out[name] = Case(name, "ms", tuple(row.get("times_ms") or [row["ms"]]))
    for row in report.get("models", {}).get("rows", []):
        rounds = row.get("rounds") or [
            {"attnkit": row["attnkit_ms"], "ratio": row["ratio"]}
        ]  # fmt: skip
        name = f"models/{row['model']}"
        out[name] = Case(name, "ms", tuple(r["attnkit"] for r in rounds))
        ratio = f"{name} vs {row['plain']}"
        out[ratio] = Case(ratio, "x", tuple(r["ratio"] for r in rounds))
    return out


@dataclass(frozen=True)
class Compared:
    """One case of a baseline beside its re-run: ``slower`` is the re-run's fractional
    slowdown (0.10 = 10% slower; negative when faster), ``allowed`` the slowdown it may show
    (tolerance + measured spread), ``flagged`` whether it showed more."""

    name: str
    unit: str
    baseline: float
    now: float
    slower: float
    allowed: float

    @property
    def flagged(self) -> bool:
        return self.slower > self.allowed


def compare(
    baseline: dict[str, Any], now: dict[str, Any], tolerance: float = TOLERANCE
) -> list[Compared]:
    """Every case measured in both reports, in the baseline's order. Milliseconds: slowdown
    = now / baseline - 1; a speed ratio: slowdown = baseline / now - 1."""
    if tolerance < 0:
        raise ValueError(f"tolerance={tolerance}; it must not be negative")
    old, new = cases(baseline), cases(now)
    out = []
    for name, b in old.items():
        n = new.get(name)
        if n is None or b.value <= 0 or n.value <= 0:
            continue
        slower = n.value / b.value - 1 if b.unit == "ms" else b.value / n.value - 1
        allowed = tolerance + max(b.spread, n.spread)
        out.append(Compared(name, b.unit, b.value, n.value, slower, allowed))
    return out


def missing(baseline: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Cases of the baseline that the re-run did not measure (skipped, failed)."""
    return sorted(set(cases(baseline)) - set(cases(now)))


def format_comparison(rows: Sequence[Compared], gone: Sequence[str] = ()) -> str:
    """A table: case, baseline, now, now/baseline, the slowdown allowed, and a flag."""
    lines = [f"{'case':<46} {'baseline':>10} {'now':>10} {'now/base':>9} {'allowed':>8}"]
    for r in rows:
        fmt = "{:10.1f}" if r.unit == "ms" else "{:9.2f}x"
        flag = f"  SLOWER by {r.slower:.0%}" if r.flagged else ""
        lines.append(
            f"{r.name:<46} {fmt.format(r.baseline)} {fmt.format(r.now)} "
            f"{r.now / r.baseline:9.3f} {r.allowed:+8.0%}{flag}"
        )
    lines += [f"{name:<46} not measured in this run" for name in gone]
    flagged = sum(r.flagged for r in rows)
    lines.append(
        f"{flagged} of {len(rows)} cases slower than the baseline beyond "
        f"{TOLERANCE:.0%} + the measured spread"
    )
    return "\n".join(lines)


def differences(baseline: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between the two runs' machines (torch, CPU, threads): ratios across them
    say little about attnkit."""
    a, b = baseline.get("environment") or {}, now.get("environment") or {}
    return [
        f"{key}: baseline {a.get(key)!r}, now {b.get(key)!r}"
        for key in ("torch", "cpu", "cores", "threads")
        if a.get(key) != b.get(key)
    ]


__all__ = [
    "TOLERANCE",
    "Case",
    "Compared",
    "cases",
    "compare",
    "differences",
    "environment",
    "format_comparison",
    "missing",
]
