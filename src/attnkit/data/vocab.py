"""Token <-> id maps with the special symbols pad, bos, eos, unk; saved as JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)


@dataclass
class Vocab:
    """``tokens[i]`` is the token of id i; ids 0..3 are pad, bos, eos, unk."""

    tokens: list[str]

    def __post_init__(self) -> None:
        if tuple(self.tokens[:4]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {SPECIALS}, got {self.tokens[:4]}")
        self.index = {t: i for i, t in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise ValueError("duplicate tokens in vocabulary")

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1) -> Vocab:
        """Tokens seen at least ``min_freq`` times, most frequent first (ties alphabetical)."""
        return cls.from_counts(Counter(t for s in sentences for t in s), min_freq)

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], min_freq: int = 1) -> Vocab:
        """``build`` from each token's count (a text counted without splitting it)."""
        if min_freq < 1:
            raise ValueError(f"min_freq={min_freq}; it must be at least 1")
        kept = sorted(
            (t for t, c in counts.items() if c >= min_freq and t not in SPECIALS),
            key=lambda t: (-counts[t], t),
        )
        return cls([*SPECIALS, *kept])

    def encode(self, tokens: Sequence[str], *, bos: bool = False, eos: bool = True) -> list[int]:
        ids = [self.index.get(t, self.unk_id) for t in tokens]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens up to the first eos, without pad/bos."""
        out = []
        for i in ids:
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            out.append(self.tokens[i] if 0 <= i < len(self.tokens) else UNK)
        return out

    def to_json(self) -> str:
        return json.dumps({"tokens": self.tokens}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Vocab:
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
            raise ValueError('a vocabulary file must be a JSON object {"tokens": [...]}')
        return cls([str(t) for t in data["tokens"]])


__all__ = ["BOS", "EOS", "PAD", "SPECIALS", "UNK", "Vocab"]
