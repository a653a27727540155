"""MkDocs hook: a page whose first heading is not a level-1 one (docs/models.md opens with
``## Models: ...``, having been a section of the README) is titled by that heading, in the
navigation and the browser tab, rather than by its file name ("Models" instead of "Models:
Luong 2015 and the Transformer"). A page with a ``# title`` or a ``title:`` in its metadata
keeps it."""

from __future__ import annotations

import re
from typing import Any

HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def first_heading(markdown: str) -> tuple[int, str] | None:
    """(level, plain text) of the first ATX heading outside code, or None."""
    in_fence = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := HEADING.match(line)):
            text = re.sub(r"`([^`]*)`", r"\1", m.group(2))  # code spans read as their text
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links as their text
            return len(m.group(1)), text
    return None


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Title the page by its first heading when that is not level 1 (see above)."""
    found = first_heading(markdown)
    if found is not None and found[0] > 1 and "title" not in page.meta:
        page.meta["title"] = found[1]
    return markdown
