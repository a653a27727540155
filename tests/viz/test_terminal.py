"""The terminal heatmap: shading levels, tokens, wide characters, clear errors."""

import pytest
import torch

from attnkit.viz import terminal_heatmap
from attnkit.viz._weights import display_width


def test_shading_levels_and_argmax() -> None:
    w = torch.tensor([[1.0, 0.0], [0.5, 0.5]])  # (Tq, Tk)
    text = terminal_heatmap(w, ["a", "b"], ["x", "y"], vmax=1.0, label_width=4)
    lines = text.splitlines()
    assert lines[0].endswith("'█' = 1.00")
    assert lines[1] == "     x y"  # key tokens written downwards, two columns each
    assert lines[2] == "a   │██  │ x 1.00"
    assert lines[3] == "b   │▒▒▒▒│ x 0.50"  # 0.5 of full scale -> the middle shade


def test_heads_layers_and_wide_tokens() -> None:
    torch.manual_seed(0)
    w = torch.softmax(torch.randn(2, 3, 2, 3), -1)  # (L, H, Tq, Tk)
    text = terminal_heatmap(w, ["나는", "간다"], ["I", "go", "."], layer=0, heads=2)
    assert text.splitlines()[0].startswith("layer 0, head 2")
    rows = [line for line in text.splitlines() if "│" in line]
    assert len(rows) == 2
    # the cell bars line up although Hangul takes two terminal columns per character
    assert len({display_width(r.split("│")[0]) for r in rows}) == 1
    assert "mean of heads" in terminal_heatmap(w, ["a", "b"], ["x", "y", "z"])


def test_self_attention_and_errors() -> None:
    w = torch.eye(3)
    assert "│██    │" in terminal_heatmap(w, ["a", "b", "c"])  # keys = queries
    with pytest.raises(ValueError, match="2 key tokens but the weights have 3 keys"):
        terminal_heatmap(w, ["a", "b", "c"], ["x", "y"])
    with pytest.raises(TypeError, match="split"):
        terminal_heatmap(w, "a b c")
    with pytest.raises(ValueError, match="layer 3 out of range"):
        terminal_heatmap(w, ["a", "b", "c"], layer=3)
