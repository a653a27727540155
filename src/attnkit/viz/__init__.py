"""Looking inside attention: heatmaps (matplotlib and terminal), a self-contained interactive
HTML page, a step-by-step explainer, and alignment quality (AER, entropy).

Everything works on a weights tensor and token lists that the caller passes in:
weights (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk); rows are queries (target tokens), columns
keys (source tokens).
"""

from .alignment_quality import (
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
from .heatmap import heatmap
from .outputs import show
from .page import attention_page, write_attention_page
from .terminal import terminal_heatmap
from .weights_file import AttentionRecord, load_attention, save_attention

__all__ = [
    "AlignmentScores",
    "AttentionRecord",
    "GoldAlignment",
    "aer",
    "argmax_links",
    "attention_page",
    "attention_entropy",
    "corpus_aer",
    "evaluate_alignments",
    "heatmap",
    "load_attention",
    "parse_pharaoh",
    "read_pharaoh",
    "save_attention",
    "show",
    "terminal_heatmap",
    "threshold_links",
    "write_attention_page",
]
