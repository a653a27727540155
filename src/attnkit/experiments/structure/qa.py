"""digit-qa rows of the ``structure`` experiment: parallel co-attention, alternating
co-attention (Lu et al. 2016, eq. 3-4 and 5-6) and a baseline that pools the question and the
image by their means, trained with the same updates per seed.

    rows = measure(seeds=[0, 1, 2], steps=1500, quick=False, say=print)
    rows[0] == {"task": "digit-qa", "model": "parallel", "seed": 0, "accuracy": ...,
                "parameters": ..., "seconds_per_step": ...}

Every variant of one seed sees the same batches (``make_batch(step)`` draws batch ``step`` from
the training split with a generator seeded by (seed, step)), the same optimiser (Adam), learning
rate, clipping and number of steps (``attnkit.train.classify.fit_classifier``); the data (task
seed 0) are the same for every seed. Accuracy is on the test split: the held-out template ×
digit-count combinations, on images never seen in training (``attnkit.data.digit_qa``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from ...data.digit_qa import QAExample, digit_qa_task
from ...data.vocab import Vocab
from ...models import make_config
from ...models.digit_qa import COATTENTION, DigitQA
from ...tasks.qa import make_batch
from ...train.classify import accuracy, fit_classifier
from ..base import Tally

TASK_SEED = 0
BATCH = 64
LR = 2e-3
# (train, valid, test) examples and the model preset, full and quick
SIZES = {False: (6000, 1, 1000), True: (192, 1, 96)}
PRESET = {False: "small", True: "tiny"}


class _Indexed(nn.Module):
    """A split's rendered examples held once; forward(indices (B,)) -> the model's logits
    (B, A) on those examples. Lets ``fit_classifier`` (inputs -> logits) train a model that
    reads a canvas, a question and its length."""

    def __init__(self, model: DigitQA, examples: list[QAExample], src: Vocab, tgt: Vocab):
        super().__init__()
        self.model = model
        b = make_batch(examples, list(range(len(examples))), src, tgt)
        self.image, self.question, self.q_len, self.answer = b.image, b.question, b.q_len, b.answer

    def forward(self, idx: Tensor) -> Tensor:
        return self.model(self.image[idx], self.question[idx], self.q_len[idx]).logits  # (B, A)


def _batches(data: _Indexed, seed: int) -> Callable[[int], tuple[Tensor, Tensor]]:
    """make_batch(step): BATCH random training examples, a pure function of (seed, step)."""
    n = len(data.answer)

    def make(step: int) -> tuple[Tensor, Tensor]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        idx = torch.randint(n, (BATCH,), generator=g)  # (B,)
        return idx, data.answer[idx]

    return make


def measure(seeds: list[int], steps: int, quick: bool, say: Callable[[str], None]) -> list[dict]:
    """Train parallel, alternating and none on digit-qa for ``steps`` updates per seed; one row
    per (variant, seed) with the test accuracy, the parameter count and the seconds per step."""
    if steps < 1 or not seeds:
        raise ValueError(f"steps={steps}, seeds={seeds}: give at least one seed and one step")
    splits = digit_qa_task(SIZES[quick], TASK_SEED)
    src = Vocab.build(e.question for e in splits.train)
    tgt = Vocab.build((e.answer,) for e in splits.train)
    rows: list[dict[str, Any]] = []
    tally = Tally(len(seeds) * len(COATTENTION), say)
    for seed in seeds:
        for variant in COATTENTION:
            torch.manual_seed(seed)
            model = DigitQA(make_config("digit-qa", preset=PRESET[quick], src_vocab=len(src),
                                        tgt_vocab=len(tgt), coattention=variant))  # fmt: skip
            train = _Indexed(model, splits.train, src, tgt)
            test = _Indexed(model, splits.test, src, tgt)
            hist = fit_classifier(train, _batches(train, seed), steps, LR, seed)
            acc = accuracy(test, torch.arange(len(test.answer)), test.answer)
            rows.append({
                "task": "digit-qa", "model": variant, "seed": seed, "accuracy": acc,
                "parameters": sum(p.numel() for p in model.parameters()),
                "seconds_per_step": hist.seconds / steps,
            })  # fmt: skip
            tally(f"digit-qa {variant:<11} seed {seed}: test accuracy {acc:.3f} after {steps} "
                  f"steps ({hist.seconds / steps * 1000:.0f} ms/step)")  # fmt: skip
    return rows


__all__ = ["measure"]
