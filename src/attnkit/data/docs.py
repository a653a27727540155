"""Documents with a label: generated ones in which ONE key sentence decides the label, and real
ones read from a CSV/TSV file of (label, text) rows. The "docs" task (family "docs",
attnkit.tasks.docs) of the hierarchical attention network (Yang et al. 2016).

Generated documents (``generate``): 4-10 sentences of 4-10 words each. Every sentence holds one
polarity word (``good`` ... or ``bad`` ...) among neutral filler words; exactly one sentence,
the *key* sentence, also holds the marker word ``overall``, at a random place in it, and the
key sentence sits at a random position in the document. The label is the polarity of the key
sentence; the other sentences' polarities are drawn independently of it (distractors). So a
model must find the marked sentence and read its polarity word: the label is right by
construction, and ``Doc.key`` says where the evidence is (to measure whether sentence
attention peaks on it).

Real documents (``read_labelled``): a ``.csv`` (comma-separated) or ``.tsv``/``.txt``
(tab-separated) file whose rows are ``label, text`` (a first row ``label, text`` is a header
and skipped); text is lower-cased, cut into sentences after ``. ! ?`` and into word and
punctuation tokens. Rows without a label or text are skipped and counted. The split is a
seeded shuffle (``file_splits``); the file's sha256 is recorded beside its path in the run's
data spec (data/source.py), so ``evaluate`` and ``view`` rebuild the same held-out documents
only from the very same file named on their command line.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from .csv_rows import csv_rows
from .example import Splits, split
from .task import TASKS, Task, generated

POSITIVE = ("good", "great", "fine", "nice", "superb")
NEGATIVE = ("bad", "poor", "awful", "weak", "dull")
MARKER = "overall"
FILLER = (
    "the", "a", "movie", "plot", "was", "is", "and", "it", "this", "actor", "scene", "film",
    "story", "music", "very", "quite", "some", "of", "in", "with", "cast", "script", "end",
    "first", "then", "we", "they", "saw", "felt", "seemed",
)  # fmt: skip
LABELS = ("neg", "pos")


@dataclass(frozen=True)
class Doc:
    """sentences: the words of each sentence; label: its class name; key: the index of the
    sentence that decides the label (-1 when unknown, as in real documents)."""

    sentences: tuple[tuple[str, ...], ...]
    label: str
    key: int = -1

    @property
    def words(self) -> list[str]:
        return [w for s in self.sentences for w in s]


def _sentence(rng: random.Random, n_words: int, polarity: int, key: bool) -> tuple[str, ...]:
    words = [rng.choice(FILLER) for _ in range(n_words - 1 - key)]
    words.insert(rng.randrange(len(words) + 1), rng.choice((NEGATIVE, POSITIVE)[polarity]))
    if key:
        words.insert(rng.randrange(len(words) + 1), MARKER)
    return tuple(words)


def generate(
    n: int,
    seed: int,
    *,
    min_sents: int = 4,
    max_sents: int = 10,
    min_words: int = 4,
    max_words: int = 10,
) -> list[Doc]:
    """``n`` documents (see the module docstring), balanced in expectation over the labels."""
    if not 1 <= min_sents <= max_sents or not 3 <= min_words <= max_words:
        raise ValueError(
            f"sentences {min_sents}..{max_sents}, words {min_words}..{max_words}: need "
            "1 <= min_sents <= max_sents and 3 <= min_words <= max_words (a key sentence holds "
            "the marker, a polarity word and a filler word)"
        )
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        n_sents = rng.randint(min_sents, max_sents)
        key = rng.randrange(n_sents)
        label = rng.randrange(2)
        sentences = tuple(
            _sentence(
                rng,
                rng.randint(min_words, max_words),
                label if i == key else rng.randrange(2),
                i == key,
            )  # fmt: skip
            for i in range(n_sents)
        )
        docs.append(Doc(sentences, LABELS[label], key))
    return docs


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_TOKEN = re.compile(r"\w+|[^\w\s]")


def sentences_of(text: str) -> tuple[tuple[str, ...], ...]:
    """Lower-cased word/punctuation tokens of each sentence (cut after . ! ?), empty ones
    dropped: "Great cast. Dull plot!" -> (("great", "cast", "."), ("dull", "plot", "!"))."""
    cut = (_TOKEN.findall(part.lower()) for part in _SENTENCE_END.split(text.strip()))
    return tuple(tuple(s) for s in cut if s)


def read_labelled(path: str | Path) -> tuple[list[Doc], int]:
    """The documents of a (label, text) CSV/TSV file and the number of rows skipped (no label,
    or no text)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--docs-csv {path}: no such file")
    delimiter = "," if path.suffix.lower() == ".csv" else "\t"
    docs, skipped = [], 0
    for i, row in enumerate(csv_rows(path, delimiter)):
        if i == 0 and [c.strip().lower() for c in row[:2]] == ["label", "text"]:
            continue
        label = row[0].strip() if row else ""
        sents = sentences_of(delimiter.join(row[1:])) if len(row) > 1 else ()
        if not label or not sents:
            skipped += 1
            continue
        docs.append(Doc(sents, label))
    return docs, skipped


def split_sizes(n: int, sizes: tuple[int | None, int | None, int | None]) -> tuple[int, int, int]:
    """train/valid/test sizes for ``n`` documents: the given ones, and for those not given
    10% valid, 10% test (at least one each) and the rest train."""
    valid = sizes[1] if sizes[1] is not None else max(1, n // 10)
    test = sizes[2] if sizes[2] is not None else max(1, n // 10)
    train = sizes[0] if sizes[0] is not None else n - valid - test
    if min(train, valid, test) < 1 or train + valid + test > n:
        raise ValueError(
            f"{n} documents cannot make {train} training, {valid} valid and {test} test "
            "documents (each at least 1); pass smaller --train-size/--valid-size/--test-size"
        )
    return train, valid, test


def file_splits(
    path: str | Path,
    seed: int,
    sizes: tuple[int | None, int | None, int | None] = (None, None, None),
) -> Splits[Doc]:
    """The documents of a (label, text) file, shuffled with ``seed`` and cut into
    train/valid/test (``split_sizes``)."""
    docs, _ = read_labelled(path)
    return split(docs, split_sizes(len(docs), sizes), seed)


TASKS.register(Task("docs", generated(generate), (4000, 400, 400), family="docs"))


__all__ = [
    "Doc",
    "LABELS",
    "MARKER",
    "NEGATIVE",
    "POSITIVE",
    "file_splits",
    "generate",
    "read_labelled",
    "sentences_of",
    "split_sizes",
]
