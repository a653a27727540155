"""One parallel example: source tokens, target tokens, and (optionally) gold word alignments."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Example:
    """src / tgt: whitespace tokens (or characters). links: gold alignment pairs
    (src_idx, tgt_idx), 0-based; empty when the task has none."""

    src: list[str]
    tgt: list[str]
    links: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Splits:
    train: list[Example]
    valid: list[Example]
    test: list[Example]

    def get(self, name: str) -> list[Example]:
        if name not in ("train", "valid", "test"):
            raise ValueError(f"unknown split {name!r}; choose train, valid or test")
        return getattr(self, name)


__all__ = ["Example", "Splits"]
