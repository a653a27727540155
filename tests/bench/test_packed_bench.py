"""scripts/packed_bench.py: every arm runs on a tiny packed row, the by-document context
equals the floor's, the dense arm stops at --dense-max, and the table reads its rows."""

from __future__ import annotations

import math

import pytest
from _scripts import load_script

packed_bench = load_script("packed_bench")

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_the_arms_agree_and_the_table_reads_the_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packed_bench, "WINDOW", 3)
    rows = packed_bench.measure([32, 64], [16], repeats=1, dense_max=32, heads=1, dim=4,
                                log=lambda line: None)  # fmt: skip
    assert [(r["n"], r["mask"]) for r in rows] == [
        (32, "causal"), (32, "window 3"), (64, "causal"), (64, "window 3")]
    for r in rows:
        assert r["max |by document - floor|"] < 1e-5
        assert ("dense fwd s" in r) == (r["n"] <= 32)
        assert all(r[f"{a} fwd+bwd s"] > 0 for a in ("by document", "floor"))
    lines = packed_bench.table(rows)
    assert lines[0].startswith("| n | doc | mask | dense fwd ms | by document fwd ms |")
    first, last = (line.strip("| ").split(" | ") for line in (lines[2], lines[-1]))
    assert first[:3] == ["32", "16", "causal"] and last[3] == "—"
    ratio = rows[0]["dense fwd s"] / rows[0]["by document fwd s"]
    assert math.isclose(float(first[6]), ratio, rel_tol=0.06, abs_tol=0.051)


def test_the_window_floor_is_the_band_inside_each_document() -> None:
    import torch

    from tests._reference import sdpa_ref

    q, k, v = (torch.randn(1, 32, 4, dtype=torch.float64) for _ in range(3))
    i = torch.arange(32)
    allowed = (i[:, None] // 16 == i[None, :] // 16) & (i[:, None] >= i[None, :]) & (
        i[:, None] - i[None, :] <= packed_bench.WINDOW)  # fmt: skip
    out = packed_bench.floor(q, k, v, 16, "window")
    torch.testing.assert_close(out, sdpa_ref(q, k, v, allowed)[0], rtol=1e-10, atol=1e-10)
