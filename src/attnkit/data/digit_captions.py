"""Digit captions: a canvas of 3–5 handwritten digits -> the digit words in reading order.

The image half of "Show, Attend and Tell" (Xu et al. 2015) at toy scale: the source is an
image (scikit-learn's bundled 8×8 digits, ``attnkit.data.digits``, nothing downloaded) and the
target a short caption. A canvas is a ``rows`` × ``cols`` grid of 8×8 cells (default 3×3),
``count`` of them (3..5) holding a digit; the caption names the digits row by row, left to
right:

    digit-captions        "three seven one eight"
    digit-captions-pos    "three left-of seven above one left-of eight"

With position words (``-pos``) a relation word stands between consecutive digits: ``left-of``
when the next digit is in the same row, ``above`` when it is in a lower row, so the caption
also says where the row breaks are (the order is not simply left to right across the canvas).
Train, valid and test canvases are drawn from disjoint pools of *images* (``image_split``), so
a test canvas holds only images never seen in training.

    ex = make_caption(canvas, positions=False)     # CaptionExample(canvas, words)
    batches(examples, src_vocab, tgt_vocab, 32, rng) -> [CaptionBatch]

Legend: B batch, H/W canvas height/width in pixels (rows·8, cols·8), T caption length + 1.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .batching import TensorBatch
from .digits import DIGIT_WORDS, Canvas, image_split, random_canvas, reading_order, render
from .example import Splits
from .task import TASKS, Task
from .vocab import Vocab

ROWS, COLS = 3, 3  # cells of a canvas
MIN_DIGITS, MAX_DIGITS = 3, 5
SAME_ROW, LOWER_ROW = "left-of", "above"  # the position words
POSITION_WORDS = (SAME_ROW, LOWER_ROW)


@dataclass(frozen=True)
class CaptionExample:
    """A canvas (which image in which cell) and its caption's words."""

    canvas: Canvas
    words: tuple[str, ...]

    @property
    def tgt(self) -> list[str]:
        return list(self.words)


def caption_words(canvas: Canvas, positions: bool = False) -> tuple[str, ...]:
    """The digit words in reading order (row by row, left to right); with ``positions`` a
    ``left-of`` (same row) or ``above`` (a lower row) between consecutive digits."""
    order = reading_order(canvas)
    words: list[str] = []
    for i, p in enumerate(order):
        if positions and i:
            words.append(SAME_ROW if order[i - 1].row == p.row else LOWER_ROW)
        words.append(DIGIT_WORDS[p.digit])
    return tuple(words)


def digit_words(words: Sequence[str]) -> list[str]:
    """The digit words of a caption, position words left out."""
    return [w for w in words if w not in POSITION_WORDS]


def generate(
    sizes: tuple[int, int, int],
    seed: int,
    *,
    positions: bool = False,
    rows: int = ROWS,
    cols: int = COLS,
) -> Splits[CaptionExample]:
    """``sizes`` (train, valid, test) canvases; each split's images come from its own pool of
    ``image_split(seed)``, so no image is shared between splits. Same seed, same splits."""
    if rows * cols < MAX_DIGITS:
        raise ValueError(f"a {rows}x{cols} canvas cannot hold {MAX_DIGITS} digits")
    pools = image_split(seed)
    rng = random.Random(seed + 1)
    out: list[list[CaptionExample]] = []
    for pool, n in zip((pools.train, pools.valid, pools.test), sizes, strict=True):
        split = []
        for _ in range(n):
            count = rng.randint(MIN_DIGITS, MAX_DIGITS)
            canvas = random_canvas(rng, pool, rows, cols, count)
            split.append(CaptionExample(canvas, caption_words(canvas, positions)))
        out.append(split)
    return Splits(*out)


def captions_task(sizes: tuple[int, int, int], seed: int, **_: int) -> Splits[CaptionExample]:
    return generate(sizes, seed)


def positions_task(sizes: tuple[int, int, int], seed: int, **_: int) -> Splits[CaptionExample]:
    return generate(sizes, seed, positions=True)


@dataclass
class CaptionBatch(TensorBatch):
    """image (B, 1, H, W) float in [0, 1], zero-padded to the largest canvas; pixels (B, H, W)
    bool, True inside the example's canvas; tgt_in / tgt_out (B, T) ids, bos-shifted input and
    eos-ended output, 0-padded; index: positions of the examples in their split."""

    image: Tensor
    pixels: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    index: list[int]

    @property
    def tokens(self) -> int:
        return int((self.tgt_out != 0).sum())


def collate(examples: Sequence[CaptionExample], index: list[int], tgt_vocab: Vocab) -> CaptionBatch:
    """One batch of the examples at ``index``: canvases of different sizes are zero-padded
    at the bottom and right, and their pixel mask says where each canvas ends."""
    canvases = [examples[i].canvas for i in index]
    h = max(c.rows for c in canvases) * 8
    w = max(c.cols for c in canvases) * 8
    image = np.zeros((len(index), 1, h, w), dtype=np.float32)  # (B, 1, H, W)
    pixels = np.zeros((len(index), h, w), dtype=bool)  # (B, H, W)
    for k, c in enumerate(canvases):
        image[k, 0, : c.rows * 8, : c.cols * 8] = render(c)
        pixels[k, : c.rows * 8, : c.cols * 8] = True
    ids = [tgt_vocab.encode(examples[i].words, bos=True, eos=True) for i in index]
    t = max(len(x) for x in ids) - 1
    tgt_in = torch.zeros(len(index), t, dtype=torch.long)  # (B, T)
    tgt_out = torch.zeros(len(index), t, dtype=torch.long)  # (B, T)
    for k, x in enumerate(ids):
        tgt_in[k, : len(x) - 1] = torch.tensor(x[:-1])
        tgt_out[k, : len(x) - 1] = torch.tensor(x[1:])
    return CaptionBatch(torch.from_numpy(image), torch.from_numpy(pixels), tgt_in, tgt_out, index)


def batches(
    examples: Sequence[CaptionExample],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    size: int,
    rng: random.Random | None = None,
) -> list[CaptionBatch]:
    """Batches of ``size`` examples, shuffled by ``rng`` (training) or in order (evaluation).
    The source vocabulary is unused: the source is pixels."""
    if size < 1:
        raise ValueError(f"batch size {size}; it must be >= 1")
    order = list(range(len(examples)))
    if rng is not None:
        rng.shuffle(order)
    return [collate(examples, order[i : i + size], tgt_vocab) for i in range(0, len(order), size)]


TASKS.register(Task("digit-captions", captions_task, (6000, 300, 500), family="caption"))
TASKS.register(Task("digit-captions-pos", positions_task, (6000, 300, 500), family="caption"))


__all__ = [
    "POSITION_WORDS",
    "CaptionBatch",
    "CaptionExample",
    "batches",
    "caption_words",
    "captions_task",
    "collate",
    "digit_words",
    "generate",
    "positions_task",
]
