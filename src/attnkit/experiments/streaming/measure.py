"""What the streaming experiment measures on a trained LM: the nats of each character of a
stream, predicted under four ways of attending to the past (Xiao et al. 2023, Fig. 1 and 3):

* ``window``: a KV cache of the last w tokens only (``KVCache(window=w)``), decoded token by
  token; each key was computed once, when its token arrived, and stays as it was;
* ``sinks``: the same window and the first s tokens kept (StreamingLLM, ``sinks=s``);
* both with positions within the cache (§3.2, ``renumber=True``);
* ``recompute``: the last w tokens run through the model from scratch for every character
  (the "sliding window with re-computation" baseline): O(T·w²) per stream;
* ``dense``: one causal pass over the whole stream, positions 0 .. N-1 in the text.

Legend: B streams, N characters per stream, w window, s sinks, V vocabulary.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ...eval.lm import sliding_nll

LN2 = math.log(2)


def streams_of(ids: Tensor, length: int) -> Tensor:
    """ids (M,) -> (B, N): consecutive streams of ``length`` ids, B = ⌊M / N⌋ (the rest is
    dropped); each stream is read from its own start."""
    b = ids.shape[0] // length
    return ids[: b * length].view(b, length)  # (B, N)


@torch.no_grad()
def cached_nll(model: Any, streams: Tensor, window: int, sinks: int) -> Tensor:
    """Token-by-token decoding with a sliding KV cache of ``window`` recent tokens and
    ``sinks`` first ones, positions within the cache (``TransformerLM.step``, renumber):
    streams (B, N) -> nats of characters 1 .. N-1 (B, N-1)."""
    model.eval()
    state, out = None, []
    for t in range(streams.shape[1] - 1):
        logits, state = model.step(streams[:, t], state, t, window=window, sinks=sinks,
                                   renumber=True)  # (B, V) fmt: skip
        out.append(F.cross_entropy(logits, streams[:, t + 1], reduction="none"))  # (B,)
    return torch.stack(out, dim=1)  # (B, N-1)


@torch.no_grad()
def recompute_nll(model: Any, streams: Tensor, window: int) -> Tensor:
    """Character t + 1 predicted from the last ``window`` characters up to t, run from
    scratch (``attnkit.eval.lm.sliding_nll``; the first w from their whole prefix):
    streams (B, N) -> (B, N-1)."""
    model.eval()
    return torch.stack([sliding_nll(model, row, window) for row in streams])  # (B, N-1)


@torch.no_grad()
def dense_nll(model: Any, streams: Tensor) -> Tensor:
    """One causal pass over each whole stream (every earlier character, text positions):
    streams (B, N) -> (B, N-1)."""
    model.eval()
    logits = model(streams[:, :-1]).logits  # (B, N-1, V)
    return F.cross_entropy(logits.transpose(1, 2), streams[:, 1:], reduction="none")


def arm_nll(model: Any, streams: Tensor, window: int, sinks: int) -> dict[str, Tensor]:
    """Every arm's nats (B, N-1), by name: window, sinks, recompute, dense."""
    return {"window": cached_nll(model, streams, window, 0),
            "sinks": cached_nll(model, streams, window, sinks),
            "recompute": recompute_nll(model, streams, window),
            "dense": dense_nll(model, streams)}  # fmt: skip


def past(nats: Tensor, length: int) -> list[float]:
    """Bits per character of each stream over the characters past the training length L
    (targets L .. N-1): nats (B, N-1) -> (B,) as a list."""
    return (nats[:, length - 1 :].mean(dim=1) / LN2).tolist()


def curve(nats: Tensor, width: int) -> list[float]:
    """Bits per character by position, averaged over the streams, in bins of ``width``
    targets (the last may be shorter): nats (B, N-1) -> one value per bin."""
    per = nats.mean(dim=0) / LN2  # (N-1,)
    return [float(part.mean()) for part in per.split(width)]


__all__ = ["arm_nll", "cached_nll", "curve", "dense_nll", "past", "recompute_nll", "streams_of"]
