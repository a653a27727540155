"""Where a run computes: the device and the CPU thread count, checked once for every command."""

from __future__ import annotations

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


__all__ = ["pick_device", "set_threads"]
