"""Attention weights on disk: a safetensors file with a ``weights`` tensor (Tq, Tk),
(H, Tq, Tk) or (L, H, Tq, Tk), and the tokens as JSON lists in its metadata
(``tgt_tokens`` for the queries/rows, ``src_tokens`` for the keys/columns; no ``src_tokens``
= self-attention). ``attnkit view --weights FILE`` reads it.

    save_attention("attn.safetensors", weights, tgt_tokens, src_tokens)
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

from .._checks import as_stack


@dataclass
class AttentionRecord:
    """weights (Tq, Tk) | (H, Tq, Tk) | (L, H, Tq, Tk); tokens may be None when the file
    carries none (then pass them on the command line)."""

    weights: torch.Tensor
    tgt_tokens: list[str] | None
    src_tokens: list[str] | None


def save_attention(
    path: str | Path,
    weights: Any,
    tgt_tokens: Sequence[str] | None = None,
    src_tokens: Sequence[str] | None = None,
    *,
    name: str = "weights",
) -> Path:
    """Write ``weights`` (as float32) and the tokens to a safetensors file."""
    as_stack(weights)  # checks the rank and that every weight is finite
    tensor = torch.as_tensor(weights).detach().to("cpu", torch.float32).contiguous()
    meta = {}
    if tgt_tokens is not None:
        meta["tgt_tokens"] = json.dumps([str(t) for t in tgt_tokens], ensure_ascii=False)
    if src_tokens is not None:
        meta["src_tokens"] = json.dumps([str(t) for t in src_tokens], ensure_ascii=False)
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
    tensor named ``name``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no weights file {path}")
    with safe_open(str(path), framework="pt") as f:
        names = list(f.keys())
        if name not in names:
            raise ValueError(f"{path} has no tensor {name!r}; it has {names}: pass --name NAME")
        weights = f.get_tensor(name)
        meta = f.metadata() or {}
    return AttentionRecord(
        weights, _tokens(meta, "tgt_tokens", path), _tokens(meta, "src_tokens", path)
    )


__all__ = ["AttentionRecord", "load_attention", "save_attention"]
