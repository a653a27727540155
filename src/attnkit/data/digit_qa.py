"""digit-qa: questions about canvases of handwritten digits, answered by one word.

A canvas is a 3 × 3 grid of cells holding 3, 4 or 5 of scikit-learn's 8×8 digits
(``attnkit.data.digits``). Six question templates, each answered from the canvas by
construction ("directly" = the adjacent cell):

    left     which digit is left of the 7        the digit directly left of the only 7
    right    which digit is right of the 7       the digit directly right of the only 7
    above    which digit is above the 7          the digit directly above the only 7
    below    which digit is below the 7          the digit directly below the only 7
    count    how many 3 s are there              how many 3s the canvas holds ("0".."5")
    exists   is there an 8 above a 1             "yes" when some 8 is directly above some 1

Held out: each template is never asked in training on canvases of one digit count (template
k: 3 + k mod 3 digits); the validation and test splits hold exactly those template × canvas
combinations, on canvases drawn from image pools disjoint from training's (``image_split``).

    splits = digit_qa_task((6000, 500, 500), seed=0)
    e = splits.test[0]; e.question, e.answer, e.template, render(e.canvas)  # (24, 24)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .digits import Canvas, Placement, image_split, random_canvas
from .example import Splits
from .task import TASKS, Task

ROWS = COLS = 3
COUNTS = (3, 4, 5)  # digits per canvas
TEMPLATES = ("left", "right", "above", "below", "count", "exists")
STEPS = {"left": (0, -1), "right": (0, 1), "above": (-1, 0), "below": (1, 0)}


@dataclass(frozen=True)
class QAExample:
    """One question about one canvas: the question's words, the one-word answer, the template
    it was made from and the canvas (integers; ``digits.render`` makes its pixels)."""

    canvas: Canvas
    question: tuple[str, ...]
    answer: str
    template: str


def held_out(template: str) -> int:
    """The digit count on whose canvases ``template`` is never asked in training."""
    return COUNTS[TEMPLATES.index(template) % len(COUNTS)]


def _cells(canvas: Canvas) -> dict[tuple[int, int], Placement]:
    return {(p.row, p.col): p for p in canvas.placements}


def neighbour_answer(canvas: Canvas, digit: int, template: str) -> str | None:
    """The digit in the cell next to the only ``digit`` (direction of ``template``), or None
    when ``digit`` is absent, not unique, or has no digit there."""
    found = [p for p in canvas.placements if p.digit == digit]
    if len(found) != 1:
        return None
    dr, dc = STEPS[template]
    other = _cells(canvas).get((found[0].row + dr, found[0].col + dc))
    return None if other is None else str(other.digit)


def count_answer(canvas: Canvas, digit: int) -> str:
    """How many placements of ``digit`` the canvas holds."""
    return str(sum(p.digit == digit for p in canvas.placements))


def exists_answer(canvas: Canvas, upper: int, lower: int) -> str:
    """"yes" when some ``upper`` sits directly above some ``lower``, else "no"."""
    cells = _cells(canvas)
    for p in canvas.placements:
        below = cells.get((p.row + 1, p.col))
        if p.digit == upper and below is not None and below.digit == lower:
            return "yes"
    return "no"


def question_words(template: str, a: int, b: int = 0) -> tuple[str, ...]:
    """The words of a question of ``template`` about digit ``a`` (and ``b`` for exists)."""
    if template in STEPS:
        where = f"{template} of" if template in ("left", "right") else template
        return tuple(f"which digit is {where} the {a}".split())
    if template == "count":
        return tuple(f"how many {a} s are there".split())
    if template == "exists":
        article = "an" if a == 8 else "a"
        return tuple(f"is there {article} {a} above a {b}".split())
    raise ValueError(f"unknown template {template!r}; choose one of {TEMPLATES}")


def _ask(rng: random.Random, canvas: Canvas, template: str) -> QAExample | None:
    """A question of ``template`` about ``canvas`` with its answer, or None if it has none."""
    present = sorted({p.digit for p in canvas.placements})
    if template in STEPS:
        asked = [d for d in present if neighbour_answer(canvas, d, template) is not None]
        if not asked:
            return None
        d = rng.choice(asked)
        answer = neighbour_answer(canvas, d, template)
        assert answer is not None
        return QAExample(canvas, question_words(template, d), answer, template)
    if template == "count":
        absent = [d for d in range(10) if d not in present]
        d = rng.choice(present if rng.random() < 0.75 or not absent else absent)
        return QAExample(canvas, question_words("count", d), count_answer(canvas, d), "count")
    cells = _cells(canvas)
    pairs = [(p.digit, cells[(p.row + 1, p.col)].digit) for p in canvas.placements
             if (p.row + 1, p.col) in cells]  # fmt: skip
    if rng.random() < 0.5:  # yes: a real vertical pair
        if not pairs:
            return None
        a, b = rng.choice(pairs)
    else:  # no: two digits of the canvas (or any two) that are not such a pair
        pool = present if len(present) > 1 else list(range(10))
        a, b = rng.choice(pool), rng.choice(pool)
    return QAExample(canvas, question_words("exists", a, b), exists_answer(canvas, a, b), "exists")


def generate(
    rng: random.Random, pool: list[int], n: int, combos: list[tuple[str, int]]
) -> list[QAExample]:
    """``n`` examples, each of a (template, digit count) drawn from ``combos``, on canvases of
    images from ``pool``."""
    out: list[QAExample] = []
    while len(out) < n:
        template, count = combos[rng.randrange(len(combos))]
        example = None
        while example is None:
            example = _ask(rng, random_canvas(rng, pool, ROWS, COLS, count), template)
        out.append(example)
    return out


def digit_qa_task(sizes: tuple[int, int, int], seed: int, **_: int) -> Splits[QAExample]:
    """Train on every template × digit count but the held-out ones; validate and test on the
    held-out ones, each split on its own pool of images."""
    pools = image_split(seed)
    seen = [(t, c) for t in TEMPLATES for c in COUNTS if c != held_out(t)]
    unseen = [(t, held_out(t)) for t in TEMPLATES]
    rng = random.Random(seed + 1)
    return Splits(
        generate(rng, pools.train, sizes[0], seen),
        generate(rng, pools.valid, sizes[1], unseen),
        generate(rng, pools.test, sizes[2], unseen),
    )


# valid/test: held-out (template, digit count) combinations
TASKS.register(Task("digit-qa", digit_qa_task, (6000, 500, 500), family="qa"))


__all__ = [
    "COUNTS",
    "TEMPLATES",
    "QAExample",
    "count_answer",
    "digit_qa_task",
    "exists_answer",
    "generate",
    "held_out",
    "neighbour_answer",
    "question_words",
]
