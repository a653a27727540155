"""The bench's figures from hand-made result rows: every speed-up, ratio and % of the matmul
rate against values worked out by hand (no timing is run, so each one is exact)."""

from types import SimpleNamespace
from typing import Any

import pytest

from attnkit.bench import measure as measure_mod
from attnkit.bench.suite import format_targets, targets
from attnkit.bench.variants import Case


def row(variant: str, n: int, ms: float, pct: float, **kw: Any) -> dict[str, Any]:
    """One measured row as run_suite writes it (local fwd unless told)."""
    return {
        "variant": variant,
        "scenario": kw.pop("scenario", "local"),
        "n": n,
        "mode": kw.pop("mode", "fwd"),
        "ms": ms,
        "pct_matmul": pct,
        "peak_mib": kw.pop("peak_mib", None),
        **kw,
    }


ROWS = [
    row("attnkit", 16384, 10.0, 40.0, peak_mib=100.0),
    row("sdpa-band", 16384, 250.0, 1.6, peak_mib=1000.0),
    row("local-attention", 16384, 20.0, 16.0),
    row("attnkit", 16384, 30.0, 45.0, mode="fwd+bwd"),
    row("local-attention", 16384, 60.0, 15.0, mode="fwd+bwd"),
    row("attnkit", 32768, 21.0, 40.0),
    row("attnkit", 65536, 50.0, 40.0, peak_mib=500.0),
    row("attnkit", 65536, 150.0, 45.0, mode="fwd+bwd", peak_mib=1000.0),
    # global: attnkit / SDPA time per n and mode, and the same from the % of the matmul
    row("attnkit", 1024, 11.0, 50.0, scenario="global"),
    row("sdpa", 1024, 10.0, 55.0, scenario="global"),
    row("attnkit", 2048, 40.0, 50.0, scenario="global"),
    row("sdpa", 2048, 50.0, 40.0, scenario="global"),
    row("attnkit", 1024, 30.0, 60.0, scenario="global", mode="fwd+bwd"),
    row("sdpa", 1024, 30.0, 66.0, scenario="global", mode="fwd+bwd"),
    row("flex", 16384, 20.0, 20.0),
]

# (measured, met), in the order targets() lists them; each value worked out by hand
EXPECTED = [
    (250 / 10, True),  # SDPA+band time / attnkit time = 25x >= 20
    (40 / 1.6, True),  # %mm(attnkit) / %mm(SDPA+band) = 25 >= 20
    (100 / 1000, True),  # peak memory ratio 0.1 <= 1/8
    (20 / 10, True),  # local-attention / attnkit, fwd: 2 >= 1.5
    (40 / 16, True),  # load-corrected: %mm(attnkit) / %mm(local-attention) = 2.5
    (60 / 30, True),  # fwd+bwd: 2 >= 1.5
    (45 / 15, True),  # load-corrected fwd+bwd: 3
    (40.0, True),  # % of the matmul rate, as measured: 40 >= 40
    (21 / 10, True),  # time(32768) / time(16384) = 2.1 in [1.8, 2.2]
    (2 * 40 / 40, True),  # 2 x %mm(16384) / %mm(32768) = 2.0
    (500 + 3 * 65536 * 8 * 64 * 4 / 2**20, True),  # 500 + 384 MiB of inputs < 2048
    (1000 + 2 * 384, True),  # fwd+bwd: inputs and their gradients, 1768 < 2048
    (1.0, True),  # median of 11/10, 40/50, 30/30 = median(1.1, 0.8, 1.0)
    (1.1, False),  # median of 55/50, 40/50, 66/60 = median(1.1, 0.8, 1.1)
    (60 / 30, False),  # issue 18: local-attention / attnkit fwd+bwd = 2 < 3
    (40.0, False),  # forward 40% < 50
    (2 * 40 * 10 / (30 - 10), True),  # backward alone: twice the FLOPs in 20 ms: 40% >= 40
    (10 / 20, True),  # attnkit / FlexAttention forward time 0.5 <= 0.8
]


def test_targets_from_hand_made_rows() -> None:
    got = targets(ROWS)
    assert len(got) == len(EXPECTED)
    for t, (value, met) in zip(got, EXPECTED, strict=True):
        assert t["measured"] == pytest.approx(value), t["target"]
        assert t["met"] is met, t["target"]


def test_speed_up_is_the_other_variants_time_over_ours() -> None:
    """A slower competitor is a speed-up above one; a faster one, below."""
    slow = [row("attnkit", 16384, 1.0, 50.0), row("sdpa-band", 16384, 40.0, 1.25)]
    fast = [row("attnkit", 16384, 40.0, 1.25), row("sdpa-band", 16384, 1.0, 50.0)]
    assert targets(slow)[0]["measured"] == pytest.approx(40.0)
    assert targets(slow)[0]["met"] is True
    assert targets(slow)[1]["measured"] == pytest.approx(40.0)
    assert targets(fast)[0]["measured"] == pytest.approx(1 / 40)
    assert targets(fast)[0]["met"] is False


def test_unmeasured_targets_are_none_and_say_so() -> None:
    got = targets([])
    assert all(t["measured"] is None and t["met"] is None for t in got)
    assert "not measured" in format_targets({"targets": got})


def test_measure_pct_of_matmul_from_a_fake_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """measure(): a step of 0.5 s beside a matmul of 1e9 FLOPs in 0.1 s (10 GFLOP/s)."""
    clock = [0.0]

    def advance(seconds: float) -> Any:
        def step() -> None:
            clock[0] += seconds

        return step

    monkeypatch.setattr(measure_mod, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(measure_mod, "make_step", lambda case: advance(0.5))
    monkeypatch.setattr(measure_mod, "_matmul_step", lambda size, device: (advance(0.1), 1e9))
    monkeypatch.setattr(measure_mod, "peak_extra_mib", lambda step, device: None)
    case = Case("attnkit", "local", 1024, False, radius=256)
    flops = 4 * 1024 * 513 * 64 * 8  # 4·n·W·d·H
    got = measure_mod.measure(case, warmup=1, repeats=3)
    assert got["ms"] == pytest.approx(500.0)
    assert got["times_ms"] == pytest.approx([500.0] * 3)
    assert got["gflops"] == pytest.approx(flops / 0.5 / 1e9)
    assert got["matmul_gflops"] == pytest.approx(10.0)
    assert got["pct_matmul"] == pytest.approx(100 * (flops / 0.5) / 1e10)  # ≈ 21.5 %


def test_additive_targets_per_n_and_mode() -> None:
    """Issue 18 part 5: attnkit's time within 1.1x of the naive form's and its peak at most a
    tenth, for every n and mode measured; a missing naive row is "not measured"."""
    rows = [
        row("attnkit", 512, 200.0, 1.0, scenario="additive", peak_mib=137.0),
        row("naive", 512, 300.0, 1.0, scenario="additive", peak_mib=1026.0),
        row("attnkit", 512, 700.0, 1.0, scenario="additive", mode="fwd+bwd", peak_mib=100.0),
        row("naive", 512, 600.0, 1.0, scenario="additive", mode="fwd+bwd", peak_mib=1500.0),
        row("attnkit", 4096, 9000.0, 1.0, scenario="additive", peak_mib=900.0),
    ]
    got = {t["target"]: (t["measured"], t["met"]) for t in targets(rows)}
    time, mem = "time <= 1.1x the naive form's", "<= 1/10 of its peak memory (ratio)"
    assert {k: v for k, v in got.items() if "additive" in k} == {
        f"additive n=512 fwd: {time}": (pytest.approx(200 / 300), True),
        f"additive n=512 fwd: {mem}": (pytest.approx(137 / 1026), False),
        f"additive n=512 fwd+bwd: {time}": (pytest.approx(700 / 600), False),
        f"additive n=512 fwd+bwd: {mem}": (pytest.approx(100 / 1500), True),
        f"additive n=4096 fwd: {time}": (None, None),
        f"additive n=4096 fwd: {mem}": (None, None),
    }
