"""Every HTML page shows Hangul tokens on a machine with no Korean font: it embeds the glyphs of
exactly the characters it needs (a NanumGothic subset as an @font-face data: URL, allowed by
its CSP), and in headless Chromium those tokens are drawn with the embedded font, not as the
missing-glyph box."""

import base64
import io
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from fontTools.ttLib import TTFont

from attnkit.viz import _page_fonts
from attnkit.viz.caption_view import write_caption_page
from attnkit.viz.coattention import CoAttentionMaps, write_coattention_page
from attnkit.viz.explain import explain_steps
from attnkit.viz.explain_render import write_stepper
from attnkit.viz.hierarchy import DocView, write_page
from attnkit.viz.page import attention_page, write_attention_page

KO = ["나는", "학교에", "간다", "."]
EN = ["I", "go", "to", "school", "."]
HANGUL = set("나는학교에간다")  # the characters DejaVu Sans lacks


def _font_face(html: str) -> tuple[set[int], str]:
    """The code points of the embedded font's cmap and its unicode-range."""
    (rule,) = re.findall(r"@font-face \{[^}]*\}", html)
    assert f'font-family: "{_page_fonts.FAMILY}"' in rule
    data = re.search(r'url\("data:font/woff;base64,([A-Za-z0-9+/=]+)"\)', rule)
    assert data is not None, rule[:200]
    font = TTFont(io.BytesIO(base64.b64decode(data.group(1))))
    unicode_range = re.search(r"unicode-range: ([^;]*);", rule)
    assert unicode_range is not None
    return set(font.getBestCmap()), unicode_range.group(1)


def _csp(html: str) -> str:
    found = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    assert found is not None
    return found.group(1)


def test_the_page_embeds_exactly_the_hangul_glyphs_of_its_tokens() -> None:
    assert _page_fonts.hangul_font() is not None  # koreanize-matplotlib is a dependency
    html = attention_page(torch.eye(4, 5), KO, EN, title="ko→en")
    cmap, unicode_range = _font_face(html)
    assert cmap == {ord(c) for c in HANGUL}  # no Latin, no "→" (DejaVu has them)
    assert unicode_range == "U+AC04, U+AD50, U+B098, U+B294, U+B2E4, U+C5D0, U+D559"
    assert "font-src data:" in _csp(html).split("; ")
    assert len(html) < 20_000  # a few KB of glyphs, not the 4 MB font
    assert f'font-family: "{_page_fonts.FAMILY}", "DejaVu Sans"' in html
    assert _page_fonts._ranges([0xAC00, 0xAC01, 0xAC02, 0xB098]) == "U+AC00-AC02, U+B098"


def test_a_latin_page_embeds_nothing_and_a_missing_font_breaks_nothing(monkeypatch) -> None:
    assert "@font-face" not in attention_page(torch.eye(2), ["a", "é"])
    monkeypatch.setattr(_page_fonts, "hangul_font", lambda: None)
    html = attention_page(torch.eye(4, 5), KO, EN)
    assert "@font-face" not in html and '"attnkit-tokens", "DejaVu Sans"' in html


def _page(tmp_path: Path) -> Path:
    return write_attention_page(tmp_path / "page.html", torch.eye(4, 5), KO, EN)


def _stepper(tmp_path: Path) -> Path:
    steps = explain_steps("dot", src_tokens=["나는", "학교에", "간다"])
    return write_stepper(tmp_path / "stepper.html", steps)


def _caption(tmp_path: Path) -> Path:
    weights = np.full((3, 4), 0.25, dtype=np.float32)  # (T, L = 2·2 patches)
    return write_caption_page(tmp_path / "caption.html", np.zeros((8, 8)), KO[:3], weights,
                              (2, 2), 4)  # fmt: skip


def _coattention(tmp_path: Path) -> Path:
    maps = CoAttentionMaps(
        canvas=np.zeros((8, 8)), words=KO[:3], question_weights=np.array([0.2, 0.5, 0.3]),
        image_weights=np.full((2, 2), 0.25), summary_weights=None, predicted="예",
        answer="예", template="t", variant="parallel",
    )  # fmt: skip
    return write_coattention_page(tmp_path / "qa.html", maps)


def _hierarchy(tmp_path: Path) -> Path:
    view = DocView(sentences=[KO[:3], ["ok"]], word_weights=[[0.2, 0.5, 0.3], [1.0]],
                   sentence_weights=[0.7, 0.3], key=0, label="a", predicted="a",
                   title="doc")  # fmt: skip
    return write_page(tmp_path / "doc.html", view)


WRITERS: dict[str, Callable[[Path], Path]] = {
    "page": _page,
    "stepper": _stepper,
    "caption": _caption,
    "coattention": _coattention,
    "hierarchy": _hierarchy,
}


@pytest.mark.parametrize("writer", WRITERS)
def test_every_html_writer_embeds_the_glyphs_its_csp_allows(writer, tmp_path) -> None:
    html = WRITERS[writer](tmp_path).read_text(encoding="utf-8")
    cmap, _ = _font_face(html)
    answer = "예" if writer == "coattention" else ""  # its answer is shown too
    assert cmap == {ord(c) for c in "나는학교에간다" + answer}
    assert "font-src data:" in _csp(html).split("; ")


# in the page: mark the first shown element with a text node of its own that holds the token,
# to find it again over CDP (which reports the fonts of a node's own text)
_PROBE = """token => {
  const all = Array.from(document.body.querySelectorAll("*"));
  const hit = all.find(e => e.getClientRects().length > 0 && Array.from(e.childNodes).some(
    n => n.nodeType === Node.TEXT_NODE && n.textContent.includes(token)));
  if (!hit) return false;
  hit.setAttribute("data-probe", "1");
  return true;
}"""

# widths of the token and of as many unassigned code points (U+10FFFD: the missing-glyph box)
# in the font of the element that shows the token
_WIDTHS = """token => {
  const e = document.querySelector("[data-probe]");
  const ctx = document.createElement("canvas").getContext("2d");
  ctx.font = getComputedStyle(e).font;
  return [ctx.measureText(token).width,
          ctx.measureText("\\u{10FFFD}".repeat(token.length)).width];
}"""


@pytest.mark.parametrize("writer", WRITERS)
def test_hangul_tokens_render_with_the_embedded_glyphs(writer, page, tmp_path) -> None:
    path = WRITERS[writer](tmp_path)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.resolve().as_uri())
    page.evaluate("document.fonts.ready.then(() => true)")
    faces = page.evaluate("Array.from(document.fonts).map(f => [f.family, f.status])")
    assert faces == [[_page_fonts.FAMILY, "loaded"]]  # the CSP let the data: URL in
    assert page.evaluate(_PROBE, "학교에"), f"no element shows 학교에 in {writer}"
    token, box = page.evaluate(_WIDTHS, "학교에")
    assert abs(token - box) > 1, f"학교에 is drawn as missing-glyph boxes ({token} = {box} px)"
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "[data-probe]"})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    drawn = [(f["familyName"], f["glyphCount"]) for f in fonts if f["isCustomFont"]]
    assert len(drawn) == 1 and drawn[0][0] == "NanumGothic" and drawn[0][1] >= 3, fonts
    images = page.evaluate("Array.from(document.images).map(i => i.naturalWidth > 0)")
    assert all(images), f"an inline image of {writer} was blocked"
    # nothing but the page itself; newer Chromium reads the file a second time when the CDP
    # session above enables its CSS domain, which is the test's doing, not the page's
    assert set(requests) == {path.resolve().as_uri()}, requests
