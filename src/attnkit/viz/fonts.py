"""Fonts for token labels in any script. DejaVu Sans covers Latin, Greek, Cyrillic, Arabic,
Hebrew and more; NanumGothic (shipped by ``koreanize-matplotlib``) covers Hangul and the
common Hanja. matplotlib (>= 3.6) falls back glyph by glyph along ``font.family``.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import matplotlib

FALLBACK = ["DejaVu Sans", "NanumGothic"]


@functools.cache
def _register_hangul() -> bool:
    """Register NanumGothic with matplotlib's font manager, leaving the user's rcParams as they
    were (importing koreanize_matplotlib changes the global font family)."""
    try:
        with matplotlib.rc_context(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # it imports the deprecated distutils
            import koreanize_matplotlib  # noqa: F401  (registers NanumGothic*.ttf)
    except Exception:  # absent or broken: Hangul shows as boxes, nothing else breaks
        return False
    return True


def font_rc(extra: list[str] | None = None) -> Any:
    """rcParams for ``matplotlib.rc_context``: the fallback chain, user fonts first."""
    _register_hangul()
    return {"font.family": [*(extra or []), *FALLBACK], "axes.unicode_minus": False}


__all__ = ["FALLBACK", "font_rc"]
