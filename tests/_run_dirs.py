"""What the tests of run and experiment folders (``attnkit.train.run_dir``) share: the check
that opening one is refused with a one-line ``RunDirError``, and a user's file behind a
symbolic link that attnkit must never write through, and the setups that make a fresh folder
holding one such file under a name attnkit writes.

    refused_open(open_run, "in use by attnkit pid", out=run)
    setup = holding_users_file("len.csv"); setup(out)  # out/len.csv, the user's, before any run
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from attnkit.train.run_dir import RunDirError


def refused_open(opener: Callable[..., AbstractContextManager[Any]], match: str, *args: Any,
                 **kwargs: Any) -> RunDirError:  # fmt: skip
    """Assert that ``opener(*args, **kwargs)`` (``open_run``, ``open_experiment``) raises a
    ``RunDirError`` matching ``match`` (a regular expression) before its body runs, its message
    one line; returns the error."""
    with pytest.raises(RunDirError, match=match) as err:
        with opener(*args, **kwargs):
            pytest.fail("opened")
    assert "\n" not in str(err.value)  # one line
    return err.value


def linked_to_precious(out: Path, name: str) -> Path:
    """``out/name`` made a symbolic link to the user's ``precious.txt`` (content "precious")
    beside ``out``; returns the link."""
    (out.parent / "precious.txt").write_text("precious")
    (out / name).symlink_to(out.parent / "precious.txt")
    return out / name


def holding_users_file(name: str) -> Callable[[Path], None]:
    """A setup: make the folder ``out`` holding ``out/name``, the user's own file (content
    "mine"), made before any run."""

    def setup(out: Path) -> None:
        out.mkdir()
        (out / name).write_text("mine")

    return setup


def holding_link(name: str) -> Callable[[Path], None]:
    """A setup: make the folder ``out`` holding ``out/name``, a symbolic link to the user's
    ``precious.txt`` beside ``out`` (``linked_to_precious``)."""

    def setup(out: Path) -> None:
        out.mkdir()
        linked_to_precious(out, name)

    return setup
