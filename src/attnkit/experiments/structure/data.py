"""The structure experiment's documents: long ones with decoys, where one sentence decides the
label and the words that mark it also sit in other sentences (``decoy_docs``), and two-aspect
ones whose label needs two different sentences (``aspect_docs``). The generator of the
``docs`` task (``attnkit.data.docs.generate``: one marked sentence, the marker nowhere else)
is left as it was; with it every pooling reaches 100%, since max pooling over the marker word
is enough.

Decoy documents (Yang 2016's claim, HAN vs HN-AVE / HN-MAX). Every sentence holds one
polarity word (``good`` ... / ``bad`` ...), preceded by ``not`` in about a third of the
sentences (negation flips it: the sentence's polarity is the word's XOR the negation), among
filler words. Exactly one sentence, the *decisive* one, holds both the marker ``overall`` and
the condition word ``finally``. Decoy sentences hold the marker alone, the condition alone,
or a near-marker (``overalls``, ``generally``, ``finale``, ``eventually``); every document
has at least one of each of the two half-decoys, so that neither word alone finds the
decisive sentence. The label is the decisive sentence's polarity; the decoys' polarities are
drawn independently. So no word's presence anywhere in a document says anything about its
label: a model must find the sentence where the two words meet and read its (possibly
negated) polarity.

Aspect documents (Shen 2018's claim, feature-wise vs scalar pooling). Two aspects, ``pacing``
and ``acting``; exactly one sentence names each (their positions random, different), every
other sentence names neither (a near-aspect word at most) and carries a decoy polarity. The
label is the pair of the two aspect sentences' polarities (4 classes: ``pos-neg`` = pacing
positive, acting negative). A scalar attention pool must mix the two aspect sentences into
one vector in which the same polarity features of both collide; a feature-wise pool can give
one group of features the pacing sentence and another the acting sentence.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ...data.docs import FILLER, LABELS, NEGATIVE, POSITIVE, Doc

MARKER, CONDITION = "overall", "finally"
NEAR_MARKERS = ("overalls", "generally", "finale", "eventually")
NEGATION = "not"
ASPECTS = ("pacing", "acting")
NEAR_ASPECTS = ("paced", "acted", "pace", "acts")
ASPECT_LABELS = ("neg-neg", "neg-pos", "pos-neg", "pos-pos")  # (pacing, acting)
# the words these generators use beyond the docs task's filler (a fixed vocabulary)
WORDS = (*FILLER, *POSITIVE, *NEGATIVE, MARKER, CONDITION, *NEAR_MARKERS, NEGATION, *ASPECTS,
         *NEAR_ASPECTS)  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """Document sizes: sentences per document and words per sentence (inclusive ranges)."""

    min_sents: int = 10
    max_sents: int = 30
    min_words: int = 5
    max_words: int = 9

    def __post_init__(self) -> None:
        if not 3 <= self.min_sents <= self.max_sents or not 5 <= self.min_words <= self.max_words:
            raise ValueError(
                f"sentences {self.min_sents}..{self.max_sents}, words {self.min_words}.."
                f"{self.max_words}: need 3 <= min <= max sentences (a decisive sentence and two "
                "half-decoys) and 5 <= min <= max words (marker, condition, negation, polarity, "
                "one filler)"
            )


def polarity_words(rng: random.Random, polarity: int) -> list[str]:
    """The words that give a sentence ``polarity`` (1 positive): a polarity word, negated
    ("not bad" is positive) a third of the time."""
    if rng.random() < 1 / 3:
        return [NEGATION, rng.choice((POSITIVE, NEGATIVE)[polarity])]
    return [rng.choice((NEGATIVE, POSITIVE)[polarity])]


def sentence(rng: random.Random, n_words: int, polarity: int, extra: tuple[str, ...]) -> tuple[
        str, ...]:  # fmt: skip
    """``n_words`` words: the polarity words (kept together, in order), each word of ``extra``
    at a random place, and filler for the rest."""
    core = polarity_words(rng, polarity)
    items: list[list[str]] = [core] + [[w] for w in extra]
    n_fill = max(n_words - len(core) - len(extra), 1)
    items += [[rng.choice(FILLER)] for _ in range(n_fill)]
    rng.shuffle(items)
    return tuple(w for item in items for w in item)


def sentence_polarity(words: tuple[str, ...]) -> int:
    """1 when the sentence reads positive: its polarity word's sign, flipped by ``not``
    right before it."""
    for i, w in enumerate(words):
        if w in POSITIVE or w in NEGATIVE:
            negated = i > 0 and words[i - 1] == NEGATION
            return int((w in POSITIVE) != negated)
    raise ValueError(f"sentence {' '.join(words)!r} holds no polarity word")


def _decoy_extras(rng: random.Random, n_sents: int, key: int) -> list[tuple[str, ...]]:
    """The marker-like words of each sentence: both on ``key``; the marker alone and the
    condition alone on at least one other sentence each; near-markers or nothing elsewhere."""
    others = [i for i in range(n_sents) if i != key]
    rng.shuffle(others)
    n_half = max(1, len(others) // 4)  # sentences holding each half of the pair
    extras: list[tuple[str, ...]] = [() for _ in range(n_sents)]
    for j, i in enumerate(others):
        if j < n_half:
            extras[i] = (MARKER,)
        elif j < 2 * n_half:
            extras[i] = (CONDITION,)
        elif rng.random() < 0.5:
            extras[i] = (rng.choice(NEAR_MARKERS),)
    extras[key] = (MARKER, CONDITION)
    return extras


def decoy_docs(n: int, seed: int, shape: Shape = Shape()) -> list[Doc]:
    """``n`` decoy documents (module docstring); ``Doc.key`` is the decisive sentence."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        n_sents = rng.randint(shape.min_sents, shape.max_sents)
        key, label = rng.randrange(n_sents), rng.randrange(2)
        extras = _decoy_extras(rng, n_sents, key)
        sents = tuple(
            sentence(rng, rng.randint(shape.min_words, shape.max_words),
                     label if i == key else rng.randrange(2), extras[i])
            for i in range(n_sents)
        )  # fmt: skip
        docs.append(Doc(sents, LABELS[label], key))
    return docs


@dataclass(frozen=True)
class AspectDoc(Doc):
    """A two-aspect document: ``keys`` = (pacing sentence, acting sentence); ``key`` = the
    pacing sentence (for ``Doc``'s single-key views)."""

    keys: tuple[int, int] = (-1, -1)


def aspect_docs(n: int, seed: int, shape: Shape = Shape()) -> list[AspectDoc]:
    """``n`` two-aspect documents (module docstring)."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        n_sents = rng.randint(shape.min_sents, shape.max_sents)
        pace, acting = rng.sample(range(n_sents), 2)
        pol = (rng.randrange(2), rng.randrange(2))
        sents = []
        for i in range(n_sents):
            if i in (pace, acting):
                extra: tuple[str, ...] = (ASPECTS[i == acting],)
                p = pol[i == acting]
            else:
                extra = (rng.choice(NEAR_ASPECTS),) if rng.random() < 0.5 else ()
                p = rng.randrange(2)
            sents.append(sentence(rng, rng.randint(shape.min_words, shape.max_words), p, extra))
        docs.append(AspectDoc(tuple(sents), ASPECT_LABELS[2 * pol[0] + pol[1]], pace,
                              (pace, acting)))  # fmt: skip
    return docs


__all__ = ["ASPECTS", "ASPECT_LABELS", "AspectDoc", "CONDITION", "MARKER", "NEAR_ASPECTS",
           "NEAR_MARKERS", "NEGATION", "Shape", "WORDS", "aspect_docs", "decoy_docs",
           "polarity_words", "sentence", "sentence_polarity"]  # fmt: skip
