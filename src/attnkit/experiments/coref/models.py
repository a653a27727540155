"""The pieces of ``attnkit experiment coref``: the sentences as tensors, a small bidirectional
Transformer encoder that names the pronoun's noun from the pronoun's position, and the
attention mass that the pronoun puts on the right noun and on the wrong one.

    PronounEncoder (Vaswani et al. 2017, encoder only): x₀ = E[x] + PE (§3.5), pre-norm
        layers of multi-head self-attention over every real token (attnkit's EncoderLayer,
        eq. 1: softmax(QKᵀ/√d_k)V per head), a final LayerNorm; logits = W x_L[p] + b at the
        pronoun's position p, one class per noun of the task.
    attention mass of head (l, h):  m⁺ = α^{l,h}[p, r],  m⁻ = α^{l,h}[p, o]
        with r the referent's position and o the other noun's; averaged over sentences.

Legend: B batch, S sentence length, D model width, L layers, H heads, C classes (nouns),
V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ...data.coref import PRONOUN, CorefItem, nouns, vocabulary
from ...models.transformer import EncoderLayer, TransformerConfig, sinusoids

PAD = 0


def token_ids() -> dict[str, int]:
    """Word -> id; 0 is padding."""
    return {w: i + 1 for i, w in enumerate(vocabulary())}


def encode(batch: Sequence[CorefItem], left: bool = False) -> tuple[Tensor, Tensor]:
    """tokens (B, S) padded with 0 on the right (``left``: on the left, so that a left-to-right
    reader ends on the last word), labels (B,): the index of each pronoun's noun in
    ``nouns()``."""
    ids, classes = token_ids(), {n: i for i, n in enumerate(nouns())}
    s = max(len(x.tokens) for x in batch)
    tokens = torch.full((len(batch), s), PAD, dtype=torch.long)  # (B, S)
    for b, x in enumerate(batch):
        row = torch.tensor([ids[w] for w in x.tokens])
        if left:
            tokens[b, s - len(row) :] = row
        else:
            tokens[b, : len(row)] = row
    labels = torch.tensor([classes[x.noun] for x in batch])  # (B,)
    return tokens, labels


def positions(batch: Sequence[CorefItem]) -> tuple[Tensor, Tensor, Tensor]:
    """(pronoun, referent, other noun) positions (B,) each, as in ``encode(batch)``."""
    cols = [[x.pronoun, x.referent, x.other] for x in batch]
    p, r, o = torch.tensor(cols).unbind(dim=1)  # (B,) each
    return p, r, o


class PronounEncoder(nn.Module):
    """tokens (B, S) -> logits (B, C), read at the pronoun (see the module docstring)."""

    pe: Tensor  # (S_max, D)

    def __init__(self, vocab: int, classes: int, pronoun_id: int, dim: int, heads: int,
                 layers: int, ff: int, max_len: int = 64) -> None:  # fmt: skip
        super().__init__()
        c = TransformerConfig(
            vocab,
            classes,
            dim=dim,
            heads=heads,
            enc_layers=layers,
            dec_layers=1,
            ff=ff,
            dropout=0.0,
            norm="pre",
        )  # fmt: skip  (validates dim, heads, layers, ff)
        self.pronoun_id = pronoun_id
        self.embed = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)
        self.register_buffer("pe", sinusoids(max_len, dim), persistent=False)

    def encode(self, tokens: Tensor, need_weights: bool = False
               ) -> tuple[Tensor, list[Tensor | None]]:  # fmt: skip
        """tokens (B, S) -> x_L (B, S, D), each layer's weights (B, H, S, S) | None."""
        mask = (tokens != PAD)[:, None, :]  # (B, 1, S), True = may attend
        x = self.embed(tokens) + self.pe[: tokens.shape[1]]  # (B, S, D)
        weights = []
        for layer in self.layers:
            x, w = layer(x, mask, need_weights)  # (B, S, D), (B, H, S, S) | None
            weights.append(w)
        return self.norm(x), weights

    def pronoun_at(self, tokens: Tensor) -> Tensor:
        """The pronoun's position in each row: (B, S) -> (B,)."""
        is_it = tokens == self.pronoun_id  # (B, S)
        if not bool(is_it.any(dim=1).all()):
            raise ValueError(f"every sentence needs the pronoun {PRONOUN!r}; a row has none")
        return is_it.int().argmax(dim=1)  # (B,)

    def forward(self, tokens: Tensor) -> Tensor:
        x, _ = self.encode(tokens)  # (B, S, D)
        at = self.pronoun_at(tokens)  # (B,)
        return self.head(x[torch.arange(len(tokens)), at])  # (B, C)

    @torch.no_grad()
    def attention(self, tokens: Tensor) -> Tensor:
        """Every layer's and head's self-attention: tokens (B, S) -> (B, L, H, S, S)."""
        _, weights = self.encode(tokens, need_weights=True)
        return torch.stack([w for w in weights if w is not None], dim=1)  # (B, L, H, S, S)


def build_encoder(dim: int, heads: int, layers: int, ff: int) -> PronounEncoder:
    ids = token_ids()
    return PronounEncoder(len(ids) + 1, len(nouns()), ids[PRONOUN], dim, heads, layers, ff)


def pronoun_mass(weights: Tensor, pronoun: Tensor, right: Tensor, wrong: Tensor
                 ) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Per sentence, the weight that each head's pronoun row puts on the right and on the wrong
    noun: weights (B, L, H, S, S), positions (B,) -> m⁺ (B, L, H), m⁻ (B, L, H)."""
    b = torch.arange(len(weights))
    rows = weights[b, :, :, pronoun]  # (B, L, H, S): each head's pronoun row
    return rows[b, :, :, right], rows[b, :, :, wrong]  # (B, L, H) each


def mass_table(weights: Tensor, batch: Sequence[CorefItem]) -> dict[str, Tensor]:
    """Over the sentences of ``batch``: mean mass on the right noun (L, H), on the wrong noun
    (L, H), and the share of sentences whose right noun gets more than the wrong one (L, H)."""
    p, r, o = positions(batch)
    right, wrong = pronoun_mass(weights, p, r, o)  # (B, L, H) each
    return {
        "right": right.mean(dim=0),
        "wrong": wrong.mean(dim=0),
        "picks_right": (right > wrong).float().mean(dim=0),
    }


def best_head(right: Tensor, wrong: Tensor) -> tuple[int, int]:
    """(layer, head) with the largest mean margin m⁺ − m⁻: (L, H), (L, H) -> (l, h)."""
    flat = int((right - wrong).flatten().argmax())
    return divmod(flat, right.shape[1])


__all__ = [
    "PAD",
    "PronounEncoder",
    "best_head",
    "build_encoder",
    "encode",
    "mass_table",
    "positions",
    "pronoun_mass",
    "token_ids",
]
