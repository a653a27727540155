"""Fonts of the HTML pages: Hangul (and the common Hanja) on any machine. A browser draws a
character with the first font of the page's ``font-family`` that has it; on a machine with no
Korean font (a fresh Debian, a server: ``fc-list :lang=ko`` prints nothing) every Hangul token
would be an empty box. So a page embeds, as an ``@font-face`` with a ``data:`` URL, the glyphs
of the shipped NanumGothic (``koreanize-matplotlib``, as the PNGs use) for exactly the
characters of its text that DejaVu Sans lacks: a few KB for a sentence, nothing for a page in
Latin script. Its ``unicode-range`` lists those characters, so every other character (and the
line height) keeps the system fonts.

    <style>{page_font_css(tokens)}...</style>   with "font-src data:" in the page's CSP

Without the font (or fontTools) the page is written without it and falls back to system fonts.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import io
import logging
from collections.abc import Iterable
from pathlib import Path

FAMILY = "attnkit-tokens"
"""The family name of the embedded subset; first in ``STACK``."""
STACK = (
    f'"{FAMILY}", "DejaVu Sans", "Noto Sans", "NanumGothic", "Apple SD Gothic Neo", '
    '"Malgun Gothic", system-ui, sans-serif'
)
"""The font-family of every page: the embedded glyphs, then fonts that cover many scripts."""
FONT_SRC = "font-src data:"
"""The CSP directive that lets a page load its embedded font (and nothing from the network)."""


def _package_file(package: str, *parts: str) -> Path | None:
    """A file shipped inside ``package``, found without importing it (importing
    koreanize_matplotlib changes matplotlib's global font)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    return path if path.is_file() else None


def hangul_font() -> Path | None:
    """NanumGothic.ttf of koreanize-matplotlib, or None when it is not installed."""
    return _package_file("koreanize_matplotlib", "fonts", "NanumGothic.ttf")


@functools.cache
def _cmap(path: Path) -> frozenset[int]:
    from fontTools.ttLib import TTFont

    return frozenset(TTFont(path, lazy=True).getBestCmap())


def needed(texts: Iterable[str]) -> list[int]:
    """The code points of ``texts`` that NanumGothic has and DejaVu Sans (matplotlib's own
    font, the page's first system font) lacks, sorted; [] without the fonts."""
    nanum = hangul_font()
    dejavu = _package_file("matplotlib", "mpl-data", "fonts", "ttf", "DejaVuSans.ttf")
    if nanum is None or dejavu is None:
        return []
    try:
        have, common = _cmap(nanum), _cmap(dejavu)
    except Exception:  # fontTools absent or a broken file: system fonts, nothing else breaks
        return []
    chars = {ord(c) for text in texts for c in text}
    return sorted(c for c in chars if c in have and c not in common)


@functools.lru_cache(maxsize=32)
def _subset(codepoints: tuple[int, ...]) -> bytes:
    """NanumGothic cut down to ``codepoints`` (and .notdef), as WOFF (zlib: no brotli needed),
    without hinting."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    options = subset.Options()
    options.hinting = False
    logging.getLogger("fontTools.subset").setLevel(logging.ERROR)  # "TSI0 NOT subset" notes
    font = TTFont(hangul_font(), lazy=True)
    cutter = subset.Subsetter(options)
    cutter.populate(unicodes=codepoints)
    cutter.subset(font)
    font.flavor = "woff"
    buf = io.BytesIO()
    font.save(buf)
    return buf.getvalue()


def _ranges(codepoints: list[int]) -> str:
    """[0xAC00, 0xAC01, 0xB098] -> "U+AC00-AC01, U+B098" (CSS unicode-range)."""
    spans: list[list[int]] = []
    for c in codepoints:
        if spans and c == spans[-1][1] + 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    return ", ".join(f"U+{a:X}" if a == b else f"U+{a:X}-{b:X}" for a, b in spans)


def font_face(texts: Iterable[str]) -> str:
    """The ``@font-face`` rule embedding the glyphs ``texts`` need (see ``needed``), or ""
    when they need none or the font cannot be cut."""
    codepoints = needed(texts)
    if not codepoints:
        return ""
    try:
        woff = _subset(tuple(codepoints))
    except Exception:  # a broken font or fontTools: the page falls back to system fonts
        return ""
    data = base64.b64encode(woff).decode("ascii")
    return (
        f'@font-face {{ font-family: "{FAMILY}"; '
        f'src: url("data:font/woff;base64,{data}") format("woff"); '
        f"unicode-range: {_ranges(codepoints)}; }}\n"
    )


def page_font_css(texts: Iterable[str]) -> str:
    """CSS to put first in a page's <style>: the embedded font for ``texts`` (every string the
    page shows: tokens, titles), the page's font-family, and form controls that inherit it."""
    return (
        f"{font_face(texts)}body {{ font-family: {STACK}; }}\n"
        "select, button, input { font-family: inherit; }\n"
    )


__all__ = ["FAMILY", "FONT_SRC", "STACK", "font_face", "hangul_font", "needed", "page_font_css"]
