"""Text shown on a terminal: tokens come from data (a corpus, a checkpoint's vocabulary), so a
token holding ESC, BEL or a bidirectional override could move the cursor, recolour the screen
or reorder what the user reads. ``printable`` escapes them; nothing else changes."""

from __future__ import annotations

import sys
import unicodedata

BIDI = {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}  # embeddings, isolates


def printable(text: str) -> str:
    """``text`` with control characters (Unicode Cc: C0, DEL, C1, but not tab) and bidi
    overrides written as escapes (``\\x1b``, ``\\u202e``); other characters, Hangul and emoji
    included, as they are."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch == "\t" or not (unicodedata.category(ch) == "Cc" or ch in BIDI):
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def on_terminal(text: str) -> str:
    """``text`` made ``printable`` line by line when standard output is a terminal (its line
    breaks kept); a file or a pipe gets it as it is."""
    if not sys.stdout.isatty():
        return text
    return "\n".join(printable(line) for line in text.split("\n"))


__all__ = ["on_terminal", "printable"]
