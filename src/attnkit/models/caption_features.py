"""Fixed image features for the captioner: its CNN trained once, as a digit classifier of every
patch, then frozen (Xu et al. 2015 used fixed features of a VGG net pretrained on ImageNet,
§4.3; here the same role, at toy scale, on the training canvases of ``digit-captions``).

    labels = cell_labels(canvases, patch)               # (B, L): the digit of each patch's cell
    state, report = pretrain_cnn(canvases, valid, channels=32, patch=8, seed=0)
    torch.save(state, "cnn.pt")                        # CaptionerConfig(features="cnn.pt",
                                                        #                 freeze_cnn=True)

The classifier is the captioner's own CNN (``cnn``, which ``PatchEncoder`` builds) with a
linear layer on each pooled patch, trained on the cross-entropy of the patch's label: the
digit (0–9) in the 8×8 canvas cell that holds the patch, or ``EMPTY`` (10). Only the CNN's
weights are kept.

Legend: B canvases, H/W pixels (rows·8, cols·8), L = (H/patch)·(W/patch) patches, C channels.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.digits import SIDE, Canvas, render

EMPTY = 10  # the label of a patch in an empty cell


def cnn(channels: int, patch: int, layers: int = 2) -> nn.Sequential:
    """The captioner's CNN (``PatchEncoder.cnn`` is built here, so a state_dict saved from one
    loads into the other): image (B, 1, H, W) -> (B, C, H/patch, W/patch).

    layers=2: conv3×3, ReLU, conv3×3, ReLU, max-pool patch×patch (a feature sees its patch
              and 2 pixels around it: 5×5 windows, pooled);
    layers=3: conv3×3, ReLU, max-pool 2×2, conv3×3, ReLU, conv3×3, ReLU, max-pool
              (patch/2)×(patch/2) (a feature sees 12×12 pixels: a whole 8×8 digit and its
              layout, as a deep net's late layer sees much of the image; patch ≥ 2)."""
    if layers == 2:
        return nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(patch),
        )
    if layers == 3 and patch >= 2:
        return nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(patch // 2),
        )
    raise ValueError(f"cnn layers={layers}, patch={patch}; choose layers 2, or 3 with patch >= 2")


def cell_labels(canvases: Sequence[Canvas], patch: int) -> Tensor:
    """(B, L) long, row-major over the patch grid: the digit of the 8×8 cell each patch lies
    in, ``EMPTY`` for an empty cell. Every canvas must have the same size."""
    if SIDE % patch:
        raise ValueError(f"patch={patch} does not tile an {SIDE}x{SIDE} cell; choose 1, 2, 4 or 8")
    sizes = {(c.rows, c.cols) for c in canvases}
    if len(sizes) != 1:
        raise ValueError(f"canvases of different sizes {sorted(sizes)}; give one size")
    rows, cols = sizes.pop()
    k = SIDE // patch  # patches per cell side
    out = torch.full((len(canvases), rows * k, cols * k), EMPTY, dtype=torch.long)
    for b, c in enumerate(canvases):
        for p in c.placements:
            out[b, p.row * k : (p.row + 1) * k, p.col * k : (p.col + 1) * k] = p.digit
    return out.flatten(1)  # (B, L)


def _images(canvases: Sequence[Canvas]) -> Tensor:
    return torch.from_numpy(np.stack([render(c) for c in canvases]))[:, None]  # (B, 1, H, W)


def _right(net: nn.Module, head: nn.Module, canvases: Sequence[Canvas], patch: int) -> Tensor:
    """(B, L) bool: the classifier's label of each patch is its cell's."""
    with torch.no_grad():
        grid = net(_images(canvases))  # (B, C, r, c)
        pred = head(grid.flatten(2).transpose(1, 2)).argmax(-1)  # (B, L)
    return pred == cell_labels(canvases, patch)


def patch_accuracy(
    net: nn.Module, head: nn.Module, canvases: Sequence[Canvas], patch: int
) -> float:
    """The fraction of patches whose label the classifier gets right."""
    return float(_right(net, head, canvases, patch).float().mean())


def canvas_accuracy(
    net: nn.Module, head: nn.Module, canvases: Sequence[Canvas], patch: int
) -> float:
    """The fraction of canvases whose every patch the classifier labels right: the caption
    exact match of a reader that looks at each digit's own cell and names it with this
    classifier (attention perfect, the readout the classifier's), so the features' ceiling."""
    return float(_right(net, head, canvases, patch).all(1).float().mean())


def pretrain_cnn(
    train: Sequence[Canvas],
    valid: Sequence[Canvas],
    *,
    channels: int,
    patch: int,
    seed: int,
    layers: int = 2,
    epochs: int = 4,
    batch_size: int = 64,
    lr: float = 3e-3,
) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Train ``cnn(channels, patch, layers)`` and a linear head on ``cell_labels`` with Adam,
    seeded by ``seed``; returns the CNN's state_dict and {"valid_accuracy", "train_accuracy",
    "valid_canvas_accuracy", "train_canvas_accuracy", "updates"} (patch and canvas
    accuracies after training; the valid canvases' images are unseen)."""
    if not train:
        raise ValueError("no training canvases to pretrain the CNN on")
    torch.manual_seed(seed)
    net, head = cnn(channels, patch, layers), nn.Linear(channels, EMPTY + 1)
    opt = torch.optim.Adam([*net.parameters(), *head.parameters()], lr=lr)
    images, labels = _images(train), cell_labels(train, patch)  # (N, 1, H, W), (N, L)
    order = list(range(len(train)))
    rng = random.Random(seed)
    updates = 0
    for _ in range(epochs):
        rng.shuffle(order)
        for i in range(0, len(order), batch_size):
            idx = order[i : i + batch_size]
            grid = net(images[idx])  # (b, C, r, c)
            logits = head(grid.flatten(2).transpose(1, 2))  # (b, L, 11)
            loss = F.cross_entropy(logits.transpose(1, 2), labels[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            updates += 1
    report = {"train_accuracy": patch_accuracy(net, head, train, patch),
              "valid_accuracy": patch_accuracy(net, head, valid, patch) if valid else None,
              "train_canvas_accuracy": canvas_accuracy(net, head, train, patch),
              "valid_canvas_accuracy": canvas_accuracy(net, head, valid, patch) if valid
              else None, "updates": updates}  # fmt: skip
    return {k: v.detach().clone() for k, v in net.state_dict().items()}, report


__all__ = ["EMPTY", "canvas_accuracy", "cell_labels", "cnn", "patch_accuracy", "pretrain_cnn"]
