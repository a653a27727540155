"""Corpus files: TSV and line-aligned, gzip, bad bytes and malformed lines reported by line."""

import gzip
from pathlib import Path

import pytest

from attnkit.data.corpus import corpus_splits, read_parallel, read_tsv, tokenise

KOR = Path(__file__).parents[3] / "shared" / "data" / "kor-eng" / "kor.txt"


def test_tsv_with_extra_columns_gzip_and_malformed_lines(tmp_path) -> None:
    text = "Hi.\t안녕.\tCC-BY\nno tab here\n\nI run.\t나는 달린다.\tCC-BY\n\t비어\n"
    p = tmp_path / "c.tsv.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write(text)
    ex, report = read_tsv(p)
    assert [e.src for e in ex] == [["Hi."], ["I", "run."]]
    assert ex[1].tgt == ["나는", "달린다."]
    assert [n for n, _ in report.skipped] == [2, 5] and report.kept == 2
    assert "line 2" in report.summary()
    with pytest.raises(ValueError, match=r"c.tsv.gz:2: no tab"):
        read_tsv(p, strict=True)


def test_bad_utf8_names_the_line(tmp_path) -> None:
    p = tmp_path / "bad.tsv"
    p.write_bytes(b"a\tb\n" + b"c\t" + "한".encode("cp949") + b"\n")
    with pytest.raises(ValueError, match=r"bad.tsv:2: not valid UTF-8.*column 3"):
        read_tsv(p)


def test_line_aligned_files_char_tokens_and_length_filter(tmp_path) -> None:
    (tmp_path / "a.en").write_text("a b\nlong one here\nc\n", "utf-8")
    (tmp_path / "a.ko").write_text("가 나\n다\n라\n", "utf-8")
    ex, report = read_parallel(tmp_path / "a.en", tmp_path / "a.ko", max_len=2)
    assert [e.src for e in ex] == [["a", "b"], ["c"]] and report.too_long == 1
    assert tokenise(" 가  나 ", "char") == ["가", " ", "나"]
    (tmp_path / "b.ko").write_text("가\n", "utf-8")
    with pytest.raises(ValueError, match="same number"):
        read_parallel(tmp_path / "a.en", tmp_path / "b.ko")


def test_missing_file_is_clear(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="no such corpus file"):
        read_tsv(tmp_path / "nope.tsv")


def test_real_tatoeba_file() -> None:
    if not KOR.is_file():
        pytest.skip(f"{KOR} absent (shared data is not shipped with the package)")
    ex, report = read_tsv(KOR, max_len=8)
    assert report.lines == 5749 and report.kept > 4000 and not report.skipped
    s = corpus_splits(ex, seed=0)
    assert len(s.train) + len(s.valid) + len(s.test) == len(ex)
