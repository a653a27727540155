"""A text held as compact character ids, read from a UTF-8 file in a streaming pass.

Held as Python characters (one ``str`` per character in a tuple per segment), a text costs
about 30 bytes a character: a 200 MB ``--train-text`` took 6 GB before the first update.
Here each character is one id in the smallest integer type that holds the text's alphabet
(uint8 up to 256 distinct characters, int16 up to 32,768, int32 beyond: 1, 2 or 4 bytes a
character); a batch converts its rows to the vocabulary's int64 ids (tasks/lm.py).

    text = read_ids("book.txt")   # pass 1: the alphabet and length; pass 2: the ids
    text.ids                      # (N,) uint8 | int16 | int32, indices into text.alphabet
    text.alphabet                 # (A,) the characters of the file, in code-point order
    text[a:b]                     # characters a .. b-1: a view, nothing copied

Each pass reads the file in chunks of ``CHUNK`` bytes (a ``.gz`` through gzip), so the peak
beyond the ids is a few chunks; files from ``PROGRESS_BYTES`` on report progress on stderr.

Legend: N characters, A alphabet size.
"""

from __future__ import annotations

import codecs
import gzip
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import Progress, to_stderr
from .vocab import Vocab

CHUNK = 1 << 20  # bytes (or ids) handled at a time: the peak beyond the ids is ~20 MB
PROGRESS_BYTES = 64 << 20  # files this large report each pass's progress on stderr:
PROGRESS_MB = 64  # a line every this many MB read (or every 10 s)
CODES = 0x110000  # Unicode code points, 0 .. 0x10FFFF
ID_TYPES = (np.uint8, np.int16, np.int32)  # the smallest that holds the alphabet is used


def id_dtype(size: int) -> np.dtype[Any]:
    """The smallest integer type of ``ID_TYPES`` whose values cover ids 0 .. size - 1."""
    for t in ID_TYPES:
        if size - 1 <= np.iinfo(t).max:
            return np.dtype(t)
    raise ValueError(f"an alphabet of {size} characters; Unicode has at most {CODES}")


@dataclass(frozen=True, eq=False)
class TextIds:
    """``ids[i]``: the index in ``alphabet`` of character i of the text."""

    ids: np.ndarray  # (N,) uint8 | int16 | int32
    alphabet: tuple[str, ...]  # (A,)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def __getitem__(self, part: slice) -> TextIds:
        """Characters ``part`` (a slice, step 1) as a view of the same ids."""
        if not isinstance(part, slice) or part.step not in (None, 1):
            raise TypeError(f"a TextIds is cut by a slice of step 1, not {part!r}")
        return TextIds(self.ids[part], self.alphabet)

    def chars(self, start: int, stop: int) -> tuple[str, ...]:
        """Characters ``start`` .. ``stop`` - 1 as strings."""
        return tuple(self.alphabet[i] for i in self.ids[start:stop].tolist())

    def counts(self) -> np.ndarray:
        """(A,) int64: how often each character of the alphabet occurs in the text."""
        return count_ids(self.ids, len(self.alphabet))

    def present(self) -> set[str]:
        """The characters that occur (a view's alphabet may hold ones that do not)."""
        return {self.alphabet[i] for i in np.flatnonzero(self.counts()).tolist()}

    def table(self, vocab: Vocab) -> np.ndarray:
        """(A,) int64: the vocabulary id of each character (``<unk>`` for one it lacks)."""
        return np.array([vocab.index.get(c, vocab.unk_id) for c in self.alphabet], np.int64)


def count_ids(ids: np.ndarray, size: int) -> np.ndarray:
    """(size,) int64: how often each id occurs in ``ids``, counted a chunk at a time (numpy's
    bincount makes an int64 copy of what it counts: 8 bytes a character at once)."""
    out = np.zeros(size, dtype=np.int64)
    for s in range(0, len(ids), CHUNK):
        out += np.bincount(ids[s : s + CHUNK], minlength=size)
    return out


def _codes(text: str) -> np.ndarray:
    """(n,) uint32: the code point of each character of ``text``."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _encode(codes: np.ndarray, lookup: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    return lookup[codes].astype(dtype, copy=False)  # (n,)


def from_text(text: str) -> TextIds:
    """A text already in memory (a generated one) as ids."""
    codes = _codes(text)  # (N,)
    used = np.unique(codes)  # (A,) sorted
    lookup = np.zeros(CODES, dtype=np.int32)
    lookup[used] = np.arange(len(used), dtype=np.int32)
    return TextIds(_encode(codes, lookup, id_dtype(len(used))), tuple(map(chr, used.tolist())))


def chunks(path: Path, flag: str, report: Callable[[int], None] | None = None) -> Iterator[str]:
    """The characters of a UTF-8 file (``.gz`` read through gzip) in chunks, a byte-order mark
    dropped, with errors that say what to do: a damaged ``.gz``, bytes that are not UTF-8.
    ``report(n)``: called with the bytes each chunk read."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    decoder = codecs.getincrementaldecoder("utf-8")()
    before, first = 0, True  # bytes read before this chunk
    try:
        with opener(path, "rb") as f:
            while True:
                raw = f.read(CHUNK)
                pending = decoder.getstate()[0]  # bytes of a character cut by the last chunk
                try:
                    text = decoder.decode(raw, final=not raw)
                except UnicodeDecodeError as err:
                    at = before - len(pending) + err.start
                    raise ValueError(
                        f"{flag} {path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} "
                        f"at offset {at}); convert it first, e.g. iconv -f latin1 -t utf-8 "
                        f"{path} > {path.stem}.utf8.txt"
                    ) from None
                before += len(raw)
                if report is not None and raw:
                    report(len(raw))
                if first:
                    text, first = text.removeprefix("\ufeff"), not text  # a BOM is no text
                if text:
                    yield text
                if not raw:
                    return
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:  # truncated, not gzip, garbage
        raise ValueError(
            f"{flag} {path}: a damaged gzip file ({err}); check it with `gzip -t`, or "
            "decompress it and pass the plain file"
        ) from None


def text_file(path: str | Path, flag: str) -> Path:
    """``path`` if it names a file, else one line saying what to name."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{flag} {p}: no such file; name a UTF-8 text file")
    if not p.is_file():
        raise ValueError(f"{flag} {p} is not a file; name a UTF-8 text file")
    return p


def too_short(path: Path, n: int, flag: str) -> ValueError:
    return ValueError(
        f"{flag} {path} holds {n} characters; a language model needs a text of at "
        "least 2 (one to read, one to predict), a few thousand to learn anything"
    )


def _progress(path: Path, what: str) -> Callable[[int], None] | None:
    """A reporter of megabytes read, for a file of at least ``PROGRESS_BYTES``."""
    size = path.stat().st_size
    if size < PROGRESS_BYTES:
        return None
    total = None if path.suffix == ".gz" else -(-size // (1 << 20))  # gzip: bytes unpacked
    bar = Progress(f"{path.name}: {what}", unit="MB", total=total, every=PROGRESS_MB,
                   seconds=10.0, log=to_stderr)  # fmt: skip
    done = [0]

    def report(n: int) -> None:
        done[0] += n
        bar.update(done[0] // (1 << 20) - bar.done)

    return report


def read_ids(path: str | Path, flag: str = "--train-text") -> TextIds:
    """A UTF-8 file as ids, in two streaming passes: its alphabet and length, then its ids
    into an array of exactly N (the id type fixed by the alphabet's size)."""
    p = text_file(path, flag)
    seen = np.zeros(CODES, dtype=bool)
    n = 0
    for text in chunks(p, flag, _progress(p, "alphabet")):
        codes = _codes(text)  # (n_chunk,)
        seen[codes] = True
        n += len(codes)
    if n < 2:
        raise too_short(p, n, flag)
    used = np.flatnonzero(seen)  # (A,) sorted code points
    lookup = np.zeros(CODES, dtype=np.int32)
    lookup[used] = np.arange(len(used), dtype=np.int32)
    dtype = id_dtype(len(used))
    ids = np.empty(n, dtype=dtype)  # (N,)
    at = 0
    for text in chunks(p, flag, _progress(p, "ids")):
        part = _encode(_codes(text), lookup, dtype)
        if at + len(part) > n:
            raise ValueError(f"{flag} {p} changed while it was read; read it again")
        ids[at : at + len(part)] = part
        at += len(part)
    if at != n:
        raise ValueError(f"{flag} {p} changed while it was read; read it again")
    return TextIds(ids, tuple(map(chr, used.tolist())))


__all__ = [
    "CHUNK",
    "ID_TYPES",
    "PROGRESS_BYTES",
    "PROGRESS_MB",
    "TextIds",
    "chunks",
    "count_ids",
    "from_text",
    "id_dtype",
    "read_ids",
    "text_file",
    "too_short",
]
