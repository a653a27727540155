"""Rows of a CSV/TSV file, with a damaged or oversized row as one ``ValueError`` naming the
file and the row instead of ``csv.Error`` (a field over ``csv.field_size_limit()``, 131,072
characters by default, would otherwise end in a traceback)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path


def csv_rows(path: str | Path, delimiter: str = ",") -> Iterator[list[str]]:
    """Each row of ``path`` (UTF-8) as a list of fields; row N of the message counts the header
    as row 1."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter=delimiter)
        n = 0
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as err:
                limit = csv.field_size_limit()
                what = (
                    f"a field over {limit:,} characters, the most a CSV field may hold: "
                    "shorten or split that row"
                    if "field limit" in str(err)
                    else f"{err}: fix that row"
                )
                line = "" if reader.line_num == n + 1 else f" (line {reader.line_num})"
                raise ValueError(f"{path}: row {n + 1}{line}: {what}") from None
            n += 1
            yield row


__all__ = ["csv_rows"]
