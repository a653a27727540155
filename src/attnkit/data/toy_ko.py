"""``toy-ko``: English -> Korean-like sentences generated from a lexicon and a small grammar.

English is SVO, Korean SOV with postpositional particles fused to the noun (은/는 topic,
이/가 subject, 을/를 object, 에서 place of action, 에 destination), chosen by the noun's final
consonant as in real Korean spelling. Every example carries GOLD word alignments: pairs
(src_idx, tgt_idx), 0-based over whitespace tokens; English function words with no Korean
counterpart ("a", "the", "to", "in") are unaligned.

    "I am a student"            -> "나는 학생 이다"          [(0,0), (1,2), (3,1)]
    "she reads a book in the library" -> "그녀는 도서관에서 책을 읽는다"

Patterns: copula (and its negation), adjective predicates, transitive verbs with
(adjective +) object, intransitive verbs with a place, motion to a destination, and time
adverbs (yesterday/today/tomorrow -> past/present/future) at the front or the end.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from .example import Example, distinct
from .task import TASKS, Task, generated

T = TypeVar("T")

# -- particles chosen by the final consonant (batchim) of the last syllable ------------------


def has_batchim(word: str) -> bool:
    """True when the last Hangul syllable ends in a consonant: (code - 0xAC00) % 28 != 0."""
    code = ord(word[-1]) - 0xAC00
    return 0 <= code < 11172 and code % 28 != 0


def topic(w: str) -> str:
    return w + ("은" if has_batchim(w) else "는")


def subject(w: str) -> str:
    return w + ("이" if has_batchim(w) else "가")


def obj(w: str) -> str:
    return w + ("을" if has_batchim(w) else "를")


# -- lexicon ----------------------------------------------------------------------------------

# pronoun: (English, Korean topic form, English "be" form, 3rd-person singular?)
PRONOUNS = [
    ("I", "나는", "am", False),
    ("you", "너는", "are", False),
    ("he", "그는", "is", True),
    ("she", "그녀는", "is", True),
    ("we", "우리는", "are", False),
    ("they", "그들은", "are", False),
]
PLURAL_PRONOUNS = {"we", "they"}

# people: (singular, plural, Korean)
PEOPLE = [
    ("student", "students", "학생"),
    ("teacher", "teachers", "선생님"),
    ("doctor", "doctors", "의사"),
    ("cook", "cooks", "요리사"),
    ("singer", "singers", "가수"),
    ("nurse", "nurses", "간호사"),
    ("farmer", "farmers", "농부"),
    ("artist", "artists", "화가"),
    ("child", "children", "아이"),
    ("friend", "friends", "친구"),
]
ANIMALS = [("cat", "고양이"), ("dog", "개"), ("bird", "새"), ("horse", "말")]

# objects by kind: (English, Korean)
FOOD = [("apple", "사과"), ("bread", "빵"), ("cake", "케이크"), ("egg", "달걀"), ("fish", "생선")]
DRINK = [("water", "물"), ("milk", "우유"), ("coffee", "커피"), ("tea", "차"), ("juice", "주스")]
TEXT = [("book", "책"), ("letter", "편지"), ("newspaper", "신문"), ("poem", "시")]
THING = [
    ("car", "자동차"),
    ("bag", "가방"),
    ("pen", "펜"),
    ("computer", "컴퓨터"),
    ("chair", "의자"),
    ("hat", "모자"),
    ("house", "집"),
]
PLACES = [
    ("school", "학교"),
    ("park", "공원"),
    ("library", "도서관"),
    ("market", "시장"),
    ("office", "사무실"),
    ("kitchen", "부엌"),
    ("garden", "정원"),
    ("hospital", "병원"),
]
MASS = {"water", "milk", "coffee", "tea", "juice", "bread"}


@dataclass(frozen=True)
class Verb:
    base: str
    third: str
    past: str
    ko_present: str
    ko_past: str
    ko_future: str  # adnominal stem, followed by "것이다"
    objects: tuple[str, ...]  # kinds of object it takes; () = intransitive


VERBS = [
    Verb("eat", "eats", "ate", "먹는다", "먹었다", "먹을", ("food",)),
    Verb("drink", "drinks", "drank", "마신다", "마셨다", "마실", ("drink",)),
    Verb("read", "reads", "read", "읽는다", "읽었다", "읽을", ("text",)),
    Verb("write", "writes", "wrote", "쓴다", "썼다", "쓸", ("text",)),
    Verb("buy", "buys", "bought", "산다", "샀다", "살", ("food", "drink", "text", "thing")),
    Verb("make", "makes", "made", "만든다", "만들었다", "만들", ("food", "thing")),
    Verb("like", "likes", "liked", "좋아한다", "좋아했다", "좋아할", ("food", "drink", "people")),
    Verb("see", "sees", "saw", "본다", "봤다", "볼", ("people", "animal", "thing")),
    Verb("meet", "meets", "met", "만난다", "만났다", "만날", ("people",)),
    Verb("find", "finds", "found", "찾는다", "찾았다", "찾을", ("thing", "animal", "text")),
    Verb("sleep", "sleeps", "slept", "잔다", "잤다", "잘", ()),
    Verb("work", "works", "worked", "일한다", "일했다", "일할", ()),
    Verb("study", "studies", "studied", "공부한다", "공부했다", "공부할", ()),
    Verb("play", "plays", "played", "논다", "놀았다", "놀", ()),
    Verb("sing", "sings", "sang", "노래한다", "노래했다", "노래할", ()),
]
MOTION = [
    Verb("go", "goes", "went", "간다", "갔다", "갈", ()),
    Verb("come", "comes", "came", "온다", "왔다", "올", ()),
]

# adjectives: (English, Korean predicate, Korean attributive)
ADJECTIVES = [
    ("big", "크다", "큰"),
    ("small", "작다", "작은"),
    ("red", "빨갛다", "빨간"),
    ("new", "새롭다", "새로운"),
    ("old", "낡다", "낡은"),
    ("good", "좋다", "좋은"),
    ("pretty", "예쁘다", "예쁜"),
    ("hot", "뜨겁다", "뜨거운"),
    ("cold", "차갑다", "차가운"),
    ("expensive", "비싸다", "비싼"),
]
ANIMAL_VERBS = {"eat", "drink", "see", "find", "sleep", "play"}
TIMES = [
    ("yesterday", "어제", "past"),
    ("today", "오늘", "present"),
    ("tomorrow", "내일", "future"),
]


# -- phrases with local alignments --------------------------------------------------------------


@dataclass
class Phrase:
    en: list[str]
    ko: list[str]
    links: list[tuple[int, int]]  # (en_idx, ko_idx) within the phrase


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def compose(en_order: list[Phrase], ko_order: list[Phrase]) -> Example:
    """Concatenate phrases in English order and in Korean order, shifting their links."""
    en_off: dict[int, int] = {}
    src: list[str] = []
    for p in en_order:
        en_off[id(p)] = len(src)
        src += p.en
    tgt: list[str] = []
    links: list[tuple[int, int]] = []
    for p in ko_order:
        off = len(tgt)
        tgt += p.ko
        links += [(en_off[id(p)] + i, off + j) for i, j in p.links]
    return Example(src, tgt, sorted(links))


class Grammar:
    """Draws one sentence at a time from ``rng``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, xs: Sequence[T]) -> T:
        return self.rng.choice(xs)

    # a subject in topic form; returns (phrase, "be" form, 3rd-person singular?, plural?)
    def subject(self) -> tuple[Phrase, str, bool, bool]:
        """(phrase, "be" form, 3rd-person singular?, plural?); animals only via ``animal``."""
        r = self.rng.random()
        if r < 0.45:
            en, ko, be, third = self.pick(PRONOUNS)
            return Phrase([en], [ko], [(0, 0)]), be, third, en in PLURAL_PRONOUNS
        if r < 0.65:
            en, _, ko = self.pick(PEOPLE)
            return Phrase(["my", en], ["내", topic(ko)], [(0, 0), (1, 1)]), "is", True, False
        en, _, ko = self.pick(PEOPLE)
        return Phrase(["the", en], [topic(ko)], [(1, 0)]), "is", True, False

    def animal(self) -> Phrase:
        en, ko = self.pick(ANIMALS)
        return Phrase(["the", en], [topic(ko)], [(1, 0)])

    def noun_object(self, kinds: tuple[str, ...]) -> Phrase:
        kind = self.pick(kinds)
        if kind == "people":
            en, _, ko = self.pick(PEOPLE)
        else:
            table = {"food": FOOD, "drink": DRINK, "text": TEXT, "thing": THING, "animal": ANIMALS}
            en, ko = self.pick(table[kind])
        if kind in ("people", "animal") or self.rng.random() < 0.6:
            det = "the" if self.rng.random() < 0.5 or en in MASS else article(en)
            return Phrase([det, en], [obj(ko)], [(1, 0)])
        adj_en, _, adj_ko = self.pick(ADJECTIVES)
        det = "the" if self.rng.random() < 0.5 or en in MASS else article(adj_en)
        return Phrase([det, adj_en, en], [adj_ko, obj(ko)], [(1, 0), (2, 1)])

    def place(self, particle: str) -> Phrase:
        en, ko = self.pick(PLACES)
        prep = "to" if particle == "에" else self.pick(["in", "at"])
        return Phrase([prep, "the", en], [ko + particle], [(2, 0)])

    def verb(self, v: Verb, tense: str, third: bool) -> Phrase:
        if tense == "past":
            return Phrase([v.past], [v.ko_past], [(0, 0)])
        if tense == "future":
            return Phrase(["will", v.base], [v.ko_future, "것이다"], [(0, 1), (1, 0)])
        return Phrase([v.third if third else v.base], [v.ko_present], [(0, 0)])

    def copula(self) -> Example:
        subj, be, _, plural = self.subject()
        sg, pl, ko = self.pick(PEOPLE)
        if self.rng.random() < 0.3:  # negation: N-이/가 아니다
            if plural:
                pred = Phrase([be, "not", pl], [subject(ko), "아니다"], [(0, 1), (1, 1), (2, 0)])
            else:
                pred = Phrase(
                    [be, "not", article(sg), sg], [subject(ko), "아니다"], [(0, 1), (1, 1), (3, 0)]
                )
        elif plural:
            pred = Phrase([be, pl], [ko, "이다"], [(0, 1), (1, 0)])
        else:
            pred = Phrase([be, article(sg), sg], [ko, "이다"], [(0, 1), (2, 0)])
        return compose([subj, pred], [subj, pred])

    def adjective(self) -> Example:
        en, ko = self.pick(FOOD + DRINK + TEXT + THING + ANIMALS)
        adj_en, adj_ko, _ = self.pick(ADJECTIVES)
        subj = Phrase(["the", en], [topic(ko)], [(1, 0)])
        pred = Phrase(["is", adj_en], [adj_ko], [(0, 0), (1, 0)])
        return compose([subj, pred], [subj, pred])

    def clause(self) -> Example:
        subj, _, third, _ = self.subject()
        verbs = VERBS
        if self.rng.random() < 0.15:
            subj, third, verbs = self.animal(), True, [v for v in VERBS if v.base in ANIMAL_VERBS]
        tense = self.pick(["present", "present", "past", "future"])
        r = self.rng.random()
        if r < 0.55:
            v = self.pick([v for v in verbs if v.objects])
            middle = [self.noun_object(v.objects)]
            if self.rng.random() < 0.3:
                middle.append(self.place("에서"))
            en_mid, ko_mid = middle, middle[::-1]  # Korean: place before object
        elif r < 0.8:
            v = self.pick([v for v in verbs if not v.objects])
            en_mid = ko_mid = [self.place("에서")] if self.rng.random() < 0.7 else []
        else:
            v = self.pick(MOTION)
            en_mid = ko_mid = [self.place("에")]
        verb = self.verb(v, tense, third)
        bare_ok = tense == "present" or (tense == "past" and v.past != v.base)
        if bare_ok and self.rng.random() < 0.6:
            return compose([subj, verb, *en_mid], [subj, *ko_mid, verb])
        when = self.pick([t for t in TIMES if t[2] == tense])
        time = Phrase([when[0]], [when[1]], [(0, 0)])
        if self.rng.random() < 0.5:  # front: "yesterday I ate ..." -> "어제 나는 ..."
            return compose([time, subj, verb, *en_mid], [time, subj, *ko_mid, verb])
        return compose([subj, verb, *en_mid, time], [subj, time, *ko_mid, verb])

    def sentence(self) -> Example:
        r = self.rng.random()
        if r < 0.2:
            return self.copula()
        if r < 0.3:
            return self.adjective()
        return self.clause()


def generate(n: int, seed: int) -> list[Example]:
    """``n`` distinct sentences drawn with ``seed`` (deterministic across runs)."""
    g = Grammar(random.Random(seed))

    def draw() -> tuple[str, Example]:
        ex = g.sentence()
        return " ".join(ex.src), ex

    return distinct(n, draw, 50 * n + 1000,
                    f"toy-ko has fewer than {n} distinct sentences; ask for fewer")  # fmt: skip


TASKS.register(Task("toy-ko", generated(generate), (8000, 400, 500)))


__all__ = ["Grammar", "generate", "has_batchim", "obj", "subject", "topic"]
