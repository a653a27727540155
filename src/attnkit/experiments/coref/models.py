"""The model of ``attnkit experiment coref`` and how it is trained: attnkit's Transformer
encoder-decoder (Vaswani et al. 2017) translating the English sentence into its gendered
target word for word, by teacher forcing.

    logits = Transformer(src, tgt_in)                                    (B, S, V)
    loss   = mean over real target words t of −log softmax(logits)[t, tgt_out[t]]
    g ← clip(∇loss, ‖g‖₂ ≤ clip);  θ ← Adam(θ, g, lr)

Nothing names the pronoun's referent: the only signal about it is which of "il" / "elle" is
the next target word, so a head that looks from "it" at the right noun has found the link
on its own.

Legend: B sentences, S length (source = target), V target vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ...models.sequence_classifiers import parameters
from ...models.transformer import Transformer, TransformerConfig
from ...train.updates import update
from .data import PAD, Batch, source_ids, target_ids


def build(dim: int, heads: int, enc_layers: int, dec_layers: int, ff: int) -> Transformer:
    """A pre-norm Transformer without dropout, target embedding tied to the output layer."""
    return Transformer(TransformerConfig(
        len(source_ids()) + 1, len(target_ids()) + 2, dim=dim, heads=heads,
        enc_layers=enc_layers, dec_layers=dec_layers, ff=ff, dropout=0.0, norm="pre",
    ))  # fmt: skip


def logits(model: Transformer, batch: Batch) -> Tensor:
    """Teacher-forced logits (B, S, V)."""
    return model(batch.src, batch.lengths, batch.tgt_in).logits


def fit_translation(
    model: Transformer, make_batch: Callable[[int], Batch], steps: int, lr: float, seed: int,
    clip: float = 1.0,
) -> list[float]:  # fmt: skip
    """``steps`` Adam updates on ``make_batch(0), make_batch(1), ...`` (the loss of the module
    docstring); returns each update's loss. ``seed`` seeds torch before the first update."""
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    model.train()
    for step in range(steps):
        b = make_batch(step)
        out = logits(model, b)  # (B, S, V)
        loss = F.cross_entropy(out.flatten(0, 1), b.tgt_out.flatten(), ignore_index=PAD)
        update(model, opt, loss, clip)
        losses.append(float(loss.detach()))
    model.eval()
    return losses


@torch.no_grad()
def hits_of(model: Transformer, batch: Batch) -> tuple[Tensor, tuple[int, int]]:
    """Under teacher forcing (the gold prefix): whether the word predicted at the pronoun's
    position is the gold il / elle, (B,) bool; and (correct target words, real words)."""
    pred = logits(model, batch).argmax(-1)  # (B, S)
    rows = torch.arange(len(batch))
    said = pred[rows, batch.pronoun] == batch.tgt_out[rows, batch.pronoun]  # (B,)
    real = batch.tgt_out != PAD  # (B, S)
    return said, (int((pred == batch.tgt_out)[real].sum()), int(real.sum()))


@torch.no_grad()
def maps(model: Transformer, batch: Batch) -> dict[str, Tensor]:
    """Every attention of the teacher-forced pass (``Transformer.attention_maps``):
    "enc-self" (B, L_enc, H, S, S), "cross" (B, L_dec, H, S, S), "dec-self" (B, L_dec, H, S, S)."""
    return model.attention_maps(batch.src, batch.lengths, batch.tgt_in)


__all__ = ["build", "fit_translation", "hits_of", "logits", "maps", "parameters"]
