"""``coref``: "it" sentences in the style of the Winograd schema (Levesque, Davis & Morgenstern
2012), the example of Vaswani et al. (2017, Fig. 3-5) and of the Google AI blog post on the
Transformer (Uszkoreit 2017): "The animal didn't cross the street because it was too tired"
(it = the animal) vs "... too wide" (it = the street).

Each FRAME is a sentence with two noun slots, one pronoun "it" and a final adjective; the
adjective alone decides which noun the pronoun means (``picks_first`` adjectives mean the
first noun, ``picks_second`` ones the second), so the gold referent is right by
construction. A sentence is a *combination* (frame, noun 1, noun 2, adjective) and an opener
("", "yesterday ,", ...) that shifts every position. The held-out split is by combination:
test sentences are combinations never seen in training (every word of them is), and the two
famous sentences are always among them.

Tokens are lower-case words, "," a token of its own and "didn't" / "doesn't" / "couldn't" one
token each. As a seq2seq task (``--task coref``) the target is the source with the pronoun's
one token replaced by its noun's ("... because animal was too tired"), so source and target
have the same length and the gold links are the identity plus (referent, pronoun).

A gendered translation (``translate``, for ``attnkit experiment coref``): every noun has the
gender of its French word (``GENDER``), and the target is the source word by word with each
noun in French, "the" as "le" / "la" by the gender of the noun after it, and "it" as "il" /
"elle" by the gender of the noun it means:

    the animal didn't cross the street because it was too tired
    le animal  didn't cross la  rue    because il was too tired

so choosing the pronoun's word needs the referent, and no position is ever labelled with it.
The split for that task is by noun pair (``pair_split``: (frame, noun 1, noun 2) never seen in
training), and the held-out sentences come as minimal pairs (``minimal_pairs``): the same
frame, nouns and opener, the adjective flipped so that the referent flips.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .example import Example, Splits
from .task import TASKS, Task

PRONOUN = "it"


@dataclass(frozen=True)
class Frame:
    """``text`` holds the slots {n1}, {n2} and {adj} and exactly one pronoun "it"."""

    name: str
    text: str
    first: tuple[str, ...]  # nouns of slot 1
    second: tuple[str, ...]  # nouns of slot 2
    picks_first: tuple[str, ...]  # adjectives after which "it" means noun 1
    picks_second: tuple[str, ...]  # adjectives after which "it" means noun 2

    def __post_init__(self) -> None:
        words = self.text.split()
        for slot in ("{n1}", "{n2}", "{adj}"):
            if words.count(slot) != 1:
                raise ValueError(f"frame {self.name!r}: {slot} must occur once in {self.text!r}")
        if words.count(PRONOUN) != 1:
            raise ValueError(f"frame {self.name!r}: the pronoun {PRONOUN!r} must occur once")
        if set(self.picks_first) & set(self.picks_second):
            raise ValueError(f"frame {self.name!r}: an adjective cannot pick both nouns")
        fixed = set(words) - {"{n1}", "{n2}", "{adj}"}
        if fixed & (set(self.first) | set(self.second)):
            raise ValueError(f"frame {self.name!r}: a noun is also a word of the frame")


ANIMALS = ("animal", "dog", "horse", "cow", "cat", "goat", "sheep", "fox")
BIRDS_AND_BEASTS = ("dog", "cat", "fox", "wolf", "hawk", "owl", "rabbit", "mouse")

FRAMES: tuple[Frame, ...] = (
    Frame(
        "cross",
        "the {n1} didn't cross the {n2} because it was too {adj}",
        ANIMALS,
        ("street", "road", "river", "bridge", "field", "track", "canal", "highway"),
        ("tired", "scared", "weak", "lazy", "slow", "sleepy"),
        ("wide", "busy", "dangerous", "icy", "long", "crowded"),
    ),
    Frame(
        "fit",
        "the {n1} doesn't fit in the {n2} because it is too {adj}",
        ("trophy", "ball", "lamp", "book", "vase", "painting", "helmet", "statue"),
        ("suitcase", "box", "bag", "drawer", "crate", "basket", "cupboard", "case"),
        ("big", "large", "tall", "bulky", "wide"),
        ("small", "narrow", "tiny", "full", "shallow"),
    ),
    Frame(
        "lift",
        "the {n1} couldn't lift the {n2} because it was too {adj}",
        ("robot", "crane", "truck", "tractor", "machine", "forklift", "horse", "boy"),
        ("rock", "piano", "log", "safe", "boulder", "engine", "anvil", "crate"),
        ("weak", "small", "old", "broken", "tired"),
        ("heavy", "massive", "bulky", "big", "large"),
    ),
    Frame(
        "pour",
        "the {n1} didn't pour into the {n2} because it was too {adj}",
        ("water", "juice", "milk", "soup", "honey", "syrup", "paint", "oil"),
        ("bottle", "jar", "glass", "cup", "jug", "flask", "bowl", "tube"),
        ("thick", "sticky", "frozen", "lumpy", "solid"),
        ("narrow", "full", "small", "sealed", "closed"),
    ),
    Frame(
        "stay-on",
        "the {n1} didn't stay on the {n2} because it was too {adj}",
        ("cup", "plate", "vase", "book", "lamp", "ball", "bottle", "box"),
        ("shelf", "table", "tray", "ledge", "desk", "stool", "roof", "bench"),
        ("round", "heavy", "wobbly", "tall", "slippery"),
        ("narrow", "tilted", "uneven", "small", "steep"),
    ),
    Frame(
        "catch",
        "the {n1} couldn't catch the {n2} because it was too {adj}",
        BIRDS_AND_BEASTS,
        BIRDS_AND_BEASTS,
        ("slow", "tired", "old", "clumsy", "lazy"),
        ("fast", "quick", "clever", "nimble", "agile"),
    ),
)
OPENERS: tuple[str, ...] = ("", "yesterday ,", "in the end ,", "sadly ,", "that day ,")
FILLERS: tuple[str, ...] = ("young", "brown", "quiet", "new", "red", "plain")  # no reading
FAMOUS: tuple[tuple[str, str, str, str], ...] = (
    ("cross", "animal", "street", "tired"),  # it = the animal
    ("cross", "animal", "street", "wide"),  # it = the street
)
Combination = tuple[str, str, str, str]  # (frame name, noun 1, noun 2, adjective)


@dataclass(frozen=True)
class CorefItem:
    """One sentence: its tokens, the index of the pronoun, of the noun it means (referent) and
    of the other noun; the combination it came from and which slot (1 or 2) the adjective
    picks."""

    tokens: tuple[str, ...]
    pronoun: int
    referent: int
    other: int
    combination: Combination
    slot: int

    @property
    def noun(self) -> str:
        """The referent's word: what "it" means."""
        return self.tokens[self.referent]


def frame(name: str) -> Frame:
    for f in FRAMES:
        if f.name == name:
            return f
    raise ValueError(f"unknown coref frame {name!r}; choose one of {[f.name for f in FRAMES]}")


def nouns() -> list[str]:
    """Every noun of every frame, sorted: the classes of 'which noun does "it" mean'."""
    return sorted({n for f in FRAMES for n in (*f.first, *f.second)})


def vocabulary() -> list[str]:
    """Every word a sentence can hold, sorted."""
    words = {w for f in FRAMES for w in f.text.split() if not w.startswith("{")}
    words |= {w for f in FRAMES for w in (*f.first, *f.second, *f.picks_first, *f.picks_second)}
    words |= {w for o in OPENERS for w in o.split()} | set(FILLERS)
    return sorted(words)


def combinations() -> list[Combination]:
    """Every (frame, noun 1, noun 2, adjective) with two different nouns, in a fixed order."""
    return [
        (f.name, a, b, adj)
        for f in FRAMES
        for a in f.first
        for b in f.second
        if a != b
        for adj in (*f.picks_first, *f.picks_second)
    ]


def sentence(
    combination: Combination, opener: str = "", fillers: tuple[str, str] = ("", "")
) -> CorefItem:
    """The sentence of ``combination`` after ``opener``, with its gold referent; ``fillers``
    (words of ``FILLERS``, space-separated) go before noun 1 and noun 2 ("the young brown
    animal"), shifting the nouns without changing the reading."""
    name, n1, n2, adj = combination
    f = frame(name)
    if n1 not in f.first or n2 not in f.second or n1 == n2:
        raise ValueError(f"{combination}: nouns must be two different words of {name!r}'s slots")
    if adj not in f.picks_first + f.picks_second:
        raise ValueError(f"{combination}: {adj!r} is not an adjective of frame {name!r}")
    if opener not in OPENERS:
        raise ValueError(f"opener {opener!r}; choose one of {OPENERS}")
    if not set(" ".join(fillers).split()) <= set(FILLERS):
        raise ValueError(f"fillers {fillers}: use words of {FILLERS}")
    words = [*opener.split()]
    for w in f.text.split():
        words += [*fillers[0].split(), w] if w == "{n1}" else [*fillers[1].split(), w] \
            if w == "{n2}" else [w]  # fmt: skip
    first, second = words.index("{n1}"), words.index("{n2}")
    tokens = tuple({"{n1}": n1, "{n2}": n2, "{adj}": adj}.get(w, w) for w in words)
    slot = 1 if adj in f.picks_first else 2
    ref, other = (first, second) if slot == 1 else (second, first)
    return CorefItem(tokens, words.index(PRONOUN), ref, other, combination, slot)


def famous() -> tuple[CorefItem, CorefItem]:
    """'the animal didn't cross the street because it was too tired' and '... too wide'."""
    return sentence(FAMOUS[0]), sentence(FAMOUS[1])


def held_out(seed: int, test_fraction: float = 0.2) -> tuple[list[Combination], list[Combination]]:
    """(train, test) combinations: a ``test_fraction`` of them, drawn with ``seed``, plus the
    famous two, are held out; a held-out combination whose noun or adjective would then never
    be seen in training goes back to training (so every test word is a training word)."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction={test_fraction}; pass a fraction in (0, 1)")
    combos = combinations()
    rng = random.Random(seed)
    test = {c for c in combos if rng.random() < test_fraction} | set(FAMOUS)
    train = [c for c in combos if c not in test]
    seen = {w for c in train for w in c[1:]}
    back = {c for c in test if c not in FAMOUS and not set(c[1:]) <= seen}
    train = [c for c in combos if c not in test or c in back]
    held = [c for c in combos if c in test and c not in back]
    return train, held


def items(combos: list[Combination], openers: tuple[str, ...] = OPENERS) -> list[CorefItem]:
    """Every combination after every opener."""
    return [sentence(c, o) for c in combos for o in openers]


def to_example(item: CorefItem) -> Example:
    """The seq2seq pair: the target is the source with "it" replaced by its noun; links are
    the identity and (referent, pronoun): the target's noun comes from the referent."""
    tgt = list(item.tokens)
    tgt[item.pronoun] = item.noun
    links = sorted([(i, i) for i in range(len(tgt))] + [(item.referent, item.pronoun)])
    return Example(list(item.tokens), tgt, links)


# English noun -> (its French word, that word's gender); "end" is the noun of "in the end ,"
GENDER: dict[str, tuple[str, str]] = {
    "animal": ("animal", "m"), "dog": ("chien", "m"), "horse": ("cheval", "m"),
    "cow": ("vache", "f"), "cat": ("chat", "m"), "goat": ("chèvre", "f"),
    "sheep": ("mouton", "m"), "fox": ("renard", "m"), "street": ("rue", "f"),
    "road": ("route", "f"), "river": ("rivière", "f"), "bridge": ("pont", "m"),
    "field": ("champ", "m"), "track": ("piste", "f"), "canal": ("canal", "m"),
    "highway": ("autoroute", "f"), "trophy": ("trophée", "m"), "ball": ("balle", "f"),
    "lamp": ("lampe", "f"), "book": ("livre", "m"), "vase": ("vase", "m"),
    "painting": ("peinture", "f"), "helmet": ("casque", "m"), "statue": ("statue", "f"),
    "suitcase": ("valise", "f"), "box": ("boîte", "f"), "bag": ("sac", "m"),
    "drawer": ("tiroir", "m"), "crate": ("caisse", "f"), "basket": ("panier", "m"),
    "cupboard": ("placard", "m"), "case": ("étui", "m"), "robot": ("robot", "m"),
    "crane": ("grue", "f"), "truck": ("camion", "m"), "tractor": ("tracteur", "m"),
    "machine": ("machine", "f"), "forklift": ("chariot", "m"), "boy": ("garçon", "m"),
    "rock": ("roche", "f"), "piano": ("piano", "m"), "log": ("bûche", "f"),
    "safe": ("coffre", "m"), "boulder": ("rocher", "m"), "engine": ("moteur", "m"),
    "anvil": ("enclume", "f"), "water": ("eau", "f"), "juice": ("jus", "m"),
    "milk": ("lait", "m"), "soup": ("soupe", "f"), "honey": ("miel", "m"),
    "syrup": ("sirop", "m"), "paint": ("peinture", "f"), "oil": ("huile", "f"),
    "bottle": ("bouteille", "f"), "jar": ("bocal", "m"), "glass": ("verre", "m"),
    "cup": ("tasse", "f"), "jug": ("cruche", "f"), "flask": ("fiole", "f"),
    "bowl": ("bol", "m"), "tube": ("tube", "m"), "plate": ("assiette", "f"),
    "shelf": ("étagère", "f"), "table": ("table", "f"), "tray": ("plateau", "m"),
    "ledge": ("rebord", "m"), "desk": ("bureau", "m"), "stool": ("tabouret", "m"),
    "roof": ("toit", "m"), "bench": ("banc", "m"), "wolf": ("loup", "m"),
    "hawk": ("faucon", "m"), "owl": ("chouette", "f"), "rabbit": ("lapin", "m"),
    "mouse": ("souris", "f"), "end": ("fin", "f"),
}  # fmt: skip
ARTICLE = {"m": "le", "f": "la"}
PRONOUNS = {"m": "il", "f": "elle"}
NounPair = tuple[str, str, str]  # (frame name, noun 1, noun 2)


def gender(noun: str) -> str:
    """"m" or "f": the gender of ``noun``'s French word."""
    if noun not in GENDER:
        raise ValueError(f"{noun!r} has no gender; add it to attnkit.data.coref.GENDER")
    return GENDER[noun][1]


def translate(item: CorefItem) -> tuple[str, ...]:
    """The gendered target of ``item``, word for word (same length as the source): nouns in
    French, "the" as le / la by the gender of the noun it introduces, "it" as il / elle by
    the gender of the noun it means; every other word as it is."""
    out = []
    for i, w in enumerate(item.tokens):
        if i == item.pronoun:
            out.append(PRONOUNS[gender(item.noun)])
        elif w == "the":  # the gender of the noun after the fillers
            out.append(ARTICLE[gender(next(x for x in item.tokens[i + 1 :] if x in GENDER))])
        else:
            out.append(GENDER[w][0] if w in GENDER else w)
    return tuple(out)


def noun_pairs() -> list[NounPair]:
    """Every (frame, noun 1, noun 2) with two different nouns, in a fixed order."""
    return [(f.name, a, b) for f in FRAMES for a in f.first for b in f.second if a != b]


def pair_split(
    seed: int, valid_fraction: float = 0.1, test_fraction: float = 0.2
) -> tuple[list[NounPair], list[NounPair], list[NounPair]]:
    """(train, valid, test) noun pairs, drawn with ``seed``: the famous pair ("cross",
    "animal", "street") is always in test; a held-out pair with a noun that no training pair
    holds goes back to training (every held-out word is a training word)."""
    if not (0 < valid_fraction and 0 < test_fraction and valid_fraction + test_fraction < 1):
        raise ValueError(f"valid_fraction={valid_fraction}, test_fraction={test_fraction}: pass "
                         "two positive fractions with a sum below 1")  # fmt: skip
    rng = random.Random(seed)
    famous_pair = FAMOUS[0][:3]
    role = {}
    for p in noun_pairs():
        u = rng.random()
        role[p] = "test" if u < test_fraction else "valid" if u < test_fraction + valid_fraction \
            else "train"  # fmt: skip
    role[famous_pair] = "test"
    seen = {n for p, r in role.items() if r == "train" for n in p[1:]}
    for p, r in role.items():
        if r != "train" and p != famous_pair and not set(p[1:]) <= seen:
            role[p] = "train"
    return tuple([p for p in noun_pairs() if role[p] == r]  # type: ignore[return-value]
                 for r in ("train", "valid", "test"))  # fmt: skip


def draw_fillers(rng: random.Random, most: int) -> tuple[str, str]:
    """Up to ``most`` filler words before each noun, drawn with ``rng``."""
    return tuple(" ".join(rng.sample(FILLERS, rng.randint(0, most)))  # type: ignore[return-value]
                 for _ in range(2))  # fmt: skip


def pair_items(
    pairs: list[NounPair], openers: tuple[str, ...] = OPENERS, fillers: int = 0, seed: int = 0
) -> list[CorefItem]:
    """Every sentence of ``pairs``: each adjective of its frame after each opener, with up to
    ``fillers`` filler words before each noun (drawn with ``seed``, per sentence)."""
    rng = random.Random(seed)
    return [
        sentence((name, a, b, adj), o, draw_fillers(rng, fillers))
        for name, a, b in pairs
        for adj in (*frame(name).picks_first, *frame(name).picks_second)
        for o in openers
    ]


def minimal_pairs(
    pairs: list[NounPair], openers: tuple[str, ...] = OPENERS, fillers: int = 0, seed: int = 0
) -> list[tuple[CorefItem, CorefItem]]:
    """The held-out minimal pairs of ``pairs``: for each noun pair and opener, the k-th
    adjective that picks noun 1 beside the k-th that picks noun 2 (the same words, fillers
    included, but the adjective, so the referent flips)."""
    rng = random.Random(seed)
    out = []
    for name, a, b in pairs:
        f = frame(name)
        for adj1, adj2 in zip(f.picks_first, f.picks_second, strict=False):
            for o in openers:
                fill = draw_fillers(rng, fillers)
                out.append((sentence((name, a, b, adj1), o, fill),
                            sentence((name, a, b, adj2), o, fill)))  # fmt: skip
    return out


def splits(sizes: tuple[int, int, int], seed: int) -> Splits[Example]:
    """train / valid from the training combinations (distinct sentences), test from the
    held-out ones; each shuffled with ``seed``."""
    train_c, test_c = held_out(seed)
    seen, unseen = items(train_c), items(test_c)
    rng = random.Random(seed + 1)
    rng.shuffle(seen)
    rng.shuffle(unseen)
    a, b, c = sizes
    if a + b > len(seen) or c > len(unseen):
        raise ValueError(
            f"coref has {len(seen)} training sentences and {len(unseen)} held-out ones; "
            f"ask for train + valid <= {len(seen)} (got {a} + {b}) and test <= {len(unseen)} "
            f"(got {c})"
        )
    pick = [to_example(x) for x in seen[: a + b]]
    return Splits(pick[:a], pick[a:], [to_example(x) for x in unseen[:c]])


# test: held-out (frame, nouns, adjective) combinations
TASKS.register(Task("coref", lambda sizes, seed, **_: splits(sizes, seed), (6000, 300, 1000)))


__all__ = [
    "ARTICLE",
    "FAMOUS",
    "FILLERS",
    "FRAMES",
    "GENDER",
    "OPENERS",
    "PRONOUN",
    "PRONOUNS",
    "Combination",
    "CorefItem",
    "Frame",
    "NounPair",
    "combinations",
    "draw_fillers",
    "famous",
    "frame",
    "gender",
    "held_out",
    "items",
    "minimal_pairs",
    "noun_pairs",
    "nouns",
    "pair_items",
    "pair_split",
    "sentence",
    "splits",
    "to_example",
    "translate",
    "vocabulary",
]
