"""matplotlib heatmaps: one panel per head, tokens on the axes, gold boxes, no missing glyphs."""

import warnings

import pytest
import torch
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle

from attnkit.eval.alignment import parse_pharaoh
from attnkit.viz import heatmap

KO = ["나는", "학교에", "간다", "."]
EN = ["I", "go", "to", "school", "."]


def _images(fig):
    return [a for a in fig.axes if any(isinstance(c, AxesImage) for c in a.get_children())]


def test_heads_grid_layer_selection_and_png(tmp_path) -> None:
    torch.manual_seed(0)
    w = torch.softmax(torch.randn(2, 3, 4, 5), -1)  # (L, H, Tq, Tk)
    path = tmp_path / "attn.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph ("Glyph ... missing") would raise
        fig = heatmap(w, KO, EN, layer=0, path=path, title="ko→en")
        fig.canvas.draw()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    panels = _images(fig)
    assert len(panels) == 3
    first = panels[0]
    assert [t.get_text() for t in first.get_yticklabels()] == KO
    assert [t.get_text() for t in first.get_xticklabels()] == EN
    shown = first.get_images()[0].get_array()
    assert torch.allclose(torch.as_tensor(shown.data), w[0, 0].double())
    assert "layer 0" in fig.get_suptitle()


def test_head_choice_mean_and_gold_boxes() -> None:
    w = torch.softmax(torch.randn(4, 4, 5), -1)  # (H, Tq, Tk)
    fig = heatmap(w, KO, EN, heads="mean", gold=parse_pharaoh("0-0 3-1 1?2"))
    (ax,) = _images(fig)
    shown = torch.as_tensor(ax.get_images()[0].get_array().data)
    assert torch.allclose(shown, w.double().mean(0))
    boxes = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert sorted((b.get_x() + 0.5, b.get_y() + 0.5) for b in boxes) == [(0, 0), (1, 2), (3, 1)]
    assert len(_images(heatmap(w, KO, EN, heads=[1, 3]))) == 2


def test_errors_say_what_to_do() -> None:
    w = torch.rand(4, 5)
    with pytest.raises(ValueError, match="4 key tokens but the weights have 5 keys"):
        heatmap(w, KO, EN[:4])
    with pytest.raises(ValueError, match="outside"):
        heatmap(w, KO, EN, gold=[(5, 0)])
    with pytest.raises(ValueError, match="head 7 out of range"):
        heatmap(torch.rand(2, 4, 5), KO, EN, heads=7)
    with pytest.raises(ValueError, match="batch"):
        heatmap(torch.rand(1, 1, 1, 4, 5), KO, EN)
