"""attnkit in Jupyter: the page renders inline in its own sandboxed document, figures draw
themselves, bertviz's format goes both ways, and the example notebook runs (so it cannot
go stale)."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest
import torch

import attnkit
from attnkit.viz import from_bertviz, heatmap, show, to_bertviz

NOTEBOOK = Path(__file__).parents[2] / "examples" / "rnnsearch_toy_ko.ipynb"


def _weights(tq: int = 3, tk: int = 4) -> torch.Tensor:
    return torch.softmax(torch.randn(tq, tk, generator=torch.Generator().manual_seed(0)), -1)


def test_show_returns_the_printed_lines_and_renders_the_page_in_a_sandboxed_iframe(tmp_path):
    shown = show(_weights(), ["a", "b", "c"], ["w", "x", "y", "z"], page_path=tmp_path / "p.html")
    assert list(shown) == [f"wrote {tmp_path / 'p.html'}: open it in a browser (no network needed)"]
    frame = shown._repr_html_()
    assert frame.startswith('<iframe sandbox="allow-scripts"')
    srcdoc = re.search(r'srcdoc="([^"]*)"', frame)
    assert srcdoc is not None  # the page sits in one attribute, every quote escaped
    assert html.unescape(srcdoc.group(1)) == shown.html() == (tmp_path / "p.html").read_text()
    assert "http://" not in shown.html() and "https://" not in shown.html()


def test_two_pages_in_one_notebook_live_in_separate_documents():
    a = show(_weights(), ["a", "b", "c"], ["w", "x", "y", "z"], title="first")._repr_html_()
    b = show(_weights(2, 2), ["p", "q"], None, title="second")._repr_html_()
    for frame in (a, b):  # all markup (ids, scripts) is inside the iframe's srcdoc
        assert frame.count("<iframe") == 1 and "<script" not in frame.split("srcdoc=")[0]
        assert "<script" not in html.unescape(frame).split("srcdoc=")[0]
    assert "first" in html.unescape(a) and "second" in html.unescape(b)


def test_heatmap_draws_itself_as_png():
    png = heatmap(_weights(), ["a", "b", "c"], ["w", "x", "y", "z"])._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_plain_import_attnkit_reaches_the_viewer():
    assert attnkit.viz.show is show


def test_bertviz_format_round_trips_and_checks_its_shapes():
    w = torch.softmax(torch.randn(2, 3, 5, 5), -1)  # (L, H, T, T)
    tokens = list("abcde")
    attention, toks = to_bertviz(w, tokens)
    assert len(attention) == 2 and attention[0].shape == (1, 3, 5, 5) and toks == tokens
    record = from_bertviz(attention, toks)
    assert torch.equal(record.weights, w) and record.tgt_tokens == tokens
    assert record.src_tokens is None  # self-attention
    batched = tuple(torch.stack([a[0], a[0].flip(-1)]) for a in attention)  # (B=2, H, T, T)
    assert torch.equal(from_bertviz(batched, tokens, batch=1).weights, w.flip(-1))
    with pytest.raises(ValueError, match="one token per position"):
        to_bertviz(w, tokens[:4])
    with pytest.raises(ValueError, match="self-attention"):
        to_bertviz(torch.rand(2, 3, 5, 4), tokens)
    with pytest.raises(ValueError, match="batch=2"):
        from_bertviz(batched, tokens, batch=2)
    with pytest.raises(ValueError, match="empty"):
        from_bertviz((), tokens)


@pytest.mark.slow  # suite: pytest -m slow (.ci/run runs it)
def test_the_example_notebook_runs_and_shows_its_attention(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat")
    nbclient = pytest.importorskip("nbclient", reason="the test extra installs nbclient")
    pytest.importorskip("ipykernel", reason="the test extra installs ipykernel")
    monkeypatch.setenv("ATTNKIT_NOTEBOOK_SECONDS", "2")  # a smoke budget: runs, learns little
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # kept clean
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    kinds = [k for o in outputs for k in o.get("data", {})]
    assert kinds.count("image/png") == 2 and "text/html" in kinds
    text = "".join(o.get("text", "") for o in outputs)
    assert "held-out exact match" in text and "local-p  exact match" in text
