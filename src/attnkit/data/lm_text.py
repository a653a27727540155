"""Text for language modelling (``--task lm``): any UTF-8 file a user names, or a generated
text, read as characters and cut into consecutive segments of ``segment`` + 1 characters.

    attnkit train --task lm --train-text book.txt [--valid-text held.txt] --segment 64

Segment k of a split covers characters k·L .. k·L + L of its text (L = ``segment``): its
first L characters are the inputs, its last L the targets (the next character of each), so
consecutive segments overlap by one character and every character but the split's first is
predicted exactly once. Without ``--valid-text`` the last 5% of the training file is held
out as the validation text; the test split is the validation text (a language model is
scored by ``attnkit evaluate`` on held-out text, and this command reads no third file).

The generated text (``--task lm`` with no file) is records of short sentences in which a
name given at the start of a record comes back up to a few hundred characters later
("... ask kovat."): predicting it takes context beyond a short segment.
"""

from __future__ import annotations

import gzip
import random
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .example import Splits

DEFAULT_SEGMENT = 64
HELD_OUT = 0.05  # share of the training file held out as validation text, from its end


@dataclass(frozen=True)
class Segment:
    """``tokens``: up to L + 1 characters (inputs ``tokens[:-1]``, targets ``tokens[1:]``);
    ``start``: where its first character stands in its split's text."""

    tokens: tuple[str, ...]
    start: int


def read_text(path: str | Path, flag: str = "--train-text") -> str:
    """The text of a UTF-8 file (``.gz`` read through gzip), with errors that say what to do:
    a missing file, a folder, an empty file, a damaged ``.gz``, bytes that are not UTF-8."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{flag} {p}: no such file; name a UTF-8 text file")
    if not p.is_file():
        raise ValueError(f"{flag} {p} is not a file; name a UTF-8 text file")
    try:
        raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:  # truncated, not gzip, garbage
        raise ValueError(
            f"{flag} {p}: a damaged gzip file ({err}); check it with `gzip -t`, or "
            "decompress it and pass the plain file"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{flag} {p} is not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start}); "
            f"convert it first, e.g. iconv -f latin1 -t utf-8 {p} > {p.stem}.utf8.txt"
        ) from None
    text = text.removeprefix("\ufeff")  # a byte-order mark is not part of the text
    if len(text) < 2:
        raise ValueError(
            f"{flag} {p} holds {len(text)} characters; a language model needs a text of at "
            "least 2 (one to read, one to predict), a few thousand to learn anything"
        )
    return text


def segments(text: str, length: int) -> list[Segment]:
    """``text`` cut into consecutive segments of ``length`` inputs (the last may be shorter):
    segment k is characters k·L .. k·L + L."""
    if length < 1:
        raise ValueError(f"--segment {length}; it must be at least 1")
    return [
        Segment(tuple(text[s : s + length + 1]), s) for s in range(0, len(text) - 1, length)
    ]


def hold_out(text: str, share: float = HELD_OUT) -> tuple[str, str]:
    """(the first 1 - share of ``text``, its last ``share``), cut at a character; each part
    keeps at least 2 characters."""
    cut = min(max(2, round(len(text) * (1 - share))), len(text) - 2)
    if cut < 2:
        raise ValueError(
            f"the training text has {len(text)} characters: too few to hold out validation "
            "text from; pass a longer file or --valid-text FILE"
        )
    return text[:cut], text[cut:]


SUBJECTS = ("the cat", "a dog", "the old man", "my sister", "the bird", "a child", "the king")
VERBS = ("sees", "likes", "finds", "helps", "calls", "follows", "meets")
OBJECTS = ("the house", "a red ball", "the river", "her friend", "the green door", "a song")


def generate_text(chars: int, seed: int) -> str:
    """A text of ``chars`` characters: records that start "this is NAME." (NAME five random
    letters), then sentences of a small grammar, and now and then "ask NAME." — the name
    comes back 30 to 300 characters after it was given."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5))
        record = [f"this is {name}."]
        for _ in range(rng.randint(3, 12)):
            if rng.random() < 0.3:
                record.append(f"ask {name}.")
            else:
                record.append(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}.")
        line = " ".join(record) + "\n"
        out.append(line)
        size += len(line)
    return "".join(out)[:chars]


GENERATED_SIZES = (100_000, 5_000, 5_000)  # characters of the generated train/valid/test text


def lm_texts(spec: dict[str, Any]) -> tuple[str, str, str]:
    """(train, valid, test) text of a ``task: lm`` spec: its files, or generated text."""
    train_file, valid_file = spec.get("train_text"), spec.get("valid_text")
    if valid_file and not train_file:
        raise ValueError("--valid-text goes with --train-text FILE (the text to train on)")
    if train_file:
        train = read_text(train_file, "--train-text")
        if valid_file:
            valid = read_text(valid_file, "--valid-text")
        else:
            train, valid = hold_out(train)
        return train, valid, valid
    seed = int(spec.get("task_seed") or 0)
    sizes = [spec.get(k) or d for k, d in zip(("train_size", "valid_size", "test_size"),
                                              GENERATED_SIZES, strict=True)]  # fmt: skip
    if min(sizes) < 2:
        raise ValueError(f"--train/valid/test-size {sizes}: each text needs at least 2 characters")
    return tuple(generate_text(n, seed * 3 + i) for i, n in enumerate(sizes))  # type: ignore[return-value]


def lm_splits(spec: dict[str, Any]) -> Splits[Segment]:
    """The segments of the train, valid and test text of a ``task: lm`` spec."""
    length = int(spec.get("segment") or DEFAULT_SEGMENT)
    train, valid, test = lm_texts(spec)
    return Splits(segments(train, length), segments(valid, length), segments(test, length))


def lm_task(sizes: tuple[int, int, int], seed: int, **_: int) -> Splits[Segment]:
    """``load_task("lm")``: the generated text, cut into segments of the default length."""
    names = ("train_size", "valid_size", "test_size")
    return lm_splits({"task": "lm", "task_seed": seed, **dict(zip(names, sizes, strict=True))})


__all__ = [
    "DEFAULT_SEGMENT",
    "GENERATED_SIZES",
    "HELD_OUT",
    "Segment",
    "generate_text",
    "hold_out",
    "lm_splits",
    "lm_task",
    "lm_texts",
    "read_text",
    "segments",
]
