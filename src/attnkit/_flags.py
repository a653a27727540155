"""Values of comma-separated command-line flags, shared by the CLI and the experiments'
configs; imports nothing heavy (building the parser imports no torch)."""

from __future__ import annotations


def str_list(text: str) -> list[str]:
    """``--flag "a, b"`` -> ["a", "b"]: the comma-separated items, stripped, empty ones
    skipped."""
    return [x.strip() for x in text.split(",") if x.strip()]


def int_list(text: str, flag: str, example: str) -> list[int]:
    """``--flag "1,2,4"`` -> [1, 2, 4], empty items skipped; a ValueError naming the flag and
    showing ``example`` when an item is not an integer (the caller checks the values)."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(
            f"--{flag} {text!r}: give comma-separated integers, e.g. {example}"
        ) from None


__all__ = ["int_list", "str_list"]
