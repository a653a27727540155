"""Task families: what kind of learning a task is, as the small functions training needs.

A *family* groups the tasks whose examples batch, lose, score and show the same way:

    translate   tokens -> tokens    toy-ko, dates, copy/reverse/sort, coref, corpora
    (others)    in tasks/registry   e.g. image -> tokens (captions), inputs -> a label,
                                    a series -> its future (forecasting)

Each family is a module of ``attnkit/tasks/`` (one per kind of task, translation included);
this module holds the ``Family`` type they are built from, registry.py the names they are
found by. Both sit below the training loop: ``attnkit.fit`` resolves a run's family and passes
it to the loop, and nothing in ``attnkit/tasks/`` imports ``attnkit.train``.

The one training loop (train/loop.py), ``attnkit.fit``, ``attnkit evaluate``, ``attnkit view``
and ``attnkit translate`` call a family's functions and read its capabilities
(``translates``), never its name, so a new kind of task is one ``Family`` in ``tasks/`` and one
line in ``registry.FAMILIES``.

Batches of every family carry ``.to(device)`` (a copy on the device), ``.tokens`` (how many
units the loss is a mean over: target tokens, examples, forecast points) and ``.index`` (the
positions of their examples in the split).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..data.vocab import Vocab

Batches = Callable[[Sequence[Any], Vocab, Vocab, int, "random.Random | None"], Sequence[Any]]


@dataclass(frozen=True)
class Family:
    """The functions that make one kind of task trainable, scorable and viewable.

    tokens(example) -> (source tokens, target tokens): what the two vocabularies are built
        from (empty sequences when a side has no tokens, e.g. pixels or numbers).
    batches(examples, src_vocab, tgt_vocab, batch_size, rng) -> batches; with ``rng``
        shuffled (training), without it in a fixed order (evaluation).
    loss_of(model, batch, label_smoothing) -> (mean training loss over ``batch.tokens``, the
        model's output); may hold extra terms a model trains with (REINFORCE, a KL).
    eval_loss(model, batch) -> (summed loss, units): the validation loss, a plain negative
        log-likelihood (or squared error) that early stopping compares across epochs.
    score(model, examples, src_vocab, tgt_vocab) -> a validation score in [0, 1], higher is
        better (greedy exact match, accuracy), or None when the family has none.
    evaluate(loaded, examples) -> {metric: value}, for ``attnkit evaluate``.
    show(loaded, examples, index, out, png) -> lines to print, for ``attnkit view
        --checkpoint``: the attention of example ``index`` as a page (``out``) or PNG.
    data_parallel: whether torchrun data-parallel training (distributed.py) supports it.
    default_model: the model ``attnkit train`` trains on the family's tasks without --model.
    translates: whether its models turn a sentence into a sentence (``attnkit.decode.
        translate``): ``attnkit translate``, ``evaluate`` by BLEU (``--src/--ref`` too) and
        ``view --checkpoint DIR SENTENCE`` take them; the others are evaluated by ``evaluate``
        and shown by ``show`` on an example of their task (``view --example N``).
    """

    name: str
    tokens: Callable[[Any], tuple[Sequence[str], Sequence[str]]]
    batches: Batches
    loss_of: Callable[[nn.Module, Any, float], tuple[Tensor, Any]]
    eval_loss: Callable[[nn.Module, Any], tuple[float, int]]
    score: Callable[[nn.Module, list[Any], Vocab, Vocab], float | None]
    score_name: str = "exact"
    evaluate: Callable[[Any, list[Any]], dict[str, float]] | None = None
    show: Callable[[Any, list[Any], int, str | None, str | None], list[str]] | None = None
    data_parallel: bool = False
    default_model: str = "rnnsearch"
    translates: bool = False


def device_of(model: nn.Module) -> torch.device:
    """Where ``model``'s parameters live: where a family moves its batches."""
    return next(model.parameters()).device


def check_examples(examples: Sequence[Any], kind: type, reads: str) -> None:
    """A ValueError unless every example is a ``kind``: a family's evaluate / show given
    another task's examples. ``reads`` says what the model reads, e.g. "a language model reads
    text (--task lm, --train-text FILE)"."""
    wrong = next((e for e in examples if not isinstance(e, kind)), None)
    if wrong is not None:
        raise ValueError(f"{reads}, not {type(wrong).__name__} examples of another task")


__all__ = ["Family", "check_examples", "device_of"]
