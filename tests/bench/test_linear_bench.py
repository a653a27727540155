"""The linear-attention bench scenario: its slope and crossover arithmetic on known values,
and a tiny in-process run that measures every variant."""

import math

import pytest

from attnkit.bench.linear import LinearBench, crossover, format_linear, run_linear_bench, slope

pytestmark = pytest.mark.usefixtures("one_thread")


def test_slope_recovers_a_power_law() -> None:
    ns = [1024, 2048, 4096, 8192]
    assert slope(ns, [3e-6 * n**2 for n in ns]) == pytest.approx(2.0)
    assert slope(ns, [5.0 * n for n in ns]) == pytest.approx(1.0)
    assert slope([1024], [1.0]) is None


def test_crossover_interpolates_log_log() -> None:
    """linear ∝ n, sdpa ∝ n²/1000: equal at n = 1000·c; measured at 512 .. 4096 around it."""
    rows = [{"n": n, "linear": {"ms": 2.0 * n}, "sdpa": {"ms": n * n / 1000}}
            for n in (512, 1024, 2048, 4096)]  # fmt: skip
    assert crossover(rows, "linear", "sdpa") == pytest.approx(2000, rel=1e-9)
    assert crossover(rows, "sdpa", "linear") == pytest.approx(512)  # from the first size on
    never = [{"n": n, "linear": {"ms": 2.0}, "sdpa": {"ms": 1.0}} for n in (1, 2)]
    assert crossover(never, "linear", "sdpa") is None
    assert math.isfinite(crossover(rows, "linear", "sdpa"))


def test_a_tiny_run_measures_every_variant() -> None:
    cfg = LinearBench(sizes=[64, 128], heads=1, head_dim=8, window=8, repeats=1)
    report = run_linear_bench(cfg, log=lambda line: None)
    assert [r["n"] for r in report["rows"]] == [64, 128]
    for row in report["rows"]:
        assert all(row[v]["ms"] > 0 for v in ("linear", "sdpa", "sliding"))
    assert report["cpu"] and "linear faster than SDPA" in format_linear(report)
