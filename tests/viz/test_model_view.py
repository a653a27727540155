"""The model view: every layer x head in one page (small maps that open large on a click) and
one PNG grid that stays readable; tokens stay text in the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from PIL import Image

from attnkit.cli import main
from attnkit.viz import AttentionRecord
from attnkit.viz.model_view import model_view_data, model_view_png, write_model_view
from attnkit.viz.weights_file import save_attention


def _data(path: Path) -> dict:
    html = path.read_text(encoding="utf-8")
    return json.loads(html.split('id="attn-data">')[1].split("</script>")[0])


def _w(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.softmax(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), -1)


def test_every_layer_and_head_of_every_map_is_in_the_data():
    enc, cross = _w(3, 4, 5, 5), _w(2, 2, 3, 5, seed=1)
    src, tgt = ["I", "am", "a", "student", "</s>"], ["je", "suis", "</s>"]
    data = model_view_data(
        {
            "enc-self": AttentionRecord(enc, src, None),
            "cross": AttentionRecord(cross, tgt, src),
        }
    )
    first, second = data["sections"]
    assert first["name"] == "enc-self" and first["keys"] == src and first["queries"] == src
    assert second["queries"] == tgt and second["keys"] == src
    assert torch.allclose(torch.tensor(first["weights"], dtype=torch.float64), enc.double(),
                          atol=1e-5)  # fmt: skip
    assert torch.tensor(second["weights"]).shape == (2, 2, 3, 5)
    with pytest.raises(ValueError, match="square"):
        model_view_data(_w(1, 1, 3, 4), ["a", "b", "c"])
    with pytest.raises(ValueError, match="tokens come from each record"):
        model_view_data({"x": AttentionRecord(enc, src, None)}, src)


def test_the_png_grid_stays_readable(tmp_path: Path):
    many = model_view_png(tmp_path / "many.png", _w(16, 8, 6, 6), list("abcdef"))
    few = model_view_png(tmp_path / "few.png", _w(2, 2, 6, 6), list("abcdef"))
    w_many, h_many = Image.open(many).size
    w_few, h_few = Image.open(few).size
    assert max(w_many, h_many) <= 2000  # 16 layers x 8 heads, not 8,000 pixels
    assert min(w_few, h_few) >= 300  # two by two: panels stay large enough to read
    assert w_few / 2 > w_many / 8  # a panel of the small grid is larger than one of the big


def test_view_model_view_from_a_file(tmp_path: Path, capsys):
    w = _w(2, 3, 4, 4)
    path = save_attention(tmp_path / "w.safetensors", w, ["a", "b", "c", "d"], None)
    page, png = tmp_path / "m.html", tmp_path / "m.png"
    argv = ["view", "--weights", str(path), "--model-view", "--out", str(page), "--png", str(png)]
    assert main(argv) == 0
    assert f"wrote {page}" in capsys.readouterr().out
    (section,) = _data(page)["sections"]
    assert torch.allclose(torch.tensor(section["weights"]), w, atol=1e-5)
    assert png.stat().st_size > 0
    assert main(["view", "--weights", str(path), "--model-view"]) == 2
    assert "pass --out FILE.html or --png FILE" in capsys.readouterr().err


def test_a_click_opens_the_map_large_and_tokens_stay_text(page, tmp_path: Path):
    evil = ["<img src=x onerror=alert(1)>", "</script><b>x</b>", "c"]
    w = _w(2, 3, 3, 3)
    path = write_model_view(tmp_path / "m.html", w, evil, title=evil[0])
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    assert page.locator("canvas.thumb").count() == 6  # 2 layers x 3 heads
    page.click("canvas.thumb[data-l='1'][data-h='2']")
    cells = page.eval_on_selector_all("#big td.cell", "es => es.map(e => +e.dataset.w)")
    assert cells == pytest.approx(w[1, 2].flatten().tolist(), abs=1e-5)
    assert page.locator("#big th.key").all_text_contents() == evil
    assert page.locator("#big th.query").all_text_contents() == evil
    assert "layer 1, head 2" in page.text_content("#caption")
    assert page.locator("img").count() == 0 and page.locator("b").count() == 0
    assert dialogs == [] and requests == [path.resolve().as_uri()]
