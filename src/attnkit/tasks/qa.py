"""The "qa" task family (tasks/family.py): a canvas and a question in, one answer word out.

Examples are ``attnkit.data.digit_qa.QAExample``: the question's words make the source
vocabulary, the answers the target vocabulary (one token each). A batch renders its canvases:

    image (B, 1, H, W) float, question (B, T) ids (0 = pad), q_len (B,), answer (B,) ids

    loss = −(1/B) Σ_b log p(answer_b | canvas_b, question_b)      (cross-entropy)

Scored by accuracy, overall and per question template (``attnkit evaluate``); shown by both
co-attention maps, over the image patches and over the question words (``attnkit view``).
Legend: B batch, T question words, H, W canvas pixels, A answers.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.batching import TensorBatch
from ..data.digit_qa import QAExample
from ..data.digits import render, render_batch
from ..data.vocab import Vocab
from .family import Family, device_of


@dataclass
class QABatch(TensorBatch):
    """Rendered canvases, question ids and lengths, answer ids, and the examples' positions."""

    image: Tensor  # (B, 1, H, W)
    question: Tensor  # (B, T)
    q_len: Tensor  # (B,)
    answer: Tensor  # (B,)
    index: list[int]

    @property
    def tokens(self) -> int:
        """The loss is a mean over examples."""
        return len(self.index)


def make_batch(examples: Sequence[QAExample], idx: list[int], src: Vocab, tgt: Vocab) -> QABatch:
    """The batch of ``examples[i]`` for i in ``idx``."""
    chosen = [examples[i] for i in idx]
    image = torch.from_numpy(render_batch([e.canvas for e in chosen]))[:, None]  # (B, 1, H, W)
    ids = [src.encode(e.question, eos=False) for e in chosen]
    q_len = torch.tensor([len(x) for x in ids])  # (B,)
    question = torch.zeros(len(ids), int(q_len.max()), dtype=torch.long)  # (B, T)
    for b, x in enumerate(ids):
        question[b, : len(x)] = torch.tensor(x)
    answer = torch.tensor([tgt.index.get(e.answer, tgt.unk_id) for e in chosen])  # (B,)
    return QABatch(image, question, q_len, answer, list(idx))


def qa_batches(
    examples: Sequence[QAExample], src: Vocab, tgt: Vocab, size: int, rng: random.Random | None
) -> list[QABatch]:
    """Batches of ``size``, shuffled with ``rng`` (training) or in order (evaluation)."""
    order = list(range(len(examples)))
    if rng is not None:
        rng.shuffle(order)
    return [make_batch(examples, order[i : i + size], src, tgt) for i in range(0, len(order), size)]



def qa_loss(model: nn.Module, b: QABatch, label_smoothing: float = 0.0) -> tuple[Tensor, Any]:
    """Mean cross-entropy of the answers."""
    b = b.to(device_of(model))
    out = model(b.image, b.question, b.q_len)
    return F.cross_entropy(out.logits, b.answer, label_smoothing=label_smoothing), out


def qa_eval_loss(model: nn.Module, b: QABatch) -> tuple[float, int]:
    """Summed cross-entropy of the answers, and the number of examples."""
    b = b.to(device_of(model))
    out = model(b.image, b.question, b.q_len)
    return float(F.cross_entropy(out.logits, b.answer, reduction="sum")), len(b.index)


@torch.no_grad()
def predict(
    model: nn.Module, examples: Sequence[QAExample], src: Vocab, tgt: Vocab, size: int = 256
) -> list[str]:
    """The model's answer (arg-max) to each example, in eval mode."""
    was = model.training
    model.eval()
    answers: list[str] = []
    for b in qa_batches(examples, src, tgt, size, None):
        b = b.to(device_of(model))
        ids = model(b.image, b.question, b.q_len).logits.argmax(-1)  # (B,)
        answers += [tgt.tokens[int(i)] for i in ids]
    model.train(was)
    return answers


def accuracies(answers: Sequence[str], examples: Sequence[QAExample]) -> dict[str, float]:
    """{"accuracy": overall, "accuracy_<template>": per template} of the answers."""
    right = np.array([a == e.answer for a, e in zip(answers, examples, strict=True)])
    out = {"accuracy": float(right.mean()) if len(right) else 0.0}
    for t in sorted({e.template for e in examples}):
        mine = np.array([e.template == t for e in examples])
        out[f"accuracy_{t}"] = float(right[mine].mean())
    return out


def qa_score(
    model: nn.Module, examples: list[QAExample], src: Vocab, tgt: Vocab
) -> float | None:
    """Validation accuracy (None for no examples)."""
    if not examples:
        return None
    return accuracies(predict(model, examples, src, tgt), examples)["accuracy"]


def qa_evaluate(loaded: Any, examples: list[QAExample]) -> dict[str, float]:
    """Accuracy overall and per question template, for ``attnkit evaluate``."""
    answers = predict(loaded.model, examples, loaded.src_vocab, loaded.tgt_vocab)
    return accuracies(answers, examples)


def qa_show(
    loaded: Any, examples: list[QAExample], index: int, out: str | None, png: str | None
) -> list[str]:
    """Both co-attention maps of example ``index``, for ``attnkit view --checkpoint``."""
    from ..viz.coattention import show_maps

    maps = coattention_maps(loaded.model, examples[index], loaded.src_vocab, loaded.tgt_vocab)
    return show_maps(maps, index, out, png)


@torch.no_grad()
def coattention_maps(model: Any, example: Any, src_vocab: Any, tgt_vocab: Any) -> Any:
    """Both maps of ``model`` (``attnkit.models.digit_qa.DigitQA``) on one ``QAExample``: a
    ``attnkit.viz.coattention.CoAttentionMaps`` of the canvas, the words, the weights over the
    words and the patches, the model's answer and the true one."""
    variant = model.config.coattention
    if variant == "none" and getattr(model.config, "pool", "mean") == "mean":
        raise ValueError(
            "this model pools the question and the image by their means (coattention='none'): "
            "it has no attention to show; view a parallel, alternating, stacked or "
            "pool=multidim model"
        )
    was = model.training
    model.eval()
    b = make_batch([example], [0], src_vocab, tgt_vocab).to(device_of(model))
    out = model(b.image, b.question, b.q_len)
    model.train(was)
    h, w = out.grid
    summary = out.coattention.summary_weights if out.coattention is not None else None
    hops = None if out.stacked is None else out.stacked.weights[0]  # (K, N): stacked attention
    q_w = out.question_weights  # None for stacked attention: it reads no word states
    from ..viz.coattention import CoAttentionMaps

    return CoAttentionMaps(
        canvas=render(example.canvas),
        words=list(example.question),
        question_weights=None if q_w is None else q_w[0].double().cpu().numpy(),  # (T,)
        image_weights=out.image_weights[0].double().cpu().numpy().reshape(h, w),  # (h, w)
        summary_weights=None if summary is None else summary[0].double().cpu().numpy(),
        hop_weights=None if hops is None else hops.double().cpu().numpy().reshape(-1, h, w),
        predicted=tgt_vocab.tokens[int(out.logits[0].argmax())],
        answer=example.answer,
        template=example.template,
        variant=variant if variant != "none" else f"none, {model.config.pool} pooling",
    )



QA = Family(
    name="qa",
    tokens=lambda e: (e.question, (e.answer,)),
    batches=qa_batches,
    loss_of=qa_loss,
    eval_loss=qa_eval_loss,
    score=qa_score,
    score_name="accuracy",
    evaluate=qa_evaluate,
    show=qa_show,
    default_model="digit-qa",
)

__all__ = ["QA", "QABatch", "accuracies", "make_batch", "predict", "qa_batches"]
