"""Helpers of the reliability suite: a tiny training command, a snapshot of a folder to prove
that nothing changed, and the one-line-error assertion."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from attnkit.cli import main

TINY = [
    "--task", "copy", "--train-size", "48", "--valid-size", "8", "--test-size", "8",
    "--model", "rnnsearch", "--emb", "8", "--enc-hidden", "8", "--dec-hidden", "8",
    "--maxout", "8", "--attn-hidden", "8", "--epochs", "1", "--batch-size", "16",
    "--no-progress",
]  # fmt: skip


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and mtime, to prove nothing changed."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            st = os.stat(os.path.join(dirpath, n))
            out[os.path.relpath(os.path.join(dirpath, n), root)] = (st.st_size, st.st_mtime_ns)
    return out


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> str:
    """Run the CLI; assert exit 2, no traceback, and exactly one error line on stderr (progress
    lines before it are fine), matching ``match``."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith(f"attnkit {argv[0]}: error:")]
    assert len(errors) == 1, err
    assert re.search(match, errors[0]), errors[0]
    return errors[0]
