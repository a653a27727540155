"""The classifiers of ``attnkit experiment explanation``: Jain & Wallace's (2019, §3) BiRNN
with additive attention, and Wiegreffe & Pinter's (2019, §3.1, §3.3) baselines.

    e_t = E[x_t]                                           embeddings          (B, T, E)
    h_t = [→LSTM(e)_t ; ←LSTM(e)_t]                         BiRNN states        (B, T, D), D = 2H
    α   = softmax_t(vᵀ tanh(W h_t + b))                     additive attention  (B, T)
    ŷ   = softmax(W_o Σ_t α_t h_t + b_o)                    2 classes           (B, 2)

(the attention of Yang et al. 2016, eq. 5-7, ``mechanisms.hierarchical.AttentionPool``; Jain
& Wallace's "additive (tanh)" score is the same form). ``pool="uniform"`` freezes α to
1/n over the n real tokens (Wiegreffe & Pinter §3.1). ``TokenMLP`` has no context: each
token's features are a one-layer MLP of its own embedding, h_t = tanh(W e_t + b), pooled by
uniform weights, its own trained attention, or the weights of a trained ``BiRNNAttention``
imposed, frozen ("transplanted", Wiegreffe & Pinter §3.3).

Every model maps ids (B, T) (0 = padding) to logits (B, 2), as ``fit_classifier`` trains it.
Legend: B batch, T length, E embedding width, H width per direction, D = 2H feature width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ...mechanisms.hierarchical import AttentionPool, mean_pool
from ...models.encoders import run_packed

POOLS = ("attention", "uniform")
MLP_POOLS = ("uniform", "attention", "transplanted")


@dataclass(frozen=True)
class Sizes:
    vocab: int  # ids 0 .. vocab - 1, 0 = padding
    emb: int
    hidden: int  # per direction
    attn: int  # width A of the additive score


@dataclass
class Forward:
    """What a model computed: states h (B, T, D) (the pooled features), weights α (B, T),
    logits (B, 2)."""

    states: Tensor
    weights: Tensor
    logits: Tensor


def uniform_weights(mask: Tensor) -> Tensor:
    """1/n on each of the n real positions of mask (B, T), 0 elsewhere -> (B, T)."""
    m = mask.float()
    return m / m.sum(-1, keepdim=True).clamp(min=1.0)


def pool_logits(states: Tensor, weights: Tensor, out: nn.Linear) -> Tensor:
    """ŷ's logits from states (..., T, D) pooled by weights (..., T): W_o Σ_t α_t h_t + b_o."""
    return out((weights[..., None] * states).sum(-2))  # (..., 2)


class BiRNNAttention(nn.Module):
    """The BiRNN classifier of the module docstring; ``pool`` "attention" or "uniform"."""

    def __init__(self, sizes: Sizes, pool: str = "attention", cell: str = "lstm") -> None:
        super().__init__()
        if pool not in POOLS:
            raise ValueError(f"pool={pool!r}; choose one of {POOLS}")
        if cell not in ("lstm", "gru"):
            raise ValueError(f"cell={cell!r}; choose 'lstm' or 'gru'")
        self.pool = pool
        self.embed = nn.Embedding(sizes.vocab, sizes.emb, padding_idx=0)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(sizes.emb, sizes.hidden, batch_first=True, bidirectional=True)
        self.attention = AttentionPool(2 * sizes.hidden, sizes.attn)
        self.out = nn.Linear(2 * sizes.hidden, 2)

    def encode(self, e: Tensor, mask: Tensor) -> Tensor:
        """embeddings (B, T, E), mask (B, T) -> states (B, T, D), zero at padding."""
        lengths = mask.sum(-1).clamp(min=1)  # (B,)
        states, _ = run_packed(self.rnn, e, lengths, e.shape[1])  # (B, T, D)
        return states

    def weights(self, states: Tensor, mask: Tensor) -> Tensor:
        """α (B, T) over the states (B, T, D): the additive attention, or uniform."""
        if self.pool == "uniform":
            return uniform_weights(mask)
        w = self.attention(states, mask).weights
        assert w is not None
        return w

    def run(self, e: Tensor, mask: Tensor, detach_weights: bool = False) -> Forward:
        """The forward pass from embeddings; ``detach_weights`` cuts the graph at α (Jain &
        Wallace's gradient importance: no gradient flows through the attention)."""
        states = self.encode(e, mask)  # (B, T, D)
        alpha = self.weights(states, mask)  # (B, T)
        if detach_weights:
            alpha = alpha.detach()
        return Forward(states, alpha, pool_logits(states, alpha, self.out))

    def forward(self, ids: Tensor) -> Tensor:
        return self.run(self.embed(ids), ids != 0).logits  # (B, 2)


class TokenMLP(nn.Module):
    """A classifier without context (Wiegreffe & Pinter §3.3): h_t = tanh(W e_t + b), pooled
    by ``pool`` ("uniform", its own "attention", or "transplanted": the weights of
    ``teacher``, a trained ``BiRNNAttention``, computed on the same ids and never trained)."""

    def __init__(self, sizes: Sizes, pool: str, teacher: BiRNNAttention | None = None) -> None:
        super().__init__()
        if pool not in MLP_POOLS:
            raise ValueError(f"pool={pool!r}; choose one of {MLP_POOLS}")
        if (pool == "transplanted") != (teacher is not None):
            raise ValueError("pass a trained teacher exactly when pool='transplanted'")
        self.pool = pool
        self.embed = nn.Embedding(sizes.vocab, sizes.emb, padding_idx=0)
        self.mlp = nn.Linear(sizes.emb, 2 * sizes.hidden)
        self.attention = AttentionPool(2 * sizes.hidden, sizes.attn) if pool == "attention" \
            else None  # fmt: skip
        self.out = nn.Linear(2 * sizes.hidden, 2)
        self.teacher = [teacher]  # a list: its parameters stay out of this module's
        if teacher is not None:
            teacher.eval()
            teacher.requires_grad_(False)

    def weights(self, ids: Tensor, states: Tensor) -> Tensor:
        mask = ids != 0  # (B, T)
        teacher = self.teacher[0]
        if teacher is not None:
            with torch.no_grad():
                return teacher.run(teacher.embed(ids), mask).weights  # (B, T)
        if self.attention is not None:
            w = self.attention(states, mask).weights
            assert w is not None
            return w
        return uniform_weights(mask)

    def forward(self, ids: Tensor) -> Tensor:
        states = torch.tanh(self.mlp(self.embed(ids)))  # (B, T, D)
        states = states * (ids != 0)[..., None]  # (B, T, D), zero at padding
        return pool_logits(states, self.weights(ids, states), self.out)  # (B, 2)


def mean_logits(model: BiRNNAttention, ids: Tensor) -> Tensor:
    """The uniform model's logits via ``mean_pool``: the same as ``model(ids)`` with
    pool="uniform" (a cross-check of ``uniform_weights``)."""
    mask = ids != 0
    states = model.encode(model.embed(ids), mask)
    return model.out(mean_pool(states, mask).vector)


__all__ = ["BiRNNAttention", "Forward", "MLP_POOLS", "POOLS", "Sizes", "TokenMLP",
           "mean_logits", "pool_logits", "uniform_weights"]  # fmt: skip
