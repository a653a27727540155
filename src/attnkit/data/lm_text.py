"""Text for language modelling (``--task lm``): any UTF-8 file a user names, or a generated
text, read as characters and cut into consecutive segments of ``segment`` + 1 characters.

    attnkit train --task lm --train-text book.txt [--valid-text held.txt] --segment 64

Segment k of a split covers characters k·L .. k·L + L of its text (L = ``segment``): its
first L characters are the inputs, its last L the targets (the next character of each), so
consecutive segments overlap by one character and every character but the split's first is
predicted exactly once. Without ``--valid-text`` the last 5% of the training file is held
out as the validation text; the test split is the validation text (a language model is
scored by ``attnkit evaluate`` on held-out text, and this command reads no third file).

A file is held as compact character ids (data/text_ids.py; ``Segments`` makes a segment on
demand), and the validation text's characters are checked against the training text's: a
character it lacks reads as ``<unk>``, so their share is said, and above ``UNKNOWN_LIMIT``
refused (``check_alphabet``).

The generated text (``--task lm`` with no file) is records of short sentences in which a
name given at the start of a record comes back up to a few hundred characters later
("... ask kovat."): predicting it takes context beyond a short segment.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .._progress import to_stderr
from .example import Splits
from .lm_packed import train_split
from .lm_segments import Segment, Segments
from .task import TASKS, Task
from .text_ids import TextIds, chunks, from_text, read_ids, text_file, too_short

DEFAULT_SEGMENT = 64
HELD_OUT = 0.05  # share of the training file held out as validation text, from its end
UNKNOWN_LIMIT = 0.01  # share of validation characters absent from the training text refused
T = TypeVar("T", str, TextIds)


def read_text(path: str | Path, flag: str = "--train-text") -> str:
    """The text of a UTF-8 file (``.gz`` read through gzip), with errors that say what to do:
    a missing file, a folder, an empty file, a damaged ``.gz``, bytes that are not UTF-8.
    Training reads files as ids instead (``read_ids``: 1-2 bytes a character, not 30)."""
    p = text_file(path, flag)
    text = "".join(chunks(p, flag))
    if len(text) < 2:
        raise too_short(p, len(text), flag)
    return text


def segments(text: str, length: int) -> list[Segment]:
    """``text`` cut into consecutive segments of ``length`` inputs (the last may be shorter):
    segment k is characters k·L .. k·L + L."""
    if length < 1:
        raise ValueError(f"--segment {length}; it must be at least 1")
    return [
        Segment(tuple(text[s : s + length + 1]), s) for s in range(0, len(text) - 1, length)
    ]


def hold_out(text: T, share: float = HELD_OUT) -> tuple[T, T]:
    """(the first 1 - share of ``text``, its last ``share``), cut at a character; each part
    keeps at least 2 characters. ``text``: a string, or a ``TextIds`` (cut as views)."""
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


ASKS = 0.3  # the chance that a sentence of a record asks its name (the default text)


def generate_text(chars: int, seed: int, asks: float = ASKS) -> str:
    """A text of ``chars`` characters: records that start "this is NAME." (NAME five random
    letters), then 3 to 12 sentences, each "ask NAME." with chance ``asks``, else a sentence
    of a small grammar: the name comes back 30 to 300 characters after it was given. A
    larger ``asks`` makes the copied name a larger share of the text."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5))
        record = [f"this is {name}."]
        for _ in range(rng.randint(3, 12)):
            if rng.random() < asks:
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
    asks = float(spec.get("asks") or ASKS)
    return tuple(generate_text(n, seed * 3 + i, asks) for i, n in enumerate(sizes))  # type: ignore[return-value]


def check_alphabet(train: TextIds, valid: TextIds, what: str,
                   log: Callable[[str], None] = to_stderr) -> None:  # fmt: skip
    """The validation text's characters that the training text lacks are read as ``<unk>``
    and their loss picks ``best/``: their count and share go in one warning line; beyond
    ``UNKNOWN_LIMIT`` of its characters the text is refused (a ValueError)."""
    known = train.present()
    counts = valid.counts()  # (A_valid,)
    unknown = sorted(((int(c), ch) for ch, c in zip(valid.alphabet, counts.tolist(), strict=True)
                      if c and ch not in known), reverse=True)  # fmt: skip
    n = sum(c for c, _ in unknown)
    if not n:
        return
    share = n / len(valid)
    seen = ", ".join(repr(ch) for _, ch in unknown[:3])
    said = f"{n:,} of its {len(valid):,} characters ({share:.2%}; e.g. {seen}) are not in the " \
           "training text"  # fmt: skip
    if share > UNKNOWN_LIMIT:
        raise ValueError(
            f"{what}: {said}: it does not share the training text's alphabet, and its loss (which "
            "picks best/) would score <unk> guesses; pass a validation text in the training "
            "text's language and script, or train on a text that holds its characters (more "
            f"than {UNKNOWN_LIMIT:.0%} unknown characters is refused)"
        )
    log(f"warning: {what}: {said}; they are read as <unk>")


def lm_ids(spec: dict[str, Any]) -> tuple[TextIds, TextIds]:
    """(train, valid) text of a ``task: lm`` spec as ids: its files read in streaming passes,
    the validation text's alphabet checked against the training text's (``check_alphabet``),
    or the generated texts (whose test text is its third; see ``lm_splits``)."""
    train_file, valid_file = spec.get("train_text"), spec.get("valid_text")
    if valid_file and not train_file:
        raise ValueError("--valid-text goes with --train-text FILE (the text to train on)")
    if not train_file:
        raise ValueError("lm_ids reads files; generated text is read by lm_texts")
    train = read_ids(train_file, "--train-text")
    if valid_file:
        valid, what = read_ids(valid_file, "--valid-text"), f"--valid-text {valid_file}"
    else:
        (train, valid), what = hold_out(train), f"the held-out end of --train-text {train_file}"
    check_alphabet(train, valid, what)
    return train, valid


def lm_splits(spec: dict[str, Any]) -> Splits[Segment]:
    """The segments of the train, valid and test text of a ``task: lm`` spec; a file's are
    held as compact ids (``Segments``), the test split is the validation split. With
    ``pack`` the training split is packed documents (data/lm_packed.py): a file's paragraphs,
    the generated text's lines."""
    length = int(spec.get("segment") or DEFAULT_SEGMENT)
    pack = bool(spec.get("pack"))
    if spec.get("train_text") or spec.get("valid_text"):
        train, valid = lm_ids(spec)
        held = Segments(valid, length)
        return Splits(train_split(train, length, pack, "paragraph"), held, held)  # type: ignore[arg-type]
    texts = [Segments(from_text(t), length) for t in lm_texts(spec)]
    texts[0] = train_split(texts[0].text, length, pack, "line")  # type: ignore[assignment]
    return Splits(*texts)  # type: ignore[arg-type]


def lm_task(sizes: tuple[int, int, int], seed: int, **_: int) -> Splits[Segment]:
    """``load_task("lm")``: the generated text, cut into segments of the default length."""
    names = ("train_size", "valid_size", "test_size")
    return lm_splits({"task": "lm", "task_seed": seed, **dict(zip(names, sizes, strict=True))})


# characters of generated text (or --train-text FILE)
TASKS.register(Task("lm", lm_task, GENERATED_SIZES, family="lm"))


__all__ = [
    "DEFAULT_SEGMENT",
    "GENERATED_SIZES",
    "HELD_OUT",
    "UNKNOWN_LIMIT",
    "Segment",
    "Segments",
    "check_alphabet",
    "generate_text",
    "hold_out",
    "lm_ids",
    "lm_splits",
    "lm_task",
    "lm_texts",
    "read_text",
    "segments",
]
