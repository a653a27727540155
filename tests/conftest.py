"""Shared fixtures of the test suite."""

import sys
import time
from collections.abc import Callable, Iterator

import pytest
import torch


def _single_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def one_thread_module() -> Iterator[None]:
    """One intra-op thread for a whole module of small-model tests (``pytestmark``): small
    recurrent models run far faster on one thread when the cores are shared."""
    yield from _single_thread()


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Run a test on one intra-op thread. The verification tests use tiny tensors: on a busy
    2-core machine, torch's thread pool costs them more than it gives (measured: the suite
    takes ~4x longer with 2 threads than with 1 while other jobs run)."""
    yield from _single_thread()


@pytest.fixture
def slow_attnkit() -> Callable[[float], list[str]]:
    """``slow_attnkit(seconds)``: the command line of ``python -m attnkit`` with every training
    update delayed by ``seconds``, a fault injected into the child process (the loop's
    ``train_step`` wrapped), so that a test can interrupt or kill a run mid-epoch."""

    def command(seconds: float) -> list[str]:
        code = (
            "import sys, time\n"
            "from attnkit.train import loop\n"
            "step = loop.train_step\n"
            f"loop.train_step = lambda *a: (time.sleep({seconds!r}), step(*a))[1]\n"
            "from attnkit.cli import main\n"
            "raise SystemExit(main())\n"
        )
        return [sys.executable, "-c", code]

    return command


def pytest_sessionstart(session: pytest.Session) -> None:
    """Build the banded kernel before the first test, saying so: otherwise the first test that
    reaches the sliding window sits silent for the 30-60 s of the build."""
    import attnkit.local._build as build
    import attnkit.local.native as native

    if not native.USE:
        return
    published = build.cache_dir(native._build_name()) / f"{native._build_name()}.so"
    if published.is_file():
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    say = reporter.write_line if reporter is not None else print
    say("attnkit: compiling the banded flash kernel once before the tests (30-60 s) ...")
    started = time.monotonic()
    ready = native.kernel() is not None
    say(f"attnkit: kernel {'built' if ready else 'not built (see the warning)'} "
        f"in {time.monotonic() - started:.0f} s")  # fmt: skip
