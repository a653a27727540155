"""Inputs and outputs the Hugging Face model tests share: a batch of token ids with one
left-padded sample, and a causal LM's logits without a graph."""

from __future__ import annotations

from typing import Any

import torch


def left_padded_batch(vocab: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """ids (2, length) in 3 .. vocab - 1 and a padding mask: sample 1 is left-padded by 3."""
    ids = torch.randint(3, vocab, (2, length), generator=torch.Generator().manual_seed(0))
    am = torch.ones(2, length, dtype=torch.long)
    am[1, :3] = 0
    return ids, am


def logits(model: Any, ids: torch.Tensor, am: torch.Tensor | None) -> torch.Tensor:
    with torch.no_grad():
        return model(ids, attention_mask=am).logits  # (B, T, V)
