"""The caption family (tasks/family.py): an image -> a caption, e.g. ``digit-captions``.

Trained on the captioner's own loss (models/captioner.py: cross-entropy, the doubly
stochastic penalty, REINFORCE for hard attention), validated on the plain teacher-forced
cross-entropy of the test-time model, scored by greedy exact match; ``attnkit evaluate``
reports exact match, per-digit accuracy, BLEU and chrF; ``attnkit view --checkpoint DIR
--example N`` draws the attention of each generated word over the canvas.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch.nn.functional as F
from torch import nn

from ..data import digit_captions as dc
from ..data.digits import render
from ..data.vocab import Vocab
from .family import Family, device_of


def caption_loss(model: nn.Module, b: Any, label_smoothing: float = 0.0) -> tuple[Any, Any]:
    """The captioner's training loss of batch ``b`` (its ``training_loss``)."""
    return model.training_loss(b.to(device_of(model)), label_smoothing)  # type: ignore[operator]


def caption_eval_loss(model: nn.Module, b: Any) -> tuple[float, int]:
    """Summed token cross-entropy of the test-time model (argmax or expectation for hard and
    gumbel attention, no penalty), and the number of target tokens."""
    b = b.to(device_of(model))
    out = model(b.image, b.pixels, b.tgt_in)
    total = F.cross_entropy(out.logits.transpose(1, 2), b.tgt_out, ignore_index=0, reduction="sum")
    return float(total), b.tokens


def decode(
    model: nn.Module, examples: Sequence[dc.CaptionExample], tgt_vocab: Vocab, batch_size: int = 256
) -> tuple[list[list[str]], list[np.ndarray], tuple[int, int]]:
    """Greedy captions (words), each one's attention (T, L) over its steps, and the grid of
    the last batch (one canvas size per task)."""
    device = device_of(model)
    words: list[list[str]] = []
    maps: list[np.ndarray] = []
    grid = (0, 0)
    for b in dc.batches(examples, Vocab.build([]), tgt_vocab, batch_size, None):
        b = b.to(device)
        ids, weights, grid = model.greedy(b.image, b.pixels)  # type: ignore[operator]
        for k, row in enumerate(ids):
            words.append([tgt_vocab.tokens[i] for i in row])
            maps.append(weights[k].float().cpu().numpy())  # (T, L)
    return words, maps, grid


def digit_accuracy(hyps: Sequence[Sequence[str]], refs: Sequence[Sequence[str]]) -> float:
    """Fraction of the references' digit words that the hypothesis has at the same place
    among its digit words (position words left out on both sides)."""
    right = total = 0
    for h, r in zip(hyps, refs, strict=True):
        hd, rd = dc.digit_words(h), dc.digit_words(r)
        right += sum(a == b for a, b in zip(hd, rd, strict=False))
        total += len(rd)
    return right / max(total, 1)


def cell_patches(row: int, col: int, grid: tuple[int, int], patch: int) -> list[int]:
    """The patch indices (row-major over a ``grid`` of patches) that cover canvas cell
    (``row``, ``col``) of 8×8 pixels."""
    k = 8 // patch  # patches per cell side
    return [(row * k + i) * grid[1] + col * k + j for i in range(k) for j in range(k)]


def attention_in_cell(
    hyps: Sequence[Sequence[str]],
    examples: Sequence[dc.CaptionExample],
    maps: Sequence[np.ndarray],
    grid: tuple[int, int],
    patch: int,
) -> float | None:
    """Where the attention was when a digit was named right: over the steps k whose word is
    the reference's digit word k, the mean attention mass Σ_{i in cell} α_ki on the cell of
    that digit (0..1; 1/L·cell size for uniform attention). None when no step qualifies."""
    masses = []
    for hyp, ex, weights in zip(hyps, examples, maps, strict=True):
        digits_in_order = iter(sorted(ex.canvas.placements, key=lambda p: (p.row, p.col)))
        for k, word in enumerate(ex.words):
            if word in dc.POSITION_WORDS:
                continue
            place = next(digits_in_order)
            if k < len(hyp) and hyp[k] == word:
                masses.append(
                    float(weights[k, cell_patches(place.row, place.col, grid, patch)].sum())
                )
    return float(np.mean(masses)) if masses else None


def caption_score(
    model: nn.Module, examples: list[Any], src_vocab: Vocab, tgt_vocab: Vocab
) -> float | None:
    """Greedy exact match of the captions (None for no examples)."""
    from ..eval.text import exact_match

    if not examples:
        return None
    hyps = decode(model, examples, tgt_vocab)[0]
    return exact_match(hyps, [e.tgt for e in examples])


def caption_evaluate(loaded: Any, examples: list[Any]) -> dict[str, float]:
    """exact match, per-digit accuracy (fractions), BLEU and chrF (0..100, sacrebleu on the
    words as tokens) of greedy captions, and ``attention_in_cell``: the attention mass on the
    digit's cell when a digit was named right (omitted when none was)."""
    from ..data.example import Example
    from ..eval.text import score

    hyps, maps, grid = decode(loaded.model, examples, loaded.tgt_vocab)
    s = score(hyps, [Example([], e.tgt) for e in examples])
    scores = {
        "exact_match": s.exact_match,
        "digit_accuracy": digit_accuracy(hyps, [e.tgt for e in examples]),
        "bleu": s.bleu,
        "chrf": s.chrf,
    }
    mass = attention_in_cell(hyps, examples, maps, grid, int(loaded.model.config.patch))
    return scores if mass is None else {**scores, "attention_in_cell": mass}


def caption_show(
    loaded: Any, examples: list[Any], index: int, out: str | None, png: str | None
) -> list[str]:
    """Caption example ``index`` greedily; write its attention panels to ``png`` and the page
    to ``out``; the lines to print."""
    from ..viz.caption_view import caption_figure, write_caption_page

    ex = examples[index]
    words, maps, grid = decode(loaded.model, [ex], loaded.tgt_vocab)
    patch = int(loaded.model.config.patch)
    image = render(ex.canvas)  # (H, W)
    lines = [
        f"example {index}: {' '.join(ex.words)}",
        f"generated:  {' '.join(words[0])}",
        f"attention over a {grid[0]}x{grid[1]} grid of {patch}x{patch}-pixel patches "
        f"({loaded.model.config.softness}"
        + (
            f", {loaded.model.config.at_test} at test)"
            if loaded.model.config.resolved_softness.samples
            else ")"
        ),
    ]
    title = f"{loaded.model_name} ({loaded.model.config.softness}): example {index}"
    if png is not None:
        caption_figure(image, words[0], maps[0], grid, patch, path=png, title=title)
        lines.append(f"wrote {png}")
    if out is not None:
        page = write_caption_page(
            out, image, words[0], maps[0], grid, patch, reference=ex.words, title=title
        )
        lines.append(f"wrote {page}: open it in a browser (no network needed)")
    return lines


CAPTION = Family(
    name="caption",
    tokens=lambda e: ((), e.words),
    batches=dc.batches,
    loss_of=caption_loss,
    eval_loss=caption_eval_loss,
    score=caption_score,
    score_name="exact",
    evaluate=caption_evaluate,
    show=caption_show,
    default_model="captioner",
)

__all__ = [
    "CAPTION",
    "attention_in_cell",
    "caption_evaluate",
    "cell_patches",
    "decode",
    "digit_accuracy",
]
