"""The model of ``attnkit experiment coref``: an encoder-only pronoun tagger, a stack of
attnkit's Transformer encoder layers (Vaswani et al. 2017; ``models.transformer.EncoderLayer``:
multi-head softmax(QKᵀ/√d_k)V, pre-norm, no dropout) with a linear read-out of two tags at
the pronoun's own position; how it is trained (early stopping on the validation loss); and
the ablation of one head.

    x_0     = √D · E[src] + PE                                        (B, S, D)
    x_l     = EncoderLayer_l(x_{l-1})                                  l = 1 .. L
    logits  = LayerNorm(x_L)[b, pronoun_b] W_tag + b_tag               (B, 2)   0 il, 1 elle
    loss    = mean_b −log softmax(logits_b)[tag_b]

Only the pronoun's position is read, so whatever the tag needs (the two nouns' genders, the
adjective that picks one) must reach that position through the encoder's own attention: no
decoder can fetch it instead.

Ablating head h of layer l (Michel et al. 2019, "Are Sixteen Heads Really Better than One?",
head masking): its context is zeroed before the output projection,

    MultiHead(x) = Concat(head_1, ..., ξ_h · head_h, ..., head_H) W^O,   ξ_h = 0,

so the layer runs as if that head's output were removed (``zero_head``, ``ablated``).

Legend: B sentences, S length, D width, H heads, Dh = D / H, L layers.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...models.base import source_mask
from ...models.sequence_classifiers import parameters
from ...models.transformer import EncoderLayer, TransformerConfig, sinusoids
from ...train.updates import update
from .data import TAGS, Batch, source_ids


class Tagger(nn.Module):
    """L attnkit encoder layers (pre-norm, no dropout) and a two-way read-out at the pronoun
    (the module docstring). Holds parameters; the attention is attnkit's ``SelfAttention``."""

    def __init__(self, vocab: int, dim: int, heads: int, layers: int, ff: int) -> None:
        super().__init__()
        c = TransformerConfig(vocab, len(TAGS), dim=dim, heads=heads, enc_layers=layers,
                              dec_layers=1, ff=ff, dropout=0.0, norm="pre")  # fmt: skip
        self.dim, self.heads = dim, heads
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        nn.init.normal_(self.emb.weight, std=dim**-0.5)
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, len(TAGS))

    def forward(self, src: Tensor, lengths: Tensor, pronoun: Tensor, need_weights: bool = False
                ) -> tuple[Tensor, list[Tensor | None]]:  # fmt: skip
        """src (B, S), lengths (B,), pronoun positions (B,) -> tag logits (B, 2), and each
        layer's self-attention weights (B, H, S, S) when ``need_weights`` (else L Nones)."""
        mask = source_mask(lengths, src.shape[1])  # (B, 1, S)
        x = self.emb(src) * math.sqrt(self.dim)  # (B, S, D)
        x = x + sinusoids(src.shape[1], self.dim, src.device).to(x.dtype)  # (B, S, D)
        weights = []
        for layer in self.layers:
            x, w = layer(x, mask, need_weights)  # (B, S, D), (B, H, S, S) | None
            weights.append(w)
        at = x[torch.arange(len(x)), pronoun]  # (B, D)
        return self.out(self.norm(at)), weights  # (B, 2), L × (B, H, S, S) | None


def build(dim: int, heads: int, layers: int, ff: int) -> Tagger:
    return Tagger(len(source_ids()) + 1, dim, heads, layers, ff)


def zero_head(context: Tensor, head: int, heads: int) -> Tensor:
    """context (..., H·Dh), the heads' outputs side by side (head h in columns h·Dh ..
    (h+1)·Dh − 1, as attnkit's ``AttentionHeads`` concatenates them before W^O) -> the same
    with head ``head``'s columns zero."""
    if not 0 <= head < heads or context.shape[-1] % heads:
        raise ValueError(f"head {head} of {heads} heads over width {context.shape[-1]}: pass "
                         f"0 <= head < {heads} and a width divisible by the heads")  # fmt: skip
    dh = context.shape[-1] // heads
    keep = torch.ones(heads, dh, dtype=context.dtype, device=context.device)  # (H, Dh)
    keep[head] = 0
    return context * keep.flatten()  # (..., H·Dh)


@contextmanager
def ablated(model: Tagger, layer: int, head: int) -> Iterator[Tagger]:
    """``model`` with head ``head`` of layer ``layer`` zeroed (``zero_head`` on the input of
    that layer's W^O, a forward pre-hook) inside the ``with`` block; restored after it."""
    if not 0 <= layer < len(model.layers):
        raise ValueError(f"layer {layer}: the tagger has layers 0 to {len(model.layers) - 1}")
    out_proj = cast(EncoderLayer, model.layers[layer]).attn.out_proj
    zero_head(torch.zeros(1, model.dim), head, model.heads)  # checks head

    def hook(_: nn.Module, args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        return (zero_head(args[0], head, model.heads), *args[1:])

    handle = out_proj.register_forward_pre_hook(hook)
    try:
        yield model
    finally:
        handle.remove()


def loss_of(model: Tagger, batch: Batch) -> Tensor:
    """The mean cross-entropy of the pronoun tags."""
    logits, _ = model(batch.src, batch.lengths, batch.pronoun)  # (B, 2)
    return F.cross_entropy(logits, batch.tag)


@torch.no_grad()
def valid_loss(model: Tagger, batches: list[Batch]) -> float:
    """The mean pronoun cross-entropy over every sentence of ``batches``."""
    total = sum(float(loss_of(model, b)) * len(b) for b in batches)
    return total / sum(len(b) for b in batches)


def fit(
    model: Tagger, make_batch: Callable[[int], Batch], valid: list[Batch], *, steps: int,
    eval_every: int, patience: int, lr: float, seed: int, clip: float = 1.0,
    min_delta: float = 0.0,
) -> dict[str, object]:  # fmt: skip
    """Adam updates on ``make_batch(0), make_batch(1), ...``; every ``eval_every`` updates the
    validation loss; stop after ``patience`` validations none of which is lower by more than
    ``min_delta`` than the loss of the last one that was, or at ``steps`` (the cap): a loss
    that creeps towards zero by millionths is a plateau, not progress. The model ends with
    the weights of the lowest validation loss. Returns the
    curve ([updates, valid loss] per validation), the updates made (``stop``), the best
    validation's updates, and whether the cap cut the run before its plateau (``censored``)."""
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    curve: list[list[float]] = []
    best, best_at, best_state, since = math.inf, 0, copy.deepcopy(model.state_dict()), 0
    last_gain = math.inf  # the loss of the last validation that lowered it by > min_delta
    step = 0
    while step < steps and since < patience:
        model.train()
        for _ in range(min(eval_every, steps - step)):
            update(model, opt, loss_of(model, make_batch(step)), clip)
            step += 1
        model.eval()
        loss = valid_loss(model, valid)
        curve.append([step, round(loss, 5)])
        if loss < best:
            best, best_at, best_state = loss, step, copy.deepcopy(model.state_dict())
        if loss < last_gain - min_delta:
            last_gain, since = loss, 0
        else:
            since += 1
    model.load_state_dict(best_state)
    model.eval()
    return {"curve": curve, "stop": step, "best": best_at, "censored": since < patience}


@torch.no_grad()
def hits_of(model: Tagger, batch: Batch) -> Tensor:
    """Whether the tag predicted at each pronoun is the gold one, (B,) bool."""
    logits, _ = model(batch.src, batch.lengths, batch.pronoun)  # (B, 2)
    return logits.argmax(-1) == batch.tag


@torch.no_grad()
def maps(model: Tagger, batch: Batch) -> Tensor:
    """Every encoder self-attention map, (B, L, H, S, S); each row sums to one over the real
    tokens."""
    _, weights = model(batch.src, batch.lengths, batch.pronoun, need_weights=True)
    return torch.stack([w for w in weights if w is not None], dim=1)  # (B, L, H, S, S)


__all__ = ["Tagger", "ablated", "build", "fit", "hits_of", "loss_of", "maps", "parameters",
           "valid_loss", "zero_head"]  # fmt: skip
