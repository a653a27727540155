"""Looking inside attention: heatmaps (matplotlib and terminal), a self-contained interactive
HTML page and a step-by-step explainer. Alignment quality (AER, entropy) is in attnkit.eval.

Everything works on a weights tensor and token lists that the caller passes in:
weights (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk); rows are queries (target tokens), columns
keys (source tokens).
"""

from .heatmap import heatmap
from .notebook import Inline, Shown, from_bertviz, show_model_view, show_neuron, to_bertviz
from .outputs import show
from .page import attention_page, write_attention_page
from .rollout import attention_flow, attention_rollout
from .terminal import terminal_heatmap
from .weights_file import AttentionRecord, load_attention, save_attention

__all__ = [
    "AttentionRecord",
    "Inline",
    "Shown",
    "attention_flow",
    "attention_page",
    "attention_rollout",
    "from_bertviz",
    "heatmap",
    "load_attention",
    "save_attention",
    "show",
    "show_model_view",
    "show_neuron",
    "terminal_heatmap",
    "to_bertviz",
    "write_attention_page",
]
