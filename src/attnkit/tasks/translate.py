"""The ``translate`` family: tokens -> tokens (toy-ko, dates, copy/reverse/sort, coref,
parallel corpora), cross-entropy on the target tokens, scored by exact match, BLEU and chrF of
the decoded outputs. Its models translate (``Family.translates``): ``attnkit translate``, BLEU in
``attnkit evaluate`` and ``attnkit view --checkpoint DIR SENTENCE`` are theirs.

Legend: B batch, T target length, V target vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch.nn.functional as F
from torch import Tensor, nn

from ..data.vocab import Vocab
from .family import Family, device_of

if TYPE_CHECKING:
    from ..models import Seq2Seq


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
    translates=True,
)
"""The ``translate`` family: tokens -> tokens, cross-entropy on the target tokens, scored by
exact match, BLEU and chrF of the decoded outputs."""


__all__ = ["TRANSLATE", "translate_eval_loss", "translate_loss", "translate_score"]
