"""Which cases to measure, which to skip, and the report: a table, JSON and log-log plots.

A case is skipped (and the table says why) when its variant cannot run here, or when one step
would take more than ``time_limit_s`` or its peak memory would pass ``memory_limit_gib``: the
estimate extrapolates the same variant's previous size (n² for dense variants, n for the
local kernels, n·√n for the Sparse Transformer's) and counts, before anything is allocated,
the inputs, outputs and gradients of every variant and the n x n tensors the dense ones must
build.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import sparse
from .measure import matmul_gflops, measure, measure_in_subprocess
from .variants import VARIANTS, Case, available

DENSE = {"naive", "sdpa-band", "sdpa"}  # variants whose work grows as n²
GLOBAL_SIZES = [1024, 2048, 4096, 8192, 16384, 32768]
LOCAL_SIZES = [1024, 2048, 4096, 8192, 16384, 32768, 65536]
ADDITIVE_SIZES = [256, 512, 1024, 2048, 4096]


@dataclass
class SuiteConfig:
    global_sizes: list[int] = field(default_factory=lambda: list(GLOBAL_SIZES))
    local_sizes: list[int] = field(default_factory=lambda: list(LOCAL_SIZES))
    additive_sizes: list[int] = field(default_factory=lambda: list(ADDITIVE_SIZES))
    scenarios: list[str] = field(
        default_factory=lambda: ["global", "local", "causal", "additive", "sparse"]
    )
    backward: list[bool] = field(default_factory=lambda: [False, True])
    variants: list[str] | None = None  # None: every variant of a scenario
    warmup: int = 1
    repeats: int = 3
    time_limit_s: float = 30.0
    memory_limit_gib: float = 8.0
    heads: int = 8
    dim: int = 64
    local_radius: int = 256
    causal_radius: int = 512
    sparse_stride: int | None = None  # None: l = round(√n) at each n
    isolate: bool = True  # a fresh process per case (honest peak memory); False: smoke runs
    matmul_repeats: int = 5
    matmul_size: int = 2048  # a smoke run may use less
    device: str = "cpu"  # cpu | cuda: where the cases and the matmul anchor run

    def __post_init__(self) -> None:
        for name in self.scenarios:
            if name not in VARIANTS:
                raise ValueError(f"unknown scenario {name!r}; choose from {sorted(VARIANTS)}")
        if self.repeats < 1:
            raise ValueError(f"--repeats {self.repeats}: need at least one timed step")
        known = sorted({v for name in self.scenarios for v in VARIANTS[name]})
        unknown = sorted(set(self.variants or ()) - set(known))
        if unknown or self.variants == []:
            raise ValueError(
                f"unknown variant(s) {unknown or self.variants}; the scenarios "
                f"{','.join(self.scenarios)} have {','.join(known)}"
            )
        if self.warmup < 0:
            raise ValueError(f"--warmup {self.warmup}: give 0 or more warm-up steps")
        for flag, value in (("--time-limit", self.time_limit_s),
                            ("--memory-limit", self.memory_limit_gib)):  # fmt: skip
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{flag} {value}: give a positive finite limit")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"--device {self.device!r}: choose cpu or cuda")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                "--device cuda: torch sees no CUDA device here (torch.cuda.is_available() is "
                "False); run on a machine with a GPU and a CUDA build of torch, or use --device cpu"
            )
        if self.heads < 1:
            raise ValueError(f"--heads {self.heads}: give at least one attention head")
        if self.local_radius < 1 or self.causal_radius < 1:
            raise ValueError(
                f"--radius {self.local_radius} --lookback {self.causal_radius}: a window needs "
                "at least one key beside the query (use the global scenario for none)"
            )
        if self.sparse_stride is not None and self.sparse_stride < 1:
            raise ValueError(
                f"--stride {self.sparse_stride}: give a stride l >= 1, or 0 for round(√n)"
            )


def dense_bytes(case: Case) -> float:
    """Bytes of the n x n tensors a dense variant must hold at once (a lower bound)."""
    if case.scenario in sparse.SCENARIOS:
        return sparse.dense_bytes(case)
    nn = float(case.n) ** 2
    if case.scenario == "additive":  # the (n, n, A) hidden tensor, or attnkit's n x n scores
        per_pair = case.dim * (2 if case.backward else 1) if case.variant == "naive" else 3
        return nn * case.heads * case.batch * 4 * per_pair
    if case.variant == "naive":  # scores and weights in float32 (+ their gradients)
        return nn * case.heads * case.batch * 4 * (4 if case.backward else 2)
    if case.variant == "sdpa-band":  # the bool mask and SDPA's float copy of it
        return nn * 5 * (2 if case.backward else 1)
    return 0.0


def input_bytes(case: Case) -> float:
    """Bytes of the (B, H, n, d) float32 tensors every variant holds: q, k, v and the output,
    and with a backward pass the output's gradient and those of q, k and v (make_step)."""
    return float(case.batch * case.heads * case.n * case.dim) * 4 * (8 if case.backward else 4)


def skip_reason(case: Case, prev: dict[str, Any] | None, cfg: SuiteConfig) -> str | None:
    why = available(case)
    if why is not None:
        return why
    limit = cfg.memory_limit_gib * 2**30
    need = dense_bytes(case) + input_bytes(case)  # before any allocation: 10M tokens = 20 GB
    if need > limit:
        return f"skipped: needs > {need / 2**30:.0f} GiB"
    if prev is None or "ms" not in prev:
        return None
    if case.scenario in sparse.SCENARIOS:
        power = 2.0 if case.variant in sparse.DENSE else 1.5
    else:
        power = 2 if case.variant in DENSE or case.scenario in ("global", "additive") else 1
    grow = (case.n / prev["n"]) ** power
    est_s = prev["ms"] / 1e3 * grow
    if est_s > cfg.time_limit_s:
        return f"skipped: est. {est_s:.0f} s per step"
    if prev.get("peak_mib") is not None and prev["peak_mib"] * grow * 2**20 > limit:
        return f"skipped: est. {prev['peak_mib'] * grow / 1024:.0f} GiB"
    return None


def plan_cases(cfg: SuiteConfig) -> list[Case]:
    cases = []
    for scenario in cfg.scenarios:
        sizes = {"global": cfg.global_sizes, "additive": cfg.additive_sizes}.get(
            scenario, cfg.local_sizes
        )
        radius = cfg.causal_radius if scenario == "causal" else cfg.local_radius
        for backward in cfg.backward:
            for variant in VARIANTS[scenario]:
                if cfg.variants is not None and variant not in cfg.variants:
                    continue
                for n in sizes:
                    if scenario in sparse.SCENARIOS:  # the stride l
                        radius = cfg.sparse_stride or sparse.default_stride(n)
                    cases.append(Case(variant, scenario, n, backward, 1, cfg.heads, cfg.dim,
                                      radius, cfg.device))  # fmt: skip
    return cases


def run_suite(cfg: SuiteConfig, log: Any = print) -> dict[str, Any]:
    """Measure every planned case (one fresh process each) and return the report dict."""
    rate_before = matmul_gflops(cfg.matmul_repeats, cfg.matmul_size, cfg.device)
    size = cfg.matmul_size
    log(f"matmul {size}x{size} float32 on {cfg.device}: {rate_before:.0f} GFLOP/s")
    rows: list[dict[str, Any]] = []
    last: dict[tuple[str, str, bool], dict[str, Any]] = {}
    for case in plan_cases(cfg):
        key = (case.variant, case.scenario, case.backward)
        row: dict[str, Any] = {**asdict(case), "mode": "fwd+bwd" if case.backward else "fwd"}
        reason = skip_reason(case, last.get(key), cfg)
        if reason is None:
            if cfg.isolate:
                timeout = max(120.0, 12 * cfg.time_limit_s)
                row.update(measure_in_subprocess(case, cfg.warmup, cfg.repeats, timeout))
            else:
                row.update(measure(case, cfg.warmup, cfg.repeats, cfg.matmul_size))
            if "ms" in row:
                last[key] = row
            else:
                reason = row.pop("error")
        if reason is not None:
            row["skipped"] = reason
            last[key] = {"n": case.n, "ms": float("inf")} if "GiB" in reason else last.get(key, {})
        rows.append(row)
        log(format_row(row))
    rate_after = matmul_gflops(cfg.matmul_repeats, cfg.matmul_size, cfg.device)
    return {
        "matmul_gflops": {"before": rate_before, "after": rate_after},
        "config": asdict(cfg),
        "rows": rows,
        "targets": targets(rows),
    }


def _find(rows: list[dict[str, Any]], **kw: Any) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in kw.items()) and "ms" in row:
            return row
    return None


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bench's targets, each with the measured figure (None where not measured)."""
    out: list[dict[str, Any]] = []

    def add(name: str, value: float | None, ok: bool | None) -> None:
        out.append({"target": name, "measured": value, "met": ok})

    def get(variant: str, n: int, mode: str = "fwd", scenario: str = "local") -> Any:
        return _find(rows, variant=variant, n=n, mode=mode, scenario=scenario)

    ours, band = get("attnkit", 16384), get("sdpa-band", 16384)
    speed = band["ms"] / ours["ms"] if ours and band else None
    add("local n=16384: >= 20x faster than SDPA + band mask", speed, _ge(speed, 20))
    fair = _fair(ours, band)
    add("  same, load-corrected (ratio of %mm)", fair, _ge(fair, 20))
    mem = (
        ours["peak_mib"] / band["peak_mib"]
        if ours and band and ours.get("peak_mib") and band.get("peak_mib")
        else None
    )
    add(
        "local n=16384: <= 1/8 of its peak memory (ratio)",
        mem,
        None if mem is None else mem <= 1 / 8,
    )
    for mode in ("fwd", "fwd+bwd"):
        a, b = get("attnkit", 16384, mode), get("local-attention", 16384, mode)
        r = b["ms"] / a["ms"] if a and b else None
        add(f"local n=16384 {mode}: >= 1.5x faster than local-attention", r, _ge(r, 1.5))
        add("  same, load-corrected (ratio of %mm)", _fair(a, b), _ge(_fair(a, b), 1.5))
    pct = ours["pct_matmul"] if ours else None
    add("local n=16384 fwd: >= 40% of the matmul rate (%)", pct, _ge(pct, 40))
    t32 = get("attnkit", 32768)
    scale = t32["ms"] / ours["ms"] if t32 and ours else None
    add("local time(32768)/time(16384) in [1.8, 2.2]", scale,
        None if scale is None else 1.8 <= scale <= 2.2)  # fmt: skip
    # the same ratio with each time scaled by the matmul rate measured beside it (load drift)
    fair = ours["pct_matmul"] / t32["pct_matmul"] * 2 if t32 and ours else None
    add("  same, load-corrected (2 x %mm(16384) / %mm(32768))", fair,
        None if fair is None else 1.8 <= fair <= 2.2)  # fmt: skip
    for mode in ("fwd", "fwd+bwd"):
        big = get("attnkit", 65536, mode)
        heads = big.get("heads", 8) if big else 8
        inputs_mib = 3 * 65536 * heads * 64 * 4 / 2**20 * (2 if mode == "fwd+bwd" else 1)
        total = big["peak_mib"] + inputs_mib if big and big.get("peak_mib") is not None else None
        add(f"local n=65536 {mode}: < 2 GiB (inputs + peak, MiB)", total,
            None if total is None else total < 2048)  # fmt: skip
    for row in rows:  # the chunked additive score: time and memory at every n measured
        if row.get("variant") != "attnkit" or row.get("scenario") != "additive" or "ms" not in row:
            continue
        n, mode = row["n"], row["mode"]
        naive = _find(rows, variant="naive", scenario="additive", n=n, mode=mode)
        t = row["ms"] / naive["ms"] if naive else None
        add(f"additive n={n} {mode}: time <= 1.1x the naive form's", t,
            None if t is None else t <= 1.1)  # fmt: skip
        m = (row["peak_mib"] / naive["peak_mib"]
             if naive and row.get("peak_mib") and naive.get("peak_mib") else None)  # fmt: skip
        add(f"additive n={n} {mode}: <= 1/10 of its peak memory (ratio)", m,
            None if m is None else m <= 0.1)  # fmt: skip
    ratios, fair_ratios = [], []
    for row in rows:
        if row.get("variant") == "attnkit" and row.get("scenario") == "global" and "ms" in row:
            sdpa = _find(rows, variant="sdpa", scenario="global", n=row["n"], mode=row["mode"])
            if sdpa:
                ratios.append(row["ms"] / sdpa["ms"])
                fair_ratios.append(sdpa["pct_matmul"] / row["pct_matmul"])
    for name, values in (("", ratios), ("  same, load-corrected", fair_ratios)):
        med = statistics.median(values) if values else None
        label = name or "global: attnkit time / SDPA time <= 1.05 (median over n, modes)"
        add(label, med, None if med is None else med <= 1.05)
    # the sliding window at n = 16,384. The backward pass does twice the forward's FLOPs in
    # (fwd+bwd - fwd) ms: its % of the matmul rate is 2 x %mm(fwd) x ms(fwd) / that time
    both, lucid = get("attnkit", 16384, "fwd+bwd"), get("local-attention", 16384, "fwd+bwd")
    r = lucid["ms"] / both["ms"] if lucid and both else None
    add("local n=16384 fwd+bwd: >= 3x faster than local-attention", r, _ge(r, 3))
    add("local n=16384 fwd: >= 50% of the matmul rate (%)", pct, _ge(pct, 50))
    back = (
        2 * ours["pct_matmul"] * ours["ms"] / (both["ms"] - ours["ms"])
        if ours and both and both["ms"] > ours["ms"]
        else None
    )
    add("local n=16384 backward alone: >= 40% of the matmul rate (%)", back, _ge(back, 40))
    flex = get("flex", 16384)
    f = ours["ms"] / flex["ms"] if ours and flex else None
    add("local n=16384 fwd: <= 0.8x FlexAttention's time", f, None if f is None else f <= 0.8)
    if any(row.get("scenario") == "sparse" for row in rows):  # the Sparse Transformer's
        out += sparse.targets(rows)
    return out


def _fair(ours: dict[str, Any] | None, other: dict[str, Any] | None) -> float | None:
    """Speed-up with each time taken relative to the matmul timed beside it: the ratio of the
    two cases' % of the matmul rate (same FLOPs). Robust to load that drifts between cases."""
    if not ours or not other:
        return None
    return float(ours["pct_matmul"] / other["pct_matmul"])


def _ge(x: float | None, bound: float) -> bool | None:
    return None if x is None else x >= bound


HEADER = (
    f"{'scenario':<8} {'mode':<8} {'n':>6} {'variant':<16} {'ms':>10} {'GFLOP/s':>8} "
    f"{'%mm':>5} {'peak MiB':>9}  note"
)


def format_row(row: dict[str, Any]) -> str:
    head = f"{row['scenario']:<8} {row['mode']:<8} {row['n']:>6} {row['variant']:<16}"
    if "ms" not in row:
        return f"{head} {'-':>10} {'-':>8} {'-':>5} {'-':>9}  {row.get('skipped', '')}"
    peak = "n/a" if row.get("peak_mib") is None else f"{row['peak_mib']:.0f}"
    return f"{head} {row['ms']:>10.1f} {row['gflops']:>8.1f} {row['pct_matmul']:>5.0f} {peak:>9}"


def format_targets(report: dict[str, Any]) -> str:
    lines = ["targets:"]
    for t in report["targets"]:
        mark = {True: "met", False: "MISSED", None: "not measured"}[t["met"]]
        value = "-" if t["measured"] is None else f"{t['measured']:.3g}"
        lines.append(f"  {t['target']:<58} {value:>8}  {mark}")
    return "\n".join(lines)


def format_markdown(report: dict[str, Any]) -> str:
    """The table and the targets as Markdown (bench.md), ready for docs/performance.md."""
    rate = report["matmul_gflops"]
    lines = [
        f"matmul float32 ({report['config'].get('matmul_size', 2048)}²): "
        f"{rate['before']:.0f} GFLOP/s at the start, "
        f"{rate['after']:.0f} at the end of the run",
        "",
        "| scenario | mode | n | variant | ms | GFLOP/s | % matmul | peak MiB | note |",
        "|---|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in report["rows"]:
        head = f"| {r['scenario']} | {r['mode']} | {r['n']} | {r['variant']} |"
        if "ms" not in r:
            lines.append(f"{head} – | – | – | – | {r.get('skipped', '')} |")
            continue
        peak = "n/a" if r.get("peak_mib") is None else f"{r['peak_mib']:.0f}"
        lines.append(
            f"{head} {r['ms']:.1f} | {r['gflops']:.1f} | {r['pct_matmul']:.0f} | {peak} | |"
        )
    lines += ["", "| target | measured | |", "|---|---:|---|"]
    for t in report["targets"]:
        mark = {True: "met", False: "**missed**", None: "not measured"}[t["met"]]
        value = "–" if t["measured"] is None else f"{t['measured']:.3g}"
        lines.append(f"| {t['target'].strip()} | {value} | {mark} |")
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out: Path) -> list[Path]:
    """bench.json, bench.md and one PNG per scenario: time, % of the matmul rate and peak
    memory vs n (log-log; the % panel is the one to read when the machine is shared)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "bench.md").write_text(format_markdown(report))
    paths = [out / "bench.json", out / "bench.md"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["rows"] if "ms" in r]
    for scenario in sorted({r["scenario"] for r in rows}):
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
        for (metric, label), ax in zip(
            [
                ("ms", "time per step (ms)"),
                ("pct_matmul", "% of the matmul rate (load-robust)"),
                ("peak_mib", "peak extra memory (MiB)"),
            ],
            axes,
            strict=True,
        ):
            for variant in VARIANTS[scenario]:
                for mode, style in (("fwd", "-o"), ("fwd+bwd", "--s")):
                    pts = [
                        (r["n"], r[metric])
                        for r in rows
                        if r["scenario"] == scenario
                        and r["variant"] == variant
                        and r["mode"] == mode
                        and r.get(metric)
                    ]
                    if pts:
                        xs, ys = zip(*sorted(pts), strict=True)
                        ax.plot(xs, ys, style, label=f"{variant} {mode}", markersize=3)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length n")
            ax.set_ylabel(label)
            ax.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=7)
        heads, dim = report["config"].get("heads", 8), report["config"].get("dim", 64)
        fig.suptitle(f"{scenario} attention, B=1 H={heads} d={dim} float32")
        fig.tight_layout()
        path = out / f"bench_{scenario}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


__all__ = ["SuiteConfig", "format_row", "format_targets", "plan_cases", "run_suite", "write_report"]
