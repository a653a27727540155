"""Fixtures of the reliability suite: one tiny trained run and fresh copies of it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from _reliability import TINY

from attnkit.cli import main


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A resumable run folder of a tiny RNNsearch (seconds to train)."""
    out = tmp_path_factory.mktemp("reliability") / "run"
    assert main(["train", *TINY, "--out", str(out)]) == 0
    return out


@pytest.fixture
def copy_of(trained: Path, tmp_path: Path) -> Callable[[], Path]:
    def make() -> Path:
        dst = tmp_path / "run"
        shutil.copytree(trained, dst)
        return dst

    return make
