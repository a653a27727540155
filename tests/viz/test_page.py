"""The interactive page in headless Chromium: hovering a target token highlights the source
tokens with the tensor's weights; tokens are data, never markup."""

import json
import os
import re
from pathlib import Path

import pytest
import torch

from attnkit.eval.alignment import parse_pharaoh
from attnkit.viz.page import attention_page, embed_json, write_attention_page


def _shot(page, tmp_path: Path, name: str) -> None:
    """A screenshot, in $ATTNKIT_SCREENSHOTS when set (to look at), else the test's tmp dir."""
    folder = Path(os.environ.get("ATTNKIT_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True)
    assert (folder / name).stat().st_size > 1000


def _open(page, path: Path) -> list[str]:
    """Open the page from disk; it must not ask for anything but itself."""
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    assert requests == [path.resolve().as_uri()], f"the page fetched {requests}"
    return requests


def _weights_of(page, selector: str) -> list[float]:
    return [
        float(x) for x in page.eval_on_selector_all(selector, "es => es.map(e => e.dataset.weight)")
    ]


def test_embedded_json_cannot_close_the_script_element() -> None:
    token = "</script><script>alert(1)</script>&"
    text = embed_json({"t": token})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"t": token}
    html = attention_page(torch.eye(2), [token, "b"])
    with pytest.raises(ValueError, match="outside the 2 source x 2 target"):
        attention_page(torch.eye(2), ["a", "b"], gold=[(2, 0)])
    assert html.count("</script>") == 2  # the data element and the page script, no more
    assert "innerHTML" not in html


def test_hover_highlights_sources_by_weight(page, tmp_path) -> None:
    torch.manual_seed(0)
    w = torch.softmax(torch.randn(2, 3, 4, 5) * 2, dim=-1)  # (L, H, Tq, Tk)
    tgt, src = ["나는", "학교에", "간다", "."], ["I", "go", "to", "school", "."]
    gold = parse_pharaoh("0-0 3-1 1?2")
    path = write_attention_page(tmp_path / "attn.html", w, tgt, src, title="ko→en", gold=gold)
    _open(page, path)
    assert page.title() == "ko→en"
    assert page.locator(".tok.key .t").all_text_contents() == src
    sure = page.eval_on_selector_all(
        ".gold-sure", "es => es.map(e => [+e.dataset.j, +e.dataset.i])"
    )
    assert sorted(map(tuple, sure)) == [(0, 0), (3, 1)]  # (src, tgt)
    assert page.locator(".gold-possible[data-j='1'][data-i='2']").count() == 1

    page.select_option("#layer", "0")
    page.select_option("#head", "2")
    page.hover(".tok.query[data-i='1']")
    got = _weights_of(page, ".tok.key.hl")
    assert got == pytest.approx(w[0, 2, 1].tolist(), abs=1e-6)
    best = int(w[0, 2, 1].argmax())
    assert src[best] in page.text_content("#status")

    # the matrix view shows the same head; the mean of heads is the mean
    cells = _weights_of(page, "#matrix td.cell")
    assert cells == pytest.approx(w[0, 2].flatten().tolist(), abs=1e-6)
    page.select_option("#head", "mean")
    cells = _weights_of(page, "#matrix td.cell")
    assert cells == pytest.approx(w[0].mean(0).flatten().tolist(), abs=1e-6)

    # a click pins a target token: moving away keeps its highlight
    page.click(".tok.query[data-i='3']")
    page.mouse.move(1, 1)
    assert _weights_of(page, ".tok.key.hl") == pytest.approx(w[0].mean(0)[3].tolist(), abs=1e-6)
    _shot(page, tmp_path, "page_cross.png")


def test_self_attention_page(page, tmp_path) -> None:
    w = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])  # causal (Tq, Tk)
    path = write_attention_page(tmp_path / "self.html", w, ["a", "b", "c"])
    _open(page, path)
    assert page.is_hidden("#head-box") and page.is_hidden("#layer-box")
    assert "self-attention" in page.text_content("#kind")
    page.hover(".tok.query[data-i='1']")
    assert _weights_of(page, ".tok.key") == pytest.approx([0.5, 0.5, 0.0])
    assert page.locator(".tok.key.hl").count() == 2  # zero weight is not highlighted


def test_tokens_are_data_not_markup(page, tmp_path) -> None:
    evil = [
        "<img src=x onerror=alert(1)>",
        "</script><script>window.pwned = 1; alert(2)</script>",
        "<b onmouseover=alert(3)>x</b>",
    ]
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    path = write_attention_page(
        tmp_path / "evil.html", torch.full((3, 3), 1 / 3), evil, evil, title=evil[0]
    )
    requests = _open(page, path)
    for i in range(3):
        page.hover(f".tok.query[data-i='{i}']")
        page.hover(f"#matrix td.cell[data-i='{i}'][data-j='{i}']")
    assert page.locator(".tok.key .t").all_text_contents() == evil  # shown as text
    assert page.locator(".tok.query .t").all_text_contents() == evil
    assert page.title() == evil[0]
    assert page.locator("img").count() == 0
    assert page.locator("b").count() == 0
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert page.evaluate("document.scripts.length") == 2
    assert dialogs == []
    assert len(requests) == 1  # nothing was fetched (an <img src=x> would have been)
    _shot(page, tmp_path, "page_evil.png")
    assert re.search(r"onerror", page.text_content("#keys") or "")


def test_explain_stepper_steps_through(page, tmp_path) -> None:
    from attnkit.viz.explain import explain_steps
    from attnkit.viz.explain_render import step_tables, write_stepper

    st = explain_steps("additive", "local-p", window=2, src_tokens=["<i>x</i>", "b", "c"])
    path = write_stepper(tmp_path / "steps.html", st)
    _open(page, path)
    assert page.text_content("#where") == "step 0 of 5"
    assert page.locator("section.step:visible td").first.text_content() == "0"
    for _ in range(4):
        page.click("#next")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowLeft")
    assert page.text_content("#where") == "step 4 of 5"
    cells = page.locator("section.step:visible td").all_text_contents()
    assert cells == step_tables(st)[4].rows[0]  # c_t, as printed in the terminal
    assert page.locator("i").count() == 0  # a token is text, not markup
    _shot(page, tmp_path, "stepper.png")
