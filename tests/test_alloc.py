"""The command line keeps freed memory in glibc's heap (``_alloc.keep_freed_memory``): the
settings it asks for, that it is asked for by the command and by every pool worker, and
that ``import attnkit`` alone leaves the allocator as it was."""

import subprocess
import sys

import pytest

from attnkit import _alloc
from attnkit.cli import info, main

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="mallopt is glibc's (Linux) only"
)


class _FakeLibc:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


@glibc
def test_it_raises_the_mmap_threshold_and_the_trim_threshold(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    fake = _FakeLibc()
    monkeypatch.setattr(_alloc.ctypes, "CDLL", lambda name: fake)
    monkeypatch.setattr(_alloc, "_applied", False)
    assert _alloc.keep_freed_memory() is True and _alloc.applied()
    assert dict(fake.calls) == {-3: 1 << 30, -1: 1 << 30, -2: 64 << 20}


@glibc
def test_a_refused_setting_says_false(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_alloc.ctypes, "CDLL", lambda name: _FakeLibc(answer=0))
    monkeypatch.setattr(_alloc, "_applied", False)
    assert _alloc.keep_freed_memory() is False and not _alloc.applied()


def test_a_c_library_without_mallopt_is_left_alone(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_alloc.ctypes, "CDLL", lambda name: object())
    monkeypatch.setattr(_alloc.sys, "platform", "linux")
    monkeypatch.setattr(_alloc, "_applied", False)
    assert _alloc.keep_freed_memory() is False


def test_the_command_line_asks_for_it(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    asked = []
    monkeypatch.setattr("attnkit.cli.keep_freed_memory", lambda: asked.append(1) or True)
    monkeypatch.setattr(info, "run", lambda args: 0)
    assert main(["info"]) == 0
    assert asked == [1]


def _applied_here() -> bool:
    from attnkit import _alloc

    return _alloc.applied()


@glibc
def test_every_pool_worker_asks_for_it() -> None:
    from attnkit.experiments.pool import QuietPool

    with QuietPool(1) as pool:
        assert pool.submit(_applied_here).result(timeout=120) is True


@glibc
def test_importing_attnkit_leaves_the_allocator_alone() -> None:
    code = "import attnkit.experiments.pool; from attnkit import _alloc; print(_alloc.applied())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
