"""Griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): attnkit's docstrings are plain
text, and one that ends a line with ``:`` and indents what follows means a block (a formula,
a table of shapes, a list):

    Every score has one signature, ``score(query, keys) -> scores``:
        query (..., Tq, Dq), keys (..., Tk, Dk) -> scores (..., Tq, Tk)

Markdown would run those lines into the paragraph above, and would read a block indented by
fewer than 4 spaces (a table of names) as a paragraph too. So a blank line goes before the
indented block, and a block set apart by blank lines is indented to at least 4 spaces, unless
it is a list (``  * item``, ``  1. item``): it becomes a code block, or a list, as the author
laid it out. Nothing else in a docstring changes.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def separate_blocks(text: str) -> str:
    """``text`` with a blank line before each indented line that follows an unindented line
    ending in ``:``."""
    lines: list[str] = []
    for line in text.split("\n"):
        prev = lines[-1] if lines else ""
        if line.strip() and _indent(line) > 0 and prev.strip() and _indent(prev) == 0:
            if prev.rstrip().endswith(":"):
                lines.append("")
        lines.append(line)
    i = 0
    while i < len(lines):  # blocks set apart by a blank line, indented by 1 to 3 spaces
        start = i
        while i < len(lines) and lines[i].strip() and _indent(lines[i]) > 0:
            i += 1
        block = lines[start:i]
        apart = start == 0 or not lines[start - 1].strip()
        if block and apart and not LIST_ITEM.match(block[0]):
            pad = 4 - min(_indent(line) for line in block)
            lines[start:i] = [" " * max(pad, 0) + line for line in block]
        i = max(i, start + 1)
    return "\n".join(lines)


class SeparateBlocks(griffe.Extension):
    """Apply ``separate_blocks`` to every docstring griffe reads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = separate_blocks(obj.docstring.value)
