"""The alignment error rate of a model's attention, as one number for training reports.

A thin wrapper over ``attnkit.viz.checkpoint_aer`` (teacher-forced attention on the reference)
and ``attnkit.viz.alignment_quality`` (Och & Ney 2003 AER), which hold the definitions.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..data.example import Example
from ..data.vocab import Vocab
from ..models import Seq2Seq
from ..viz.alignment_quality import evaluate_alignments
from ..viz.checkpoint_aer import forced_attention, gold_from_examples


def attention_aer(
    model: Seq2Seq, examples: Sequence[Example], src_vocab: Vocab, tgt_vocab: Vocab
) -> float | None:
    """Corpus AER of the argmax of the model's attention on the reference (sure = possible =
    gold links); None if it cannot be computed (no gold links, or a model without attention)."""
    with_links = [e for e in examples if e.links]
    if not with_links:
        return None
    try:
        weights = forced_attention(model, with_links, src_vocab, tgt_vocab)
    except ValueError:  # the model has no attention
        return None
    return evaluate_alignments(weights, gold_from_examples(with_links)).aer_argmax


__all__ = ["attention_aer"]
