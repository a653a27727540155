"""Issue 32, data loss: `attnkit experiment --out DIR` keeps the run-folder rules of `train`
(§1), the lock is never written through a link (§2), `evaluate --hyps` never overwrites one of
its inputs (§3). Each case is refused with one line, exit 2, and no file changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _reliability import TINY, one_line_error, snapshot

from attnkit.train.run_dir import LOCK

# §2 the lock is never written through a link


def symlinked(lock: Path, precious: Path) -> None:
    lock.symlink_to(precious)


def hard_linked(lock: Path, precious: Path) -> None:
    os.link(precious, lock)


@pytest.mark.parametrize(
    ("link", "match"),
    [
        (symlinked, r"run/\.attnkit\.lock is a symbolic link; attnkit never writes through one"),
        (hard_linked, r"run/\.attnkit\.lock is not a lock file of attnkit's \(a hard link"),
    ],
    ids=["symlink", "hard-link"],
)
def test_the_lock_is_never_written_through_a_link(tmp_path: Path, link, match, capsys) -> None:
    """`ln -s $PWD/precious.txt runs/x/.attnkit.lock; attnkit train --out runs/x` truncated
    precious.txt and wrote a pid into it; now the run is refused and the target stays."""
    precious = tmp_path / "precious.txt"
    precious.write_text("precious")
    (tmp_path / "run").mkdir()
    link(tmp_path / "run" / LOCK, precious)
    before = snapshot(tmp_path)
    one_line_error(capsys, ["train", *TINY, "--out", str(tmp_path / "run")], match)
    assert precious.read_text() == "precious"
    assert snapshot(tmp_path) == before
    assert sorted(os.listdir(tmp_path / "run")) == [LOCK]
