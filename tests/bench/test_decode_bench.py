"""scripts/decode_bench.py: every full cache (torch.cat, KVCache, Hugging Face's DynamicCache
and StaticCache) decodes the same tokens, the sliding cache's memory stays bounded, the
Hugging Face arms are skipped with one line without transformers, and the table reads its
rows."""

from __future__ import annotations

import pytest
from _scripts import load_script

decode_bench = load_script("decode_bench")

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_the_caches_decode_alike_and_the_table_reads_the_rows() -> None:
    pytest.importorskip("transformers")
    rows = decode_bench.measure([12], repeats=1, kv_heads=2, log=lambda line: None, chunk=5)
    (row,) = rows
    assert row["same tokens"] is True
    for arm in ("HF DynamicCache", "HF StaticCache", decode_bench.SLIDING):
        assert row[f"{arm} tok/s"] > 0
    mib = row["KVCache cache MiB"]
    assert row["torch.cat cache MiB"] == pytest.approx(mib)
    assert row["HF DynamicCache cache MiB"] == pytest.approx(mib)
    assert row["HF StaticCache cache MiB"] == pytest.approx(mib)  # sized to the length
    lines = decode_bench.table(rows)
    assert lines[0].startswith(
        "| tokens | torch.cat tok/s | KVCache tok/s | KVCache window 256+4 tok/s | "
        "HF DynamicCache tok/s | HF StaticCache tok/s | KVCache / torch.cat | "
        "KVCache / HF DynamicCache | KVCache / HF StaticCache |"
    )
    cells = lines[2].strip("| ").split(" | ")
    assert cells[0] == "12" and cells[-1] == "yes"
    for i, arm in zip((6, 7, 8), ("torch.cat", "HF DynamicCache", "HF StaticCache"),
                      strict=True):
        assert cells[i] == f"{row['KVCache tok/s'] / row[f'{arm} tok/s']:.2f}"


def test_a_different_token_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """``same tokens`` can say no: an arm that decodes differently is caught."""
    pytest.importorskip("transformers")
    advance = decode_bench.Decoder.advance

    def off_by_one(self, n: int) -> tuple[float, float]:
        out = advance(self, n)
        if self.arm == "HF StaticCache":
            self.tokens[-1] += 1
        return out

    monkeypatch.setattr(decode_bench.Decoder, "advance", off_by_one)
    (row,) = decode_bench.measure([3], repeats=1, kv_heads=None, log=lambda line: None)
    assert row["same tokens"] is False


def test_without_transformers_the_hf_arms_are_skipped_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(decode_bench, "DynamicCache", None)
    said: list[str] = []
    assert decode_bench.arms(said.append) == decode_bench.ATTNKIT_ARMS
    assert len(said) == 1 and "transformers is not importable" in said[0]
    (row,) = decode_bench.measure([4], repeats=1, kv_heads=None, log=said.append)
    assert row["same tokens"] is True and "HF StaticCache tok/s" not in row
    assert decode_bench.table([row])[0].endswith("KVCache window 256+4 MiB | same tokens |")
