"""The two classification tasks of ``attnkit experiment explanation``, each generated here so
that the tokens that decide the label are known.

* ``marked``: a sequence of 20-50 distractor words (``w00`` ... ``w39``) holds 3, 5 or 7
  *marked* tokens at random places, each positive (``p0`` ... ``p3``) or negative (``n0``
  ... ``n3``); the label is the majority's sign (never a tie: the count is odd), so a model
  must count the marks of both kinds. Deciding tokens: every marked one.
* ``docs``: the documents of attnkit's docs task (``attnkit.data.docs.generate``: 4-10
  sentences of 4-10 words, one sentence holds the marker ``overall`` and its polarity word
  decides the label, every other sentence a polarity word drawn at random), read as one
  flat word sequence with a ``.`` closing each sentence, as a BiRNN over words reads a
  document. Deciding tokens: the key sentence's polarity word and its marker.

``encode`` pads a list of examples into ids (N, T) (0 = padding, on the right), labels (N,)
and the deciding-token mask (N, T). Legend: N examples, T longest length.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import torch
from torch import Tensor

from ...data.docs import MARKER, NEGATIVE, POSITIVE, generate

TASKS = ("marked", "docs")
DISTRACTORS = tuple(f"w{i:02d}" for i in range(40))
MARKS = (tuple(f"n{i}" for i in range(4)), tuple(f"p{i}" for i in range(4)))  # neg, pos
MARKED_LENGTH = (20, 50)  # distractors per sequence, fewest and most
MARK_COUNTS = (3, 5, 7)  # marked tokens per sequence (odd: no tie)
END = "."  # closes each sentence of a flattened document


@dataclass(frozen=True)
class Example:
    """The words of one example, its label (0 or 1) and which words decide it."""

    words: tuple[str, ...]
    label: int
    deciding: tuple[bool, ...]


def marked(n: int, seed: int) -> list[Example]:
    """``n`` examples of the ``marked`` task (module docstring)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(DISTRACTORS) for _ in range(rng.randint(*MARKED_LENGTH))]
        signs = [rng.randrange(2) for _ in range(rng.choice(MARK_COUNTS))]
        places = sorted(rng.sample(range(len(words) + len(signs)), len(signs)))
        deciding = [False] * len(words)
        for place, sign in zip(places, signs, strict=True):
            words.insert(place, rng.choice(MARKS[sign]))
            deciding.insert(place, True)
        label = int(2 * sum(signs) > len(signs))
        out.append(Example(tuple(words), label, tuple(deciding)))
    return out


def docs(n: int, seed: int) -> list[Example]:
    """``n`` documents of the docs task, flattened (module docstring)."""
    out = []
    for d in generate(n, seed):
        words: list[str] = []
        deciding: list[bool] = []
        for i, sentence in enumerate(d.sentences):
            key = i == d.key
            words += [*sentence, END]
            deciding += [key and (w == MARKER or w in POSITIVE or w in NEGATIVE)
                         for w in sentence] + [False]  # fmt: skip
        out.append(Example(tuple(words), int(d.label == "pos"), tuple(deciding)))
    return out


GENERATORS = {"marked": marked, "docs": docs}


@cache
def vocabulary(task: str) -> dict[str, int]:
    """Word -> id of ``task`` (0 is padding)."""
    if task == "marked":
        words = [*DISTRACTORS, *MARKS[0], *MARKS[1]]
    elif task == "docs":
        from ...data.docs import FILLER

        words = [*FILLER, *POSITIVE, *NEGATIVE, MARKER, END]
    else:
        raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")
    return {w: i + 1 for i, w in enumerate(words)}


@dataclass(frozen=True)
class Encoded:
    """ids (N, T), 0-padded on the right; labels (N,); deciding (N, T) bool."""

    ids: Tensor
    labels: Tensor
    deciding: Tensor

    def __len__(self) -> int:
        return len(self.labels)


def encode(task: str, examples: Sequence[Example]) -> Encoded:
    """``examples`` as padded tensors."""
    if not examples:
        raise ValueError("no examples to encode")
    vocab = vocabulary(task)
    t = max(len(x.words) for x in examples)
    ids = torch.zeros(len(examples), t, dtype=torch.long)  # (N, T)
    deciding = torch.zeros(len(examples), t, dtype=torch.bool)  # (N, T)
    for i, x in enumerate(examples):
        ids[i, : len(x.words)] = torch.tensor([vocab[w] for w in x.words])
        deciding[i, : len(x.words)] = torch.tensor(x.deciding)
    labels = torch.tensor([x.label for x in examples])  # (N,)
    return Encoded(ids, labels, deciding)


@dataclass(frozen=True)
class Splits:
    """A task's fixed training, validation and test examples."""

    train: Encoded
    valid: Encoded
    test: Encoded


def splits(task: str, sizes: tuple[int, int, int], seed: int) -> Splits:
    """Training, validation and test examples of ``task``, each from its own stream of
    ``seed`` (so a larger training set keeps the same held-out examples)."""
    make = GENERATORS[task]
    return Splits(*(encode(task, make(n, seed * 3 + k)) for k, n in enumerate(sizes)))


__all__ = ["END", "Encoded", "Example", "GENERATORS", "MARKS", "Splits", "TASKS", "docs",
           "encode", "marked", "splits", "vocabulary"]  # fmt: skip
