"""The alignment experiment's task: toy-ko-style sentences of 10-30 words with gold links,
translated under one of three word orders, so that how much the task reorders is chosen, not
hoped for.

An English sentence is 1-5 clauses joined by "and"; a clause is

    [time] subject verb [object] [place] [time]      "yesterday the old cat saw a bird in the park"

each part a phrase with its own local links (``attnkit.data.toy_ko.Phrase``). Every English
word has one target word (nouns carry their case particle, toy-ko's 은/는 and 을/를; "the" is
"그", "in"/"at" are "안"/"에"), so the gold alignment is a permutation and the two sides have
the same length, as local-m's p_t = t assumes: only the order differs between orderings.
The target language keeps the clauses in order; inside a clause its word order is

    monotone  the English order                                     (no link crosses)
    swap      local swaps, as En->De: verb-second after a fronted    "yesterday saw the cat ..."
              time ("gestern sah die Katze"), and the place before
              the object ("... im Park den Vogel")                   (moves of 1-3 words)
    sov       Korean SOV: time after the subject, the place (its     (the verb moves past
              preposition after the noun: "그 공원 안"), then the      object and place: 1-7)
              object, the verb last

A small lexicon (about 60 words a side) so that sentences of 20 words learn in a few hundred
updates.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from ...data.example import Example
from ...data.toy_ko import Phrase, compose, obj, topic
from ...eval.alignment import GoldAlignment, Link, corpus_aer

ORDERINGS = ("monotone", "swap", "sov")
MIN_WORDS, MAX_WORDS = 10, 30

PRONOUNS = [("I", "나는"), ("you", "너는"), ("he", "그는"), ("she", "그녀는")]
THIRD = {"he", "she"}
NOUNS = [("cat", "고양이"), ("dog", "개"), ("bird", "새"), ("student", "학생"),
         ("teacher", "선생님"), ("child", "아이")]  # fmt: skip
THINGS = [("apple", "사과"), ("book", "책"), ("letter", "편지"), ("car", "자동차"),
          ("bag", "가방"), ("cake", "케이크")]  # fmt: skip
ADJECTIVES = [("big", "큰"), ("small", "작은"), ("red", "빨간"), ("old", "낡은"), ("new", "새로운")]
PLACES = [("park", "공원"), ("school", "학교"), ("market", "시장"), ("garden", "정원"),
          ("house", "집")]  # fmt: skip
# (base, third person, past, Korean present, Korean past); transitive first
TRANSITIVE = [("see", "sees", "saw", "본다", "봤다"), ("buy", "buys", "bought", "산다", "샀다"),
              ("find", "finds", "found", "찾는다", "찾았다"),
              ("like", "likes", "liked", "좋아한다", "좋아했다")]  # fmt: skip
INTRANSITIVE = [("sleep", "sleeps", "slept", "잔다", "잤다"), ("play", "plays", "played", "논다",
                "놀았다"), ("work", "works", "worked", "일한다", "일했다")]  # fmt: skip
ARTICLE = "그"
PREPOSITIONS = {"in": "안", "at": "에"}
TIMES = {"past": [("yesterday", "어제")], "present": [("today", "오늘"), ("now", "지금")]}


class Clauses:
    """Draws clauses (their phrases in English order and in each ordering) from ``rng``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def noun_phrase(self, nouns: Sequence[tuple[str, str]], case: str) -> Phrase:
        """"the [adj] N" -> "그 [adj] N+particle", word for word."""
        en, ko = self.rng.choice(nouns)
        form = topic(ko) if case == "topic" else obj(ko)
        if self.rng.random() < 0.4:
            a_en, a_ko = self.rng.choice(ADJECTIVES)
            return Phrase(["the", a_en, en], [ARTICLE, a_ko, form], [(0, 0), (1, 1), (2, 2)])
        return Phrase(["the", en], [ARTICLE, form], [(0, 0), (1, 1)])

    def clause(self, ordering: str) -> dict[str, Phrase]:
        """The parts of one clause by role: subject, verb and optional object, place, time
        (``front`` when the time comes first in English). The random draws do not depend on
        ``ordering`` (only the place phrase's target order does)."""
        r = self.rng
        third = True
        if r.random() < 0.4:
            en, ko = r.choice(PRONOUNS)
            subj, third = Phrase([en], [ko], [(0, 0)]), en in THIRD
        else:
            subj = self.noun_phrase(NOUNS, "topic")
        tense = r.choice(["past", "present"])
        transitive = r.random() < 0.6
        base, third_form, past, ko_now, ko_past = r.choice(TRANSITIVE if transitive
                                                          else INTRANSITIVE)  # fmt: skip
        en_verb = past if tense == "past" else third_form if third else base
        parts = {"subj": subj,
                 "verb": Phrase([en_verb], [ko_past if tense == "past" else ko_now], [(0, 0)])}
        if transitive:
            parts["obj"] = self.noun_phrase(THINGS + NOUNS, "object")
        if r.random() < (0.5 if transitive else 0.8):
            en, ko = r.choice(PLACES)
            prep = r.choice(list(PREPOSITIONS))
            words = [PREPOSITIONS[prep], ARTICLE, ko]
            if ordering == "sov":  # postposition: "the park in"
                parts["place"] = Phrase([prep, "the", en], [*words[1:], words[0]],
                                        [(1, 0), (2, 1), (0, 2)])  # fmt: skip
            else:
                parts["place"] = Phrase([prep, "the", en], words, [(0, 0), (1, 1), (2, 2)])
        if r.random() < 0.6:
            en, ko = r.choice(TIMES[tense])
            parts["front" if r.random() < 0.5 else "time"] = Phrase([en], [ko], [(0, 0)])
        return parts


def english(parts: dict[str, Phrase]) -> list[Phrase]:
    return [parts[k] for k in ("front", "subj", "verb", "obj", "place", "time") if k in parts]


def target(parts: dict[str, Phrase], ordering: str) -> list[Phrase]:
    """The clause's phrases in the target order of ``ordering`` (module docstring)."""
    if ordering == "monotone":
        keys: tuple[str, ...] = ("front", "subj", "verb", "obj", "place", "time")
    elif ordering == "swap":
        v2 = ("front", "verb", "subj") if "front" in parts else ("subj", "verb")
        keys = (*v2, "place", "obj", "time")
    elif ordering == "sov":
        keys = ("front", "subj", "time", "place", "obj", "verb")
    else:
        raise ValueError(f"ordering {ordering!r}; choose one of {', '.join(ORDERINGS)}")
    return [parts[k] for k in keys if k in parts]


def sentence(rng: random.Random, ordering: str) -> Example:
    """One sentence of MIN_WORDS..MAX_WORDS English words: clauses joined by "and" until a
    length drawn uniformly from that range is reached (redrawn when it overshoots)."""
    while True:
        want = rng.randint(MIN_WORDS, MAX_WORDS)
        en: list[Phrase] = []
        ko: list[Phrase] = []
        while sum(len(p.en) for p in en) < want:
            if en:
                conj = Phrase(["and"], ["그리고"], [(0, 0)])
                en.append(conj)
                ko.append(conj)
            parts = Clauses(rng).clause(ordering)
            en += english(parts)
            ko += target(parts, ordering)
        if sum(len(p.en) for p in en) <= MAX_WORDS:
            return compose(en, ko)


def generate(n: int, seed: int, ordering: str) -> list[Example]:
    """``n`` distinct sentences in ``ordering``; the same English sentences for every
    ordering at one seed (the target order is the only difference)."""
    if ordering not in ORDERINGS:
        raise ValueError(f"ordering {ordering!r}; choose one of {', '.join(ORDERINGS)}")
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[Example] = []
    while len(out) < n:
        ex = sentence(rng, ordering)
        key = " ".join(ex.src)
        if key not in seen:
            seen.add(key)
            out.append(ex)
    return out


def splits(seed: int, ordering: str, sizes: tuple[int, int, int]) -> tuple[list[Example], ...]:
    """train, valid and test: disjoint, ``sizes`` long, drawn with ``seed``."""
    data = generate(sum(sizes), seed, ordering)
    a, b = sizes[0], sizes[0] + sizes[1]
    return data[:a], data[a:b], data[b:]


# -- how much an ordering reorders ----------------------------------------------------------


def crosses(links: Iterable[Link]) -> bool:
    """True when two gold links cross: (s1, t1), (s2, t2) with s1 < s2 and t1 > t2."""
    ls = sorted(set(links))
    return any(s1 < s2 and t1 > t2 for i, (s1, t1) in enumerate(ls) for s2, t2 in ls[i + 1 :])


def diagonal_links(src_len: int, tgt_len: int) -> set[Link]:
    """A monotone guess: target word t links to source word min(round(t·S/T), S-1)."""
    return {(min(round(t * src_len / tgt_len), src_len - 1), t) for t in range(tgt_len)}


def task_stats(examples: Sequence[Example]) -> dict[str, float]:
    """The fraction of sentences with crossing gold links, the corpus AER of the monotone
    diagonal guess (local-m's centre p_t = t taken as the link), the share of gold links
    (s, t) with s = t (where that centre is the gold word), the largest |s - t| (a gold word
    further than D from p_t = t lies outside local-m's window), and the mean source length."""
    gold = [GoldAlignment(frozenset(e.links), frozenset(e.links)) for e in examples]
    guess = [diagonal_links(len(e.src), len(e.tgt)) for e in examples]
    shifts = [abs(s - t) for e in examples for s, t in e.links]
    n = max(len(examples), 1)
    return {
        "sentences": len(examples),
        "reordered_fraction": sum(crosses(e.links) for e in examples) / n,
        "diagonal_aer": corpus_aer(guess, gold),
        "gold_on_diagonal": sum(d == 0 for d in shifts) / max(len(shifts), 1),
        "max_shift": max(shifts, default=0),
        "mean_src_len": sum(len(e.src) for e in examples) / n,
    }


__all__ = ["MAX_WORDS", "MIN_WORDS", "ORDERINGS", "crosses", "diagonal_links", "generate",
           "sentence", "splits", "target", "task_stats"]  # fmt: skip
