"""attnkit in Jupyter: the page, the model view and the neuron view render inline, each in its
own sandboxed document; rollout and flow show through the same page; figures draw themselves,
bertviz's format goes both ways, and the example notebook runs (so it cannot go stale)."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest
import torch

import attnkit
from attnkit.registry import build_score
from attnkit.viz import (
    attention_flow,
    attention_rollout,
    from_bertviz,
    heatmap,
    show,
    show_model_view,
    show_neuron,
    to_bertviz,
)
from attnkit.viz.model_view import model_view_page
from attnkit.viz.neuron import neuron_page, neuron_view

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


HOSTILE = "</script><img src=x onerror=alert(1)>"


def _srcdoc(frame: str) -> str:
    """The page an iframe holds, unescaped; checks the frame is one sandboxed iframe."""
    assert frame.startswith('<iframe sandbox="allow-scripts" ') and frame.endswith("</iframe>")
    assert frame.count("<iframe") == 1 and "allow-same-origin" not in frame
    found = re.fullmatch(r'<iframe [^>]*srcdoc="([^"]*)"></iframe>', frame)
    assert found is not None  # the whole page sits in one attribute, every quote escaped
    return html.unescape(found.group(1))


def _model_view():
    tokens = ["a", "b", HOSTILE]
    weights = torch.softmax(torch.randn(2, 3, 3, 3), -1)  # (L, H, T, T)
    return show_model_view(weights, tokens), model_view_page(weights, tokens)


def _neuron():
    view = neuron_view(
        build_score("additive", 4, hidden=3),
        torch.randn(4),
        torch.randn(3, 4),
        ["a", "b", HOSTILE],
        query_token=HOSTILE,
    )
    return show_neuron(view), neuron_page(view)


@pytest.mark.parametrize("build", [_model_view, _neuron], ids=["model_view", "neuron"])
def test_model_and_neuron_views_render_their_page_in_a_sandboxed_iframe(build):
    shown, page = build()
    frame = shown._repr_html_()
    assert _srcdoc(frame) == shown.html() == page
    for markup in (frame, page):  # the token stays text: escaped in the page, again in srcdoc
        assert HOSTILE not in markup and "<img" not in markup
    assert "\\u003c/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e" in page
    assert "<script" not in frame.split("srcdoc=")[0]  # nothing runs in the notebook itself
    assert "shown inline in a notebook" in repr(shown)


def test_the_inline_views_check_their_input_when_called_not_when_displayed():
    with pytest.raises(ValueError, match="query tokens"):
        show_model_view(torch.softmax(torch.randn(2, 3, 3, 3), -1), ["a", "b"])


def test_rollout_and_flow_show_through_the_page_and_the_model_view():
    weights = torch.softmax(torch.randn(3, 2, 4, 4), -1)  # (L, H, T, T)
    tokens = ["a", "b", "c", "d"]
    rollout, flow = attention_rollout(weights), attention_flow(weights)  # (L, T, T), (T, T)
    for combined in (rollout[-1], flow):
        data = json.loads(
            _srcdoc(show(combined, tokens)._repr_html_())
            .split('id="attn-data">')[1]
            .split("</script>")[0]
        )
        assert data["queries"] == data["keys"] == tokens
        got = torch.tensor(data["weights"], dtype=torch.float64)  # (1, 1, T, T)
        assert torch.allclose(got[0, 0], combined, atol=1e-6)
    per_layer = show_model_view(rollout[:, None], tokens).html()  # (L, 1, T, T): a row a layer
    data = json.loads(per_layer.split('id="attn-data">')[1].split("</script>")[0])
    got = torch.tensor(data["sections"][0]["weights"], dtype=torch.float64)
    assert got.shape == (3, 1, 4, 4) and torch.allclose(got[:, 0], rollout, atol=1e-5)


def test_heatmap_draws_itself_as_png():
    png = heatmap(_weights(), ["a", "b", "c"], ["w", "x", "y", "z"])._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_plain_import_attnkit_reaches_the_viewers():
    assert attnkit.viz.show is show
    assert attnkit.viz.show_model_view is show_model_view
    assert attnkit.viz.show_neuron is show_neuron


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


_CELLS = [
    """import torch
from attnkit.modules import SelfAttention
from attnkit.registry import build_score
from attnkit.viz import attention_rollout, show, show_model_view, show_neuron
from attnkit.viz.neuron import neuron_view

torch.manual_seed(0)
tokens = ["the", "cat", "sat", "</script><img src=x onerror=alert(1)>"]
x, maps = torch.randn(1, 4, 8), []  # (B, T, D)
for layer in [SelfAttention(8, heads=2) for _ in range(2)]:  # a two-layer model
    result = layer(x)
    x = result.context  # (B, T, D)
    maps.append(result.weights[0])  # (H, T, T)
weights = torch.stack(maps).detach()  # (L, H, T, T)""",
    "show_model_view(weights, tokens)",
    'show_neuron(neuron_view(build_score("scaled_dot", 8), x[0, 0], x[0], tokens))',
    'show(attention_rollout(weights)[-1], tokens, title="rollout to the top layer")',
]


def test_a_notebook_shows_the_model_view_the_neuron_view_and_rollout_inline(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat")
    nbclient = pytest.importorskip("nbclient", reason="the test extra installs nbclient")
    pytest.importorskip("ipykernel", reason="the test extra installs ipykernel")
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in _CELLS])
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    errors = [o for c in nb.cells for o in c.outputs if o.get("output_type") == "error"]
    assert not errors, errors
    pages = []
    for cell in nb.cells[1:]:
        (out,) = [o for o in cell.outputs if "text/html" in o.get("data", {})]
        pages.append(_srcdoc(out["data"]["text/html"]))
    model, neuron, rollout = pages
    assert 'id="attn-data"' in model and "every layer and head" in model
    assert 'id="neuron-data"' in neuron and "scaled_dot" in neuron
    assert "rollout to the top layer" in rollout
    assert all(HOSTILE not in page for page in pages)
