"""The neuron view: for every score attnkit has, the elementwise terms sum to the score the
module itself computes; a hand-computed dot example; the page in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from attnkit.cli import main
from attnkit.registry import build_score
from attnkit.viz.explain import explain_steps
from attnkit.viz.neuron import neuron_view, write_neuron_page

SCORES = ["dot", "scaled_dot", "general", "additive", "location", "cosine"]


@pytest.mark.parametrize("name", SCORES)
def test_terms_sum_to_the_modules_own_score(name: str):
    torch.manual_seed(0)
    score = build_score(name, 6, hidden=5, max_keys=7).double()
    q, k = torch.randn(6, dtype=torch.float64), torch.randn(7, 6, dtype=torch.float64)
    view = neuron_view(score, q, k, [f"t{j}" for j in range(7)])
    want = score(q[None], k)[0]  # (S,) the module's forward
    assert torch.allclose(view.scores, want, atol=1e-12)
    assert torch.allclose(view.terms.sum(-1), want, atol=1e-12)
    assert torch.allclose(view.weights, torch.softmax(want, -1))
    assert view.formula == score.formula


def test_the_dot_terms_by_hand():
    score = build_score("dot", 2)
    view = neuron_view(score, torch.tensor([1.0, 2.0]), torch.tensor([[3.0, -1.0], [0.0, 0.5]]),
                       ["a", "b"])  # fmt: skip
    assert view.terms.tolist() == [[3.0, -2.0], [0.0, 1.0]]
    assert view.scores.tolist() == [1.0, 1.0]
    assert view.weights.tolist() == [0.5, 0.5]


def test_bad_shapes_and_tokens_get_one_line():
    score = build_score("dot", 2)
    with pytest.raises(ValueError, match="pass one query"):
        neuron_view(score, torch.ones(1, 2), torch.ones(3, 2), ["a", "b", "c"])
    with pytest.raises(ValueError, match="one per key"):
        neuron_view(score, torch.ones(2), torch.ones(3, 2), ["a"])


def test_explain_neuron_matches_the_walkthroughs_scores(tmp_path: Path, capsys):
    out = tmp_path / "n.html"
    argv = ["explain", "--score", "general", "--dim", "4", "--step", "1", "--neuron", str(out)]
    assert main(argv) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    data = json.loads(html.split('id="neuron-data">')[1].split("</script>")[0])
    steps = explain_steps("general", dim=4, target_step=1)
    assert data["scores"] == pytest.approx(steps.scores.tolist(), abs=1e-12)


def test_the_page_shows_terms_and_tokens_as_text(page, tmp_path: Path):
    evil = ["<img src=x onerror=alert(1)>", "</script><b>b</b>", "c"]
    torch.manual_seed(1)
    view = neuron_view(build_score("additive", 4, hidden=3), torch.randn(4), torch.randn(3, 4),
                       evil, query_token=evil[1])  # fmt: skip
    path = write_neuron_page(tmp_path / "n.html", view)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    assert page.locator("tr.key th.tok").all_text_contents() == evil
    read = "es => es.map(e => +e.dataset.x)"
    terms = page.eval_on_selector_all("tr.key[data-j='2'] td.term", read)
    assert terms == pytest.approx(view.terms[2].tolist(), abs=1e-9)
    weights = page.eval_on_selector_all("td.weight", read)
    assert weights == pytest.approx(view.weights.tolist(), abs=1e-9)
    assert "tanh" in page.text_content("#formula")
    assert page.locator("img").count() == 0 and page.locator("b").count() == 0 and not dialogs
