"""What every HTML page of attnkit.viz does last: write itself to a file."""

from __future__ import annotations

from pathlib import Path


def write_html(path: str | Path, html: str) -> Path:
    """Write the page ``html`` to ``path`` (UTF-8); returns the path."""
    out = Path(path)
    out.write_text(html, encoding="utf-8")
    return out


__all__ = ["write_html"]
