"""Attention weights on disk: a safetensors file with a ``weights`` tensor (Tq, Tk),
(H, Tq, Tk) or (L, H, Tq, Tk), and the tokens as JSON lists in its metadata
(``tgt_tokens`` for the queries/rows, ``src_tokens`` for the keys/columns) and ``kind``,
"self" or "cross". Self-attention keeps one token list (``src_tokens`` None in the record):
saved with no source tokens, or with the same list twice (``save_attention(path, w, tokens,
tokens)``, as a Hugging Face model's ``output_attentions`` are often saved). A file without
``kind`` (older, or from another tool) is self-attention when its two lists are the same.
``attnkit view --weights FILE`` reads it.

    save_attention("attn.safetensors", weights, query_tokens, key_tokens)
    record = load_attention("attn.safetensors")
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .._checks import as_stack, unreadable_safetensors
from .._renamed import renamed_keywords

KINDS = ("self", "cross")


@dataclass
class AttentionRecord:
    """weights (Tq, Tk) | (H, Tq, Tk) | (L, H, Tq, Tk); tokens may be None when the file
    carries none (then pass them on the command line)."""

    weights: torch.Tensor
    tgt_tokens: list[str] | None
    src_tokens: list[str] | None


def _kind(
    weights: torch.Tensor, tgt: list[str] | None, src: list[str] | None, kind: str | None
) -> str:
    """The kind, "self" or "cross": ``kind`` when given (checked), else self-attention when
    there are no source tokens or they are the target tokens over square weights (Tq = Tk)."""
    if kind is None:
        square = weights.shape[-1] == weights.shape[-2]  # Tk == Tq
        return "self" if src is None or (src == tgt and square) else "cross"
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: pass one of {', '.join(KINDS)} (or None to infer it)")
    if kind == "self" and src is not None and src != tgt:
        raise ValueError("kind='self' with source tokens that differ from the target tokens: "
                         "self-attention has one token list; pass kind='cross'")  # fmt: skip
    if kind == "cross" and src is None:
        raise ValueError("kind='cross' needs src_tokens (the keys' tokens)")
    return kind


@renamed_keywords(tgt_tokens="query_tokens", src_tokens="key_tokens")
def save_attention(
    path: str | Path,
    weights: Any,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    *,
    name: str = "weights",
    kind: str | None = None,
) -> Path:
    """Write ``weights`` (as float32) and the tokens to a safetensors file (as its metadata
    ``tgt_tokens`` and ``src_tokens``). ``kind`` "self" | "cross" | None (inferred:
    self-attention when ``key_tokens`` is None or the same list as ``query_tokens``; pass
    "cross" for a cross-attention whose two token lists are the same). Self-attention is
    stored with one token list. (``tgt_tokens=``/``src_tokens=`` until this release.)"""
    as_stack(weights)  # checks the rank and that every weight is finite
    tensor = torch.as_tensor(weights).detach().to("cpu", torch.float32).contiguous()
    tgt = None if query_tokens is None else [str(t) for t in query_tokens]
    src = None if key_tokens is None else [str(t) for t in key_tokens]
    meta = {}
    if tgt is not None:
        meta["kind"] = _kind(tensor, tgt, src, kind)
        meta["tgt_tokens"] = json.dumps(tgt, ensure_ascii=False)
    if src is not None and meta.get("kind") != "self":
        meta["src_tokens"] = json.dumps(src, ensure_ascii=False)
    save_file({name: tensor}, str(path), metadata=meta)
    return Path(path)


def _tokens(meta: dict[str, str], key: str, path: Path) -> list[str] | None:
    if key not in meta:
        return None
    try:
        tokens = json.loads(meta[key])
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: metadata {key!r} is not JSON ({err})") from err
    if not isinstance(tokens, list):
        raise ValueError(f"{path}: metadata {key!r} must be a JSON list of tokens")
    return [str(t) for t in tokens]


def load_attention(path: str | Path, *, name: str = "weights") -> AttentionRecord:
    """Read a file written by ``save_attention`` (or any safetensors file with a weights
    tensor named ``name``). Self-attention comes back with ``src_tokens`` None."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no weights file {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            names = list(f.keys())
            weights = f.get_tensor(name) if name in names else None
            meta = f.metadata() or {}
    except Exception as err:
        raise unreadable_safetensors(
            path, err, "pass a file written by attnkit.viz.save_attention or safetensors' save_file"
        ) from None
    if weights is None:
        raise ValueError(f"{path} has no tensor {name!r}; it has {names}: pass --name NAME")
    if not 2 <= weights.dim() <= 4:  # before anything reads its last two dims
        raise ValueError(
            f"{path}: tensor {name!r} has shape {tuple(weights.shape)}; attention weights are "
            "(Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk): save one example's weights"
        )
    tgt, src = _tokens(meta, "tgt_tokens", path), _tokens(meta, "src_tokens", path)
    try:
        kind = _kind(weights, tgt, src, meta.get("kind"))
    except ValueError as err:
        raise ValueError(f"{path}: metadata {err}") from err
    return AttentionRecord(weights, tgt, None if kind == "self" else src)


__all__ = ["KINDS", "AttentionRecord", "load_attention", "save_attention"]
