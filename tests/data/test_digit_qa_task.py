"""digit-qa: every template's answer is right by construction, checked against an independent
reading of the canvas (a numpy grid of digits, -1 where empty); the held-out template ×
digit-count combinations are only in valid/test, on disjoint images; the same seed gives the
same data."""

from collections import Counter

import numpy as np
import pytest

from attnkit.data import digit_qa
from attnkit.data.digits import image_split
from attnkit.data.tasks import load_task, task_family


@pytest.fixture(scope="module")
def splits():
    return load_task("digit-qa", seed=3, train_size=600, valid_size=120, test_size=120)


def _grid(canvas) -> np.ndarray:
    g = np.full((canvas.rows, canvas.cols), -1)
    for p in canvas.placements:
        g[p.row, p.col] = p.digit
    return g


def _independent_answer(e) -> str:
    """The answer read off the grid, from the question's words alone."""
    g = _grid(e.canvas)
    w = e.question
    if w[0] == "which":  # which digit is {left of|right of|above|below} the D
        d = int(w[-1])
        ((r, c),) = np.argwhere(g == d)  # the asked digit is on the canvas exactly once
        dr, dc = {"left": (0, -1), "right": (0, 1), "above": (-1, 0), "below": (1, 0)}[w[3]]
        assert 0 <= r + dr < 3 and 0 <= c + dc < 3 and g[r + dr, c + dc] >= 0
        return str(g[r + dr, c + dc])
    if w[0] == "how":  # how many D s are there
        return str(int((g == int(w[2])).sum()))
    assert w[:2] == ("is", "there")  # is there a(n) A above a B
    a, b = int(w[3]), int(w[6])
    return "yes" if bool(((g[:-1] == a) & (g[1:] == b)).any()) else "no"


def test_every_answer_is_right_by_construction_on_every_template(splits):
    every = splits.train + splits.valid + splits.test
    assert {e.template for e in every} == set(digit_qa.TEMPLATES)
    for e in every:
        assert e.answer == _independent_answer(e), (e.question, _grid(e.canvas))


def test_the_question_words_of_each_template():
    assert " ".join(digit_qa.question_words("left", 7)) == "which digit is left of the 7"
    assert " ".join(digit_qa.question_words("below", 2)) == "which digit is below the 2"
    assert " ".join(digit_qa.question_words("count", 3)) == "how many 3 s are there"
    assert " ".join(digit_qa.question_words("exists", 8, 1)) == "is there an 8 above a 1"
    with pytest.raises(ValueError, match="unknown template"):
        digit_qa.question_words("behind", 1)


def test_held_out_combinations_are_only_in_valid_and_test_on_unseen_images(splits):
    def combos(xs):
        return {(e.template, len(e.canvas.placements)) for e in xs}

    unseen = {(t, digit_qa.held_out(t)) for t in digit_qa.TEMPLATES}
    assert combos(splits.train).isdisjoint(unseen)
    assert combos(splits.valid) <= unseen and combos(splits.test) == unseen
    pools = image_split(3)
    for xs, pool in ((splits.train, pools.train), (splits.test, pools.test)):
        assert {p.image for e in xs for p in e.canvas.placements} <= set(pool)


def test_yes_and_no_both_occur_and_counts_include_zero(splits):
    answers = Counter((e.template, e.answer) for e in splits.train)
    assert answers[("exists", "yes")] > 10 and answers[("exists", "no")] > 10
    assert answers[("count", "0")] > 0


def test_same_seed_same_data_and_the_qa_family():
    a = load_task("digit-qa", seed=1, train_size=20, valid_size=5, test_size=5)
    b = load_task("digit-qa", seed=1, train_size=20, valid_size=5, test_size=5)
    assert a == b
    assert task_family("digit-qa") == "qa"
