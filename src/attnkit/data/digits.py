"""Handwritten digits that ship with scikit-learn, and canvases of several of them.

``sklearn.datasets.load_digits`` reads 1,797 8×8 images (16 grey levels, UCI "Optical
Recognition of Handwritten Digits") from a file inside the scikit-learn package: nothing is
downloaded. The tasks built on them (digit captions, digit questions, the inductive-bias
experiment) split the *images* first, so that a test canvas only holds images never seen in
training, and describe a canvas by integers (which image goes in which grid cell) so that an
example stays small, hashable and JSON-able; ``render`` turns it into pixels when batched.

    images, labels = digit_images()              # (N, 8, 8) float32 in [0, 1], (N,) int
    pools = image_split(seed=0)                  # Splits of image indices, disjoint
    c = random_canvas(rng, pools.train, rows=2, cols=3, count=4)
    render(c)                                    # (2·8, 3·8) float32, zeros where no digit
    [p.digit for p in reading_order(c)]          # the digits row by row, left to right

Legend: N images, R canvas rows (cells), C canvas columns (cells), S = 8 pixels per side.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .example import Splits

SIDE = 8  # pixels per side of one digit image
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@lru_cache(maxsize=1)
def digit_images() -> tuple[np.ndarray, np.ndarray]:
    """All 1,797 images scaled to [0, 1] ``(N, 8, 8)`` float32, and their labels ``(N,)``."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:  # pragma: no cover - scikit-learn is a dependency
        raise ImportError(
            "the digit tasks read scikit-learn's bundled load_digits images: "
            "pip install scikit-learn"
        ) from e
    bunch = load_digits()
    images = (np.asarray(bunch.images, dtype=np.float32) / 16.0).reshape(-1, SIDE, SIDE)
    images.setflags(write=False)
    labels = np.asarray(bunch.target, dtype=np.int64)
    labels.setflags(write=False)
    return images, labels


def image_split(
    seed: int = 0, fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)
) -> Splits[int]:
    """Image indices shuffled with ``seed`` and cut into disjoint train/valid/test pools
    (in the given fractions of the 1,797 images)."""
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"fractions={fractions}; give three positive fractions summing to 1")
    n = len(digit_images()[1])
    order = list(range(n))
    random.Random(seed).shuffle(order)
    a = round(fractions[0] * n)
    b = a + round(fractions[1] * n)
    return Splits(order[:a], order[a:b], order[b:])


@dataclass(frozen=True)
class Placement:
    """Image ``image`` (an index into ``digit_images()``) of digit ``digit`` in cell
    (``row``, ``col``) of a canvas."""

    image: int
    digit: int
    row: int
    col: int


@dataclass(frozen=True)
class Canvas:
    """A ``rows`` × ``cols`` grid of cells, some holding a digit image (at most one each)."""

    rows: int
    cols: int
    placements: tuple[Placement, ...]

    def __post_init__(self) -> None:
        if self.rows < 1 or self.cols < 1:
            raise ValueError(f"a canvas of {self.rows}x{self.cols} cells; both must be >= 1")
        cells = [(p.row, p.col) for p in self.placements]
        if len(set(cells)) != len(cells):
            raise ValueError(f"two digits in one cell: {cells}")
        for r, c in cells:
            if not (0 <= r < self.rows and 0 <= c < self.cols):
                raise ValueError(f"cell ({r}, {c}) is outside the {self.rows}x{self.cols} canvas")


def random_canvas(
    rng: random.Random, pool: list[int], rows: int, cols: int, count: int
) -> Canvas:
    """``count`` images drawn from ``pool`` (with replacement) in distinct random cells."""
    if not 1 <= count <= rows * cols:
        raise ValueError(f"count={count} digits do not fit {rows}x{cols} cells")
    if not pool:
        raise ValueError("the image pool is empty")
    labels = digit_images()[1]
    cells = rng.sample(range(rows * cols), count)
    placements = []
    for cell in cells:
        image = pool[rng.randrange(len(pool))]
        placements.append(Placement(image, int(labels[image]), cell // cols, cell % cols))
    return Canvas(rows, cols, tuple(placements))


def render(canvas: Canvas) -> np.ndarray:
    """The canvas's pixels ``(R·8, C·8)`` float32 in [0, 1]; empty cells are 0."""
    images = digit_images()[0]
    out = np.zeros((canvas.rows * SIDE, canvas.cols * SIDE), dtype=np.float32)
    for p in canvas.placements:
        out[p.row * SIDE : (p.row + 1) * SIDE, p.col * SIDE : (p.col + 1) * SIDE] = images[p.image]
    return out


def render_batch(canvases: list[Canvas]) -> np.ndarray:
    """Canvases of one size stacked: ``(B, R·8, C·8)``."""
    sizes = {(c.rows, c.cols) for c in canvases}
    if len(sizes) != 1:
        raise ValueError(f"canvases of different sizes {sorted(sizes)} cannot be stacked")
    return np.stack([render(c) for c in canvases])


def reading_order(canvas: Canvas) -> list[Placement]:
    """The placements row by row (top to bottom), left to right within a row."""
    return sorted(canvas.placements, key=lambda p: (p.row, p.col))


__all__ = [
    "DIGIT_WORDS",
    "SIDE",
    "Canvas",
    "Placement",
    "digit_images",
    "image_split",
    "random_canvas",
    "reading_order",
    "render",
    "render_batch",
]
