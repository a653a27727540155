"""Shared fixtures of the test suite."""

from collections.abc import Iterator

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
