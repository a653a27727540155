"""Metrics, apart from training and viewing so that both use them and neither imports the
other:

* ``alignment``: attention as word alignment, AER (Och & Ney 2003) and entropy, on weights
  and gold links passed in;
* ``forced``: a model's attention teacher-forced on the reference, scored with ``alignment``;
* ``text``: translations against references, exact match, BLEU and chrF (sacrebleu).
"""

from .alignment import (
    AlignmentScores,
    GoldAlignment,
    aer,
    argmax_links,
    attention_entropy,
    corpus_aer,
    evaluate_alignments,
    parse_pharaoh,
    read_pharaoh,
    threshold_links,
)
from .forced import alignment_report, attention_aer, forced_attention, gold_from_examples
from .text import Scores, exact_match, score

__all__ = [
    "AlignmentScores",
    "GoldAlignment",
    "Scores",
    "aer",
    "alignment_report",
    "argmax_links",
    "attention_aer",
    "attention_entropy",
    "corpus_aer",
    "evaluate_alignments",
    "exact_match",
    "forced_attention",
    "gold_from_examples",
    "parse_pharaoh",
    "read_pharaoh",
    "score",
    "threshold_links",
]
