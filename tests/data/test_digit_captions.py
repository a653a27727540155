"""Digit captions: captions name the canvas's digits in reading order (position words where
rows break), splits use disjoint images, batches pad and mask canvases of different sizes."""

import random

import numpy as np
import pytest

from attnkit.data import digit_captions as dc
from attnkit.data import digits
from attnkit.data.tasks import load_task, task_family
from attnkit.data.vocab import Vocab


def _canvas(cells):
    """cells: [(digit, row, col)] -> a 3x3 canvas of images of those digits."""
    labels = digits.digit_images()[1]
    first = {d: int(np.flatnonzero(labels == d)[0]) for d in range(10)}
    return digits.Canvas(3, 3, tuple(digits.Placement(first[d], d, r, c) for d, r, c in cells))


def test_caption_reads_row_by_row_left_to_right_whatever_the_placement_order():
    c = _canvas([(7, 2, 0), (3, 0, 2), (1, 0, 0), (8, 1, 1)])
    assert dc.caption_words(c) == ("one", "three", "eight", "seven")
    assert dc.caption_words(c, positions=True) == (
        "one",
        "left-of",
        "three",
        "above",
        "eight",
        "above",
        "seven",
    )
    assert dc.digit_words(dc.caption_words(c, positions=True)) == ["one", "three", "eight", "seven"]


def test_generated_captions_match_their_canvases_and_splits_use_disjoint_images():
    splits = dc.generate((40, 10, 10), seed=3)
    labels = digits.digit_images()[1]
    pools = digits.image_split(3)
    for split, pool in ((splits.train, pools.train), (splits.test, pools.test)):
        for ex in split:
            order = sorted(ex.canvas.placements, key=lambda p: (p.row, p.col))
            assert list(ex.words) == [digits.DIGIT_WORDS[labels[p.image]] for p in order]
            assert 3 <= len(ex.words) <= 5
            assert {p.image for p in ex.canvas.placements} <= set(pool)
    assert dc.generate((40, 10, 10), seed=3) == splits  # same seed, same data
    assert dc.generate((40, 10, 10), seed=4) != splits


def test_tasks_are_registered_as_caption_tasks_with_position_words_in_the_pos_task():
    s = load_task("digit-captions-pos", seed=0, train_size=30, valid_size=2, test_size=2)
    assert task_family("digit-captions") == task_family("digit-captions-pos") == "caption"
    assert any(w in dc.POSITION_WORDS for ex in s.train for w in ex.words)
    plain = load_task("digit-captions", seed=0, train_size=30, valid_size=2, test_size=2)
    assert not any(w in dc.POSITION_WORDS for ex in plain.train for w in ex.words)


def test_batches_pad_smaller_canvases_and_mask_their_pixels():
    labels = digits.digit_images()[1]
    small = digits.Canvas(1, 2, (digits.Placement(0, int(labels[0]), 0, 1),))
    examples = [
        dc.CaptionExample(_canvas([(4, 2, 2)]), ("four",)),
        dc.CaptionExample(small, dc.caption_words(small)),
    ]
    vocab = Vocab.build([e.words for e in examples])
    (b,) = dc.batches(examples, vocab, vocab, 8)
    assert b.image.shape == (2, 1, 24, 24) and b.pixels.shape == (2, 24, 24)
    assert (
        b.pixels[1, :8, :16].all() and not b.pixels[1, 8:].any() and not b.pixels[1, :, 16:].any()
    )
    np.testing.assert_array_equal(b.image[1, 0, :8, 8:16].numpy(), digits.digit_images()[0][0])
    assert b.tgt_in[:, 0].tolist() == [vocab.bos_id] * 2
    zero, four = vocab.index["zero"], vocab.index["four"]
    assert b.tgt_out.tolist() == [[four, vocab.eos_id], [zero, vocab.eos_id]]
    assert b.tokens == 4
    order = [x.index for x in dc.batches(examples * 5, vocab, vocab, 3, random.Random(0))]
    assert sorted(i for idx in order for i in idx) == list(range(10))
    with pytest.raises(ValueError, match="batch size"):
        dc.batches(examples, vocab, vocab, 0)
