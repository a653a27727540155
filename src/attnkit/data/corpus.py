"""Parallel corpora from files: a TSV (source, target, optional extra columns; the
Tatoeba/manythings format) or two line-aligned files; ``.gz`` allowed. Strict UTF-8 with the
line number of a bad byte; malformed lines are skipped and counted, or fail, by option."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from .example import Example, Splits, T
from .tasks import split
from .tokenisers import Tokeniser, tokenisers_of


@dataclass
class ReadReport:
    lines: int = 0
    kept: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (line number, why)
    too_long: int = 0
    max_len: int = 0  # the length limit applied (0 = none)

    def summary(self) -> str:
        text = f"{self.kept} pairs kept of {self.lines} lines"
        if self.skipped:
            first = "; ".join(f"line {n}: {why}" for n, why in self.skipped[:3])
            more = "; ..." if len(self.skipped) > 3 else ""
            text += f"; {len(self.skipped)} malformed lines skipped ({first}{more})"
        if self.too_long:
            text += f"; {self.too_long} pairs over --max-len {self.max_len} tokens dropped"
        return text


def open_binary(path: str | Path) -> IO[bytes]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such corpus file: {p}")
    return cast(IO[bytes], gzip.open(p, "rb") if p.suffix == ".gz" else open(p, "rb"))


def read_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, text without the newline); a bad UTF-8 byte raises ValueError
    naming the file, line and column; a damaged .gz file raises ValueError naming the file."""
    n = 0
    try:
        with open_binary(path) as f:
            for n, raw in enumerate(f, start=1):
                yield n, decode_line(raw, n, path)
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise ValueError(
            f"{path}: a damaged gzip file ({err}"
            + (f", after line {n}" if n else "")
            + "); "
            "check it with `gzip -t`, or decompress it and pass the plain file"
        ) from None


def decode_line(raw: bytes, n: int, path: str | Path) -> str:
    """Line ``n`` of ``path`` as text: strict UTF-8 (an error names the line and column),
    without its newline and, on line 1, a byte-order mark."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path}:{n}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at column "
            f"{err.start + 1}); convert it to UTF-8, e.g. `iconv -f cp949 -t utf-8"
            + ("`" if str(path).startswith("<") else f" {Path(path).name}`")
        ) from None
    if n == 1:
        text = text.removeprefix("\ufeff")
    return text.rstrip("\r\n")


def tokenise(text: str, how: str) -> list[str]:
    """Whitespace words ("word") or characters ("char"); subwords need a trained model (see
    tokenisers.py)."""
    return _pair(how)[0].encode(text)


Pair = tuple[Tokeniser, Tokeniser]  # (source, target)


def _pair(tokeniser: str | Pair) -> Pair:
    """A (source, target) pair, or a kind ("word", "char") named as in a data spec."""
    return tokenisers_of({"tokenise": tokeniser}) if isinstance(tokeniser, str) else tokeniser


def _bad(report: ReadReport, n: int, why: str, strict: bool, path: str | Path) -> None:
    if strict:
        raise ValueError(f"{path}:{n}: {why} (without --strict such lines are skipped and counted)")
    report.skipped.append((n, why))


@dataclass(frozen=True)
class RawPair:
    line: int  # 1-based line number in the source file
    src: str
    tgt: str


def raw_tsv(path: str | Path, *, strict: bool = False) -> tuple[list[RawPair], ReadReport]:
    """Column 1 source, column 2 target; further columns (attribution) are ignored."""
    report, out = ReadReport(), []
    for n, line in read_lines(path):
        report.lines += 1
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 2:
            _bad(report, n, "no tab: expected source<TAB>target", strict, path)
            continue
        if not cols[0].strip() or not cols[1].strip():
            _bad(report, n, "empty source or target", strict, path)
            continue
        out.append(RawPair(n, cols[0], cols[1]))
    return out, report


def raw_parallel(
    src_path: str | Path, tgt_path: str | Path, *, strict: bool = False
) -> tuple[list[RawPair], ReadReport]:
    """Two line-aligned files: line i of one translates line i of the other."""
    src_lines = list(read_lines(src_path))
    tgt_lines = list(read_lines(tgt_path))
    if len(src_lines) != len(tgt_lines):
        raise ValueError(
            f"{src_path} has {len(src_lines)} lines but {tgt_path} has "
            f"{len(tgt_lines)}; line-aligned files must have the same number"
        )
    report, out = ReadReport(), []
    for (n, s), (_, t) in zip(src_lines, tgt_lines, strict=True):
        report.lines += 1
        if not s.strip() or not t.strip():
            if s.strip() or t.strip():
                _bad(report, n, "empty source or target", strict, src_path)
            continue
        out.append(RawPair(n, s, t))
    return out, report


def tokenise_pairs(
    raw: list[RawPair], tokeniser: str | Pair, report: ReadReport, *, max_len: int = 0
) -> list[Example]:
    """Examples (tokens, with the raw target kept as the reference text); pairs with a side
    longer than ``max_len`` tokens are dropped and counted (0 = keep all)."""
    src_tok, tgt_tok = _pair(tokeniser)
    report.max_len = max_len
    out = []
    for r in raw:
        ex = Example(src_tok.encode(r.src), tgt_tok.encode(r.tgt), ref=r.tgt.strip())
        if max_len and (len(ex.src) > max_len or len(ex.tgt) > max_len):
            report.too_long += 1
            continue
        out.append(ex)
    report.kept = len(out)
    return out


def read_tsv(
    path: str | Path,
    *,
    tokeniser: str | Pair = "word",
    max_len: int = 0,
    strict: bool = False,
) -> tuple[list[Example], ReadReport]:
    """Column 1 source, column 2 target; further columns (attribution) are ignored."""
    raw, report = raw_tsv(path, strict=strict)
    return tokenise_pairs(raw, tokeniser, report, max_len=max_len), report


def read_parallel(
    src_path: str | Path,
    tgt_path: str | Path,
    *,
    tokeniser: str | Pair = "word",
    max_len: int = 0,
    strict: bool = False,
) -> tuple[list[Example], ReadReport]:
    """Two line-aligned files: line i of one translates line i of the other."""
    raw, report = raw_parallel(src_path, tgt_path, strict=strict)
    return tokenise_pairs(raw, tokeniser, report, max_len=max_len), report


def corpus_splits(
    examples: list[T], *, valid: float = 0.05, test: float = 0.05, seed: int = 0
) -> Splits[T]:
    """Shuffle with ``seed`` and hold out fractions for valid and test (at least one each)."""
    if not (0 <= valid < 1 and 0 <= test < 1 and valid + test < 1):
        raise ValueError(f"valid={valid}, test={test}: fractions in [0, 1) that sum below 1")
    n = len(examples)
    nv, nt = max(1, round(n * valid)), max(1, round(n * test))
    if n - nv - nt < 1:
        raise ValueError(f"only {n} pairs: too few to hold out valid and test sets")
    return split(examples, (n - nv - nt, nv, nt), seed)


__all__ = [
    "RawPair",
    "decode_line",
    "ReadReport",
    "corpus_splits",
    "raw_parallel",
    "raw_tsv",
    "read_lines",
    "read_parallel",
    "read_tsv",
    "tokenise",
    "tokenise_pairs",
]
