"""Tokenisers: text -> tokens and back. Whitespace words, characters, and subwords from a
SentencePiece model (Kudo & Richardson 2018) trained on the training split only.

A subword model is kept as its serialized protobuf, base64 in the checkpoint's JSON, so that
translate/evaluate tokenise new text exactly as in training; parsing a protobuf runs no code.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

KINDS = ("word", "char", "spm")


class Tokeniser(Protocol):
    @property
    def name(self) -> str: ...

    def encode(self, text: str) -> list[str]: ...

    def decode(self, tokens: Sequence[str]) -> str: ...


@dataclass(frozen=True)
class Words:
    name: str = "word"

    def encode(self, text: str) -> list[str]:
        return text.split()

    def decode(self, tokens: Sequence[str]) -> str:
        return " ".join(tokens)


@dataclass(frozen=True)
class Chars:
    """Characters, with runs of whitespace collapsed to one space (a token of its own)."""

    name: str = "char"

    def encode(self, text: str) -> list[str]:
        return list(" ".join(text.split()))

    def decode(self, tokens: Sequence[str]) -> str:
        return "".join(tokens)


class SentencePiece:
    """Subword pieces ("▁Ein", "▁Mann", "s"); ``decode`` restores the detokenised text."""

    name = "spm"

    def __init__(self, model: bytes) -> None:
        import sentencepiece as spm

        self.model = model
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.LoadFromSerializedProto(model)
        except Exception as err:  # sentencepiece raises a bare RuntimeError/OSError
            raise ValueError(f"not a SentencePiece model ({err})") from None

    def encode(self, text: str) -> list[str]:
        return [str(p) for p in self.sp.EncodeAsPieces(text)]

    def decode(self, tokens: Sequence[str]) -> str:
        return str(self.sp.DecodePieces(list(tokens)))

    def to_json(self) -> str:
        return base64.b64encode(self.model).decode("ascii")

    @classmethod
    def from_json(cls, text: str) -> SentencePiece:
        return cls(base64.b64decode(text.encode("ascii"), validate=True))


def train_spm(lines: Iterable[str], vocab_size: int, *, kind: str = "bpe") -> SentencePiece:
    """Train a SentencePiece model on raw sentences (the training split, nothing else).
    Deterministic: one thread, every sentence used, no sampling."""
    import sentencepiece as spm

    if vocab_size < 8:
        raise ValueError(f"--spm-vocab {vocab_size}: it must be at least 8")
    text = [s for s in lines if s.strip()]
    if not text:
        raise ValueError("no training sentences to learn subwords from")
    buf = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(text),
            model_writer=buf,
            vocab_size=vocab_size,
            model_type=kind,
            character_coverage=1.0,
            num_threads=1,
            input_sentence_size=0,
            shuffle_input_sentence=False,
            bos_id=-1,
            eos_id=-1,  # attnkit's Vocab adds its own specials
            minloglevel=2,
        )
    except RuntimeError as err:
        msg = str(err).splitlines()[-1] if str(err) else repr(err)
        fix = "raise" if "smaller than required_chars" in msg else "lower"
        raise ValueError(
            f"could not learn {vocab_size} subwords from {len(text)} sentences ({msg}); "
            f"{fix} --spm-vocab"
        ) from None
    return SentencePiece(buf.getvalue())


def tokenisers_of(spec: dict[str, Any]) -> tuple[Tokeniser, Tokeniser]:
    """(source, target) tokenisers described by a data spec (see data/source.py)."""
    kind = str(spec.get("tokenise", "word"))
    if kind == "word":
        return Words(), Words()
    if kind == "char":
        return Chars(), Chars()
    if kind == "spm":
        models = spec.get("spm")
        if not isinstance(models, dict) or not {"src", "tgt"} <= set(models):
            raise ValueError(
                "tokenise='spm' but the spec carries no trained subword models; "
                "train them with fit_tokenisers(spec, train_lines)"
            )
        return SentencePiece.from_json(models["src"]), SentencePiece.from_json(models["tgt"])
    raise ValueError(f"unknown tokeniser {kind!r}; choose one of {KINDS}")


__all__ = [
    "KINDS",
    "Chars",
    "SentencePiece",
    "Tokeniser",
    "Words",
    "tokenisers_of",
    "train_spm",
]
