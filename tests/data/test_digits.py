"""The digit images and canvases: pixels land in the right cells, pools are disjoint."""

import random

import numpy as np
import pytest

from attnkit.data import digits


def test_images_are_sklearns_digits_scaled_to_unit_range():
    images, labels = digits.digit_images()
    assert images.shape == (1797, 8, 8) and labels.shape == (1797,)
    assert images.min() == 0.0 and images.max() == 1.0
    assert set(labels.tolist()) == set(range(10))


def test_image_pools_are_disjoint_cover_everything_and_depend_on_the_seed():
    a = digits.image_split(seed=0)
    assert not set(a.train) & set(a.test) and not set(a.valid) & set(a.test)
    assert sorted(a.train + a.valid + a.test) == list(range(1797))
    assert digits.image_split(seed=0) == a and digits.image_split(seed=1) != a


def test_render_puts_each_image_in_its_cell_and_zeros_elsewhere():
    images, labels = digits.digit_images()
    c = digits.Canvas(2, 3, (digits.Placement(5, int(labels[5]), 1, 2),))
    px = digits.render(c)
    assert px.shape == (16, 24)
    np.testing.assert_array_equal(px[8:16, 16:24], images[5])
    px[8:16, 16:24] = 0
    assert not px.any()


def test_random_canvas_reading_order_and_labels():
    pools = digits.image_split(seed=0)
    c = digits.random_canvas(random.Random(3), pools.test, rows=3, cols=3, count=5)
    labels = digits.digit_images()[1]
    assert len(c.placements) == 5
    assert all(p.image in set(pools.test) and p.digit == labels[p.image] for p in c.placements)
    order = [(p.row, p.col) for p in digits.reading_order(c)]
    assert order == sorted(order)


def test_bad_canvases_are_clear_errors():
    with pytest.raises(ValueError, match="do not fit"):
        digits.random_canvas(random.Random(0), [0], rows=1, cols=2, count=3)
    with pytest.raises(ValueError, match="two digits in one cell"):
        digits.Canvas(1, 2, (digits.Placement(0, 0, 0, 0), digits.Placement(1, 1, 0, 0)))
    with pytest.raises(ValueError, match="outside"):
        digits.Canvas(1, 2, (digits.Placement(0, 0, 0, 5),))
