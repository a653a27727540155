"""Where a run computes: the device and the CPU thread count, checked once for every command;
and how a model is compiled for that device (``attnkit train --compile``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


def pick_device(name: str) -> str:
    """"auto" | "cpu" | "cuda" -> "cpu" or "cuda", with a clear error when CUDA is absent."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"--device {name!r}; choose auto, cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda but torch sees no CUDA device; use --device cpu or auto")
    return name


def set_threads(n: int) -> None:
    if n < 1:
        raise ValueError(f"--threads {n}; it must be at least 1")
    torch.set_num_threads(n)


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """``with torch_threads(n):`` torch's intra-op threads are ``n`` inside the block and what
    they were before after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def compile_options(device: str) -> dict[str, Any]:
    """Inductor options for ``torch.compile`` of a model trained on ``device``.

    On a CPU (the measurements: docs/perf/log-performance.md, "Why compiled training was slower than
    eager"):

    - ``cpp.simdlen=0``: scalar C++ kernels. The vectorised kernels' store of a comparison
      into a bool tensor (the ReLU mask its backward keeps, dropout masks, attention masks) is
      far slower than the scalar store, and made the compiled forward slower than eager.
      (Not ``cpp.vec_isa_ok=False``: inductor caches the CPU's vector ISAs under it, and a
      later compile in the process with default options fails to build.)
    - ``fallback_random=True``: dropout draws from ATen's generator, as in eager mode (the
      same numbers from the same seed), instead of inductor's in-kernel generator.

    On CUDA no options: neither slowdown is a GPU one."""
    if torch.device(device).type == "cpu":  # "cpu", or a rank's "cuda:1"
        return {"cpp.simdlen": 0, "fallback_random": True}
    return {}


def compile_in_place(model: torch.nn.Module, device: str) -> None:
    """``model.compile`` (the forward compiled in place: parameters, ``state_dict`` keys and
    the decoding methods unchanged) with :func:`compile_options` for ``device``."""
    model.compile(options=compile_options(device))


__all__ = ["compile_in_place", "compile_options", "pick_device", "set_threads"]
