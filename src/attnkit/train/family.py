"""Task families: what kind of learning a task is, as the small functions training needs.

A *family* groups the tasks whose examples batch, lose, score and show the same way:

    translate   tokens -> tokens    toy-ko, dates, copy/reverse/sort, coref, corpora
    (others)    registered below    e.g. image -> tokens (captions), inputs -> a label,
                                    a series -> its future (forecasting)

A task names its family (``attnkit.data.tasks.TASK_FAMILY``; corpora translate); a model class
names the family it can learn (its ``family`` class attribute, default ``"translate"``). The one
training loop (loop.py), ``attnkit.fit``, ``attnkit evaluate`` and ``attnkit view`` call a
family's functions and never branch on its name, so a new kind of task is one ``Family`` and
one line in ``FAMILIES``, and a model that cannot learn a task is refused before any work.

Batches of every family carry ``.to(device)`` (a copy on the device), ``.tokens`` (how many
units the loss is a mean over: target tokens, examples, forecast points) and ``.index`` (the
positions of their examples in the split).
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.vocab import Vocab

if TYPE_CHECKING:
    from ..models import Seq2Seq

Batches = Callable[[Sequence[Any], Vocab, Vocab, int, "random.Random | None"], list[Any]]


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


# ----------------------------------------------------------------------------- translate
def device_of(model: nn.Module) -> torch.device:
    """Where ``model``'s parameters live: where a family moves its batches."""
    return next(model.parameters()).device


def translate_loss(model: nn.Module, b: Any, label_smoothing: float = 0.0) -> tuple[Tensor, Any]:
    """Token-mean cross-entropy of the teacher-forced target (ignoring padding, id 0):

        loss = −(1/N) Σ_{b,t: y_bt ≠ pad} log p(y_bt | y_b,<t, x_b)

    A model with its own ``training_loss(src, src_len, tgt_in, tgt_out, label_smoothing) ->
    (loss, output)`` (hard or variational attention: REINFORCE and KL terms) trains on that."""
    b = b.to(device_of(model))
    own = getattr(model, "training_loss", None)
    if own is not None:
        return own(b.src, b.src_len, b.tgt_in, b.tgt_out, label_smoothing)
    out = model(b.src, b.src_len, b.tgt_in)
    logits = out.logits  # (B, T, V)
    loss = F.cross_entropy(
        logits.flatten(0, 1), b.tgt_out.flatten(), ignore_index=0, label_smoothing=label_smoothing
    )
    return loss, out


def translate_eval_loss(model: nn.Module, b: Any) -> tuple[float, int]:
    """Summed token cross-entropy of the model's own prediction (no label smoothing, no
    training-only terms) and the number of target tokens."""
    b = b.to(device_of(model))
    out = model(b.src, b.src_len, b.tgt_in)
    total = F.cross_entropy(
        out.logits.flatten(0, 1), b.tgt_out.flatten(), ignore_index=0, reduction="sum"
    )
    return float(total), b.tokens


def translate_score(
    model: nn.Module, examples: list[Any], src_vocab: Vocab, tgt_vocab: Vocab
) -> float | None:
    """Greedy exact match of the examples' translations (None for no examples)."""
    from ..decode import translate
    from ..eval.text import exact_match

    if not examples:
        return None
    hyps = translate(cast("Seq2Seq", model), examples, src_vocab, tgt_vocab, batch_size=256).hyps
    return exact_match(hyps, [e.tgt for e in examples])


def _translate_batches(
    examples: Sequence[Any], src_vocab: Vocab, tgt_vocab: Vocab, size: int, rng: Any
) -> list[Any]:
    from ..data.batching import batches

    return batches(examples, src_vocab, tgt_vocab, size, rng)


TRANSLATE = Family(
    name="translate",
    tokens=lambda e: (e.src, e.tgt),
    batches=_translate_batches,
    loss_of=translate_loss,
    eval_loss=translate_eval_loss,
    score=translate_score,
    data_parallel=True,
)
"""The ``translate`` family: tokens -> tokens, cross-entropy on the target tokens, scored by
exact match, BLEU and chrF of the decoded outputs."""

# name -> "module:attribute" of its Family, imported when first asked for (a family's module
# may import models and viewers that translation never needs)
FAMILIES: dict[str, str] = {
    "translate": "attnkit.train.family:TRANSLATE",
    "forecast": "attnkit.families.forecast:FORECAST",
    "docs": "attnkit.families.docs:DOCS",
    "qa": "attnkit.families.qa:QA",
    "caption": "attnkit.families.caption:CAPTION",
    "lm": "attnkit.families.lm:LM",
}
"""Family name -> ``"module:attribute"`` of its ``Family`` (imported by ``family(name)``)."""


def family(name: str) -> Family:
    """The registered family ``name``."""
    if name not in FAMILIES:
        raise ValueError(f"unknown task family {name!r}; known: {sorted(FAMILIES)}")
    module, _, attr = FAMILIES[name].partition(":")
    found = getattr(importlib.import_module(module), attr)
    assert isinstance(found, Family), f"{FAMILIES[name]} is not a Family"
    return found


def model_family(model_name: str) -> str:
    """The family model ``model_name`` learns (its class's ``family``; default translate)."""
    from ..models import MODELS

    if model_name not in MODELS:
        raise ValueError(f"unknown model {model_name!r}; choose one of {sorted(MODELS)}")
    return str(getattr(MODELS[model_name][0], "family", "translate"))


def data_family(spec: dict[str, Any]) -> str:
    """The family of a data spec (see data/source.py): its task's, or translate (corpora)."""
    from ..data.tasks import task_family

    return task_family(spec["task"]) if spec.get("task") else "translate"


def check_pairing(model_name: str, spec: dict[str, Any]) -> Family:
    """The family shared by the model and the data; a ValueError that names the models that
    can learn the data when the model cannot."""
    from ..models import MODELS

    wanted, has = data_family(spec), model_family(model_name)
    if wanted != has:
        fits = sorted(m for m in MODELS if model_family(m) == wanted)
        what = f"task {spec['task']!r}" if spec.get("task") else "a parallel corpus"
        raise ValueError(
            f"model {model_name!r} learns {has} tasks, but {what} is a {wanted} task; "
            f"use --model {' | '.join(fits) if fits else '(none registered yet)'}"
        )
    return family(wanted)


__all__ = [
    "FAMILIES",
    "TRANSLATE",
    "Family",
    "check_pairing",
    "data_family",
    "device_of",
    "family",
    "model_family",
    "translate_eval_loss",
    "translate_loss",
    "translate_score",
]
