"""How the command line asks glibc's allocator to keep freed memory for the next step
(``keep_freed_memory``); without torch, so that ``attnkit --version`` stays fast."""

from __future__ import annotations

import ctypes
import sys
from typing import Any

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # glibc's mallopt parameters
HELD_BYTES = 1 << 30
"""Allocations up to this size come from the heap, and up to this much freed memory stays in
it (``keep_freed_memory``)."""
_applied = False


def _glibc(name: str) -> Any:
    """glibc's function ``name`` from this process, or None (not Linux, or another C library)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):  # musl and others
        return None


def applied() -> bool:
    """Whether ``keep_freed_memory`` has changed this process's allocator."""
    return _applied


def keep_freed_memory() -> bool:
    """Have glibc's allocator serve blocks up to 1 GiB from its heap and keep what is freed
    there for the next step, instead of mapping each large tensor afresh and unmapping it when
    it is freed.

    A training step allocates and frees the same large tensors every update. By default each
    one above 32 MiB (the exact-marginal rows' (B, T, S, V) output layer, 37 MB at the
    softness experiment's Multi30K sizes) is a new ``mmap`` whose pages the kernel zeroes
    again, and the process spends about as long in the kernel as in torch (measured on that
    row: 506 -> 292 ms per update, system time 18 s -> 2 s over 100 updates, the same
    numbers to the last bit). Called by the command line and its pool workers, never on
    ``import attnkit``: a library does not retune its host's allocator. Returns False, having
    changed nothing, where the C library is not glibc."""
    mallopt = _glibc("mallopt")
    if mallopt is None:
        return False
    settings = ((_M_MMAP_THRESHOLD, HELD_BYTES), (_M_TRIM_THRESHOLD, HELD_BYTES),
                (_M_TOP_PAD, 64 << 20))  # fmt: skip
    global _applied
    _applied = all([mallopt(param, value) == 1 for param, value in settings])
    return _applied


def give_back_freed_memory() -> bool:
    """Return the heap's free memory to the system now (glibc's ``malloc_trim(0)``), so that
    what a step allocates next is faulted in afresh and counted by a peak-memory reading
    (``bench.measure.peak_extra_mib``) even where ``keep_freed_memory`` keeps freed blocks.
    False, having done nothing, where the C library is not glibc."""
    trim = _glibc("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True


__all__ = ["HELD_BYTES", "applied", "give_back_freed_memory", "keep_freed_memory"]
