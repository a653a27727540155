"""The inductive-bias experiment's data: two image tasks on scikit-learn's 8×8 digits, nested
class-balanced training subsets, and the patching of an image into a sequence of patches.

    digits:  one 8×8 digit, label = the digit.
    canvas:  one 8×8 digit in one cell of an empty 3×3 canvas (24×24 pixels), label = the
             digit. Each training image sits in one random cell; every held-out image is
             tested in all 9 cells (by default). The label is invariant to where the digit
             is, so a model that shares its weights across positions (convolution + pooling)
             should generalise to cells it never saw a digit in, while patches + learned
             position embeddings must learn each cell's layout from data: the task rewards a
             locality / translation prior.

The images are split first (``attnkit.data.digits.image_split``): training images vs held-out
images (its valid and test pools together; no model selection is done), so a test digit was
never seen in training, at any position.

A training subset of fraction f is the first max(C, round(f·N)) images of one class-balanced
order per seed (each class's images shuffled, then dealt round-robin: class 0, 1, ..., 9,
0, 1, ...). Subsets are nested (the 5% subset contains the 1% one) and every subset of at
least C images holds every class, as evenly as the class sizes allow.

Legend: N images, C classes, S image side (pixels), P patch side, n = (S/P)² patches.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from einops import rearrange
from torch import Tensor

from ...data.digits import Canvas, Placement, digit_images, image_split, render_batch

TASKS = ("digits", "canvas")
CLASSES = 10
CANVAS_CELLS = 3  # the canvas task's grid is CANVAS_CELLS × CANVAS_CELLS cells of 8×8 pixels


@dataclass(frozen=True)
class ImageTask:
    """Training and test images of one task: x (N, S, S) float32 in [0, 1], y (N,) int64;
    ``test_image`` (N,): which digit image (an index into ``digit_images()``) each test
    example shows; ``test_cell`` (N,): its canvas cell r·3 + c (None for plain digits)."""

    name: str
    train_x: Tensor
    train_y: Tensor
    test_x: Tensor
    test_y: Tensor
    test_image: Tensor
    test_cell: Tensor | None = None

    @property
    def side(self) -> int:
        return int(self.train_x.shape[-1])


def held_out_pools(seed: int) -> tuple[list[int], list[int]]:
    """Image indices (training, held-out): ``image_split(seed)``'s train, and valid + test."""
    pools = image_split(seed)
    return pools.train, pools.valid + pools.test


@lru_cache(maxsize=4)
def load_task(name: str, seed: int, test_cells: int = CANVAS_CELLS**2) -> ImageTask:
    """The ``digits`` or ``canvas`` task on the image split of ``seed`` (see module doc);
    on the canvas, each held-out image is tested in ``test_cells`` distinct cells (all 9 by
    default; fewer are drawn with ``seed``). Cached: the runs of one process share it."""
    if not 1 <= test_cells <= CANVAS_CELLS**2:
        raise ValueError(f"test_cells={test_cells}; pick 1..{CANVAS_CELLS**2} cells")
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {TASKS}")
    images, labels = digit_images()
    train, test = held_out_pools(seed)
    if name == "digits":
        return ImageTask(
            name,
            torch.from_numpy(images[train].copy()),  # (N, 8, 8)
            torch.from_numpy(labels[train].copy()),
            torch.from_numpy(images[test].copy()),
            torch.from_numpy(labels[test].copy()),
            torch.tensor(test),
        )
    rng = random.Random(seed)
    cells = CANVAS_CELLS * CANVAS_CELLS
    train_cells = [rng.randrange(cells) for _ in train]
    test_pairs = [(i, c) for i in test for c in sorted(rng.sample(range(cells), test_cells))]
    tx, ty = _canvases(list(zip(train, train_cells, strict=True)))
    vx, vy = _canvases(test_pairs)
    image, cell = (torch.tensor(v) for v in zip(*test_pairs, strict=True))
    return ImageTask(name, tx, ty, vx, vy, image, cell)


def _canvases(pairs: list[tuple[int, int]]) -> tuple[Tensor, Tensor]:
    """One canvas per (image, cell): pixels (N, 24, 24) and the digits (N,)."""
    labels = digit_images()[1]
    n = CANVAS_CELLS
    canvases = [Canvas(n, n, (Placement(i, int(labels[i]), c // n, c % n),)) for i, c in pairs]
    y = np.array([int(labels[i]) for i, _ in pairs], dtype=np.int64)
    return torch.from_numpy(render_batch(canvases)), torch.from_numpy(y)


def balanced_order(labels: Tensor, seed: int) -> list[int]:
    """Indices of ``labels`` (N,) in a class-balanced order: each class's indices shuffled
    with ``seed``, then dealt round-robin over the classes in increasing order."""
    rng = random.Random(seed)
    by_class: dict[int, list[int]] = {}
    for i, y in enumerate(labels.tolist()):
        by_class.setdefault(int(y), []).append(i)
    queues = [by_class[c] for c in sorted(by_class)]
    for q in queues:
        rng.shuffle(q)
    order = []
    for rank in range(max(len(q) for q in queues)):
        order += [q[rank] for q in queues if rank < len(q)]
    return order


def subset_size(n: int, fraction: float, classes: int = CLASSES) -> int:
    """Training images used at ``fraction`` of ``n``: round(f·n), at least one per class."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction={fraction}; it must be in (0, 1]")
    return min(n, max(classes, round(fraction * n)))


def parse_fractions(text: str) -> list[float]:
    """``"0.01,0.05,1"`` -> [0.01, 0.05, 1.0], sorted, each in (0, 1], at least two."""
    try:
        values = sorted({float(f) for f in text.split(",") if f.strip()})
    except ValueError:
        raise ValueError(
            f"--fractions {text!r}: pass comma-separated numbers in (0, 1], e.g. 0.01,0.1,1"
        ) from None
    if len(values) < 2 or not all(0 < f <= 1 for f in values):
        raise ValueError(f"--fractions {text!r}: need at least two fractions, each in (0, 1]")
    return values


def patchify(x: Tensor, patch: int) -> Tensor:
    """images (B, S, S) -> patches (B, n, P²), row by row, each patch flattened row-major."""
    if x.shape[-1] % patch or x.shape[-2] % patch:
        raise ValueError(
            f"image {tuple(x.shape[-2:])} does not divide into {patch}x{patch} patches"
        )
    return rearrange(x, "b (h p) (w q) -> b (h w) (p q)", p=patch, q=patch)  # (B, n, P²)


def unpatchify(patches: Tensor, patch: int) -> Tensor:
    """patches (B, n, P²) of a square grid -> images (B, S, S); the inverse of ``patchify``."""
    side = round(patches.shape[1] ** 0.5)
    if side * side != patches.shape[1]:
        raise ValueError(f"{patches.shape[1]} patches do not form a square grid")
    return rearrange(patches, "b (h w) (p q) -> b (h p) (w q)", h=side, p=patch)  # (B, S, S)


def upsample(maps: Tensor, patch: int) -> Tensor:
    """Per-patch values (B, S/P, S/P) -> per-pixel (B, S, S): each patch's value on its P×P
    pixels (nearest neighbour; the sum over pixels is P² times the sum over patches)."""
    return maps.repeat_interleave(patch, dim=-2).repeat_interleave(patch, dim=-1)  # (B, S, S)


__all__ = [
    "CANVAS_CELLS",
    "CLASSES",
    "TASKS",
    "ImageTask",
    "balanced_order",
    "held_out_pools",
    "load_task",
    "parse_fractions",
    "patchify",
    "subset_size",
    "unpatchify",
    "upsample",
]
