"""scripts/decode_bench.py: the three caches decode the same tokens, the sliding cache's
memory stays bounded, and the table reads its rows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("decode_bench", ROOT / "scripts" / "decode_bench.py")
assert _spec is not None and _spec.loader is not None
decode_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(decode_bench)

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_the_caches_decode_alike_and_the_table_reads_the_rows() -> None:
    rows = decode_bench.measure([12], repeats=1, kv_heads=2, log=lambda line: None)
    (row,) = rows
    assert row["same tokens (cat, KVCache)"] is True
    assert row["KVCache cache MiB"] == pytest.approx(row["torch.cat cache MiB"])
    lines = decode_bench.table(rows)
    assert lines[0].startswith("| tokens | torch.cat tok/s | KVCache tok/s |")
    cells = lines[2].strip("| ").split(" | ")
    assert cells[0] == "12" and cells[-1] == "yes"
    ratio = row["KVCache tok/s"] / row["torch.cat tok/s"]
    assert cells[4] == f"{ratio:.2f}"
