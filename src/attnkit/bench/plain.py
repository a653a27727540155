"""Plain PyTorch models of the same sizes as attnkit's, the yardsticks of ``attnkit bench
--scenarios models``: how fast the same network trains written directly in torch.

    PlainBahdanau:     RNNsearch (Bahdanau 2015) as one would write it by hand: a packed
                       bidirectional nn.GRU, U_a h_j projected once per sentence, a GRUCell
                       loop of  e = v_aᵀ tanh(W_a s_{i-1} + U_a h_j),  c_i = Σ_j α_ij h_j,
                       s_i = GRU([E y_{i-1}; c_i], s_{i-1}),  then the deep output
                       W_o maxout(U_o s_i + V_o E y_{i-1} + C_o c_i) once over all positions
    PlainTransformer:  torch.nn.Transformer (post-norm, batch_first) with √d-scaled embeddings,
                       sinusoidal positions and the output tied to the target embedding

Both take (src (B, S), src_len (B,), tgt_in (B, T)) and return logits (B, T, V).
Legend: B batch, S source length, T target length, V target vocabulary, n encoder width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..models.base import maxout
from ..models.transformer import sinusoids


def _padding(src_len: Tensor, length: int) -> Tensor:
    """(B, S) bool, True = padding (torch's key_padding_mask polarity)."""
    return torch.arange(length, device=src_len.device)[None, :] >= src_len[:, None]


class PlainBahdanau(nn.Module):
    """RNNsearch in plain PyTorch (see the module docstring); the sizes of RNNSearchConfig."""

    def __init__(
        self, src_vocab: int, tgt_vocab: int, emb: int, enc_hidden: int, dec_hidden: int,
        attn_hidden: int, maxout: int,
    ) -> None:  # fmt: skip
        super().__init__()
        self.src_emb = nn.Embedding(src_vocab, emb, padding_idx=0)
        self.encoder = nn.GRU(emb, enc_hidden, batch_first=True, bidirectional=True)
        self.init = nn.Linear(enc_hidden, dec_hidden)  # W_s
        self.tgt_emb = nn.Embedding(tgt_vocab, emb, padding_idx=0)
        self.w_a = nn.Linear(dec_hidden, attn_hidden, bias=False)
        self.u_a = nn.Linear(2 * enc_hidden, attn_hidden)
        self.v_a = nn.Linear(attn_hidden, 1, bias=False)
        self.cell = nn.GRUCell(emb + 2 * enc_hidden, dec_hidden)
        self.pre = nn.Linear(dec_hidden + emb + 2 * enc_hidden, 2 * maxout)  # U_o, V_o, C_o
        self.out = nn.Linear(maxout, tgt_vocab)  # W_o

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Tensor:
        x = self.src_emb(src)  # (B, S, E)
        packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
        out, h_n = self.encoder(packed)  # h_n (2, B, n)
        h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])  # (B, S, 2n)
        s = torch.tanh(self.init(h_n[1]))  # s_0 from h←_1 (B, m)
        keys = self.u_a(h)  # U_a h_j once per sentence (B, S, A)
        pad = _padding(src_len, src.shape[1])  # (B, S)
        y = self.tgt_emb(tgt_in)  # (B, T, E)
        states, contexts = [], []
        for t in range(tgt_in.shape[1]):
            e = self.v_a(torch.tanh(keys + self.w_a(s)[:, None]))[..., 0]  # (B, S)
            alpha = torch.softmax(e.masked_fill(pad, float("-inf")), -1)  # (B, S)
            c = torch.bmm(alpha[:, None], h)[:, 0]  # (B, 2n)
            s = self.cell(torch.cat([y[:, t], c], -1), s)  # (B, m)
            states.append(s)
            contexts.append(c)
        deep = torch.cat([torch.stack(states, 1), y, torch.stack(contexts, 1)], -1)  # (B, T, ·)
        return self.out(maxout(self.pre(deep)))  # (B, T, V)


class PlainTransformer(nn.Module):
    """torch.nn.Transformer with embeddings and a tied output; TransformerConfig's sizes."""

    def __init__(
        self, src_vocab: int, tgt_vocab: int, dim: int, heads: int, enc_layers: int,
        dec_layers: int, ff: int, dropout: float,
    ) -> None:  # fmt: skip
        super().__init__()
        self.dim = dim
        self.src_emb = nn.Embedding(src_vocab, dim, padding_idx=0)
        self.tgt_emb = nn.Embedding(tgt_vocab, dim, padding_idx=0)
        self.core = nn.Transformer(
            dim, heads, enc_layers, dec_layers, ff, dropout, batch_first=True
        )  # fmt: skip
        self.out_bias = nn.Parameter(torch.zeros(tgt_vocab))
        self.drop = nn.Dropout(dropout)

    def embed(self, emb: nn.Embedding, ids: Tensor) -> Tensor:
        pe = sinusoids(ids.shape[1], self.dim, ids.device)  # (T, D)
        return self.drop(emb(ids) * math.sqrt(self.dim) + pe)  # (B, T, D)

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Tensor:
        pad = _padding(src_len, src.shape[1])  # (B, S)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])  # (T, T)
        h = self.core(
            self.embed(self.src_emb, src),
            self.embed(self.tgt_emb, tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=pad,
            memory_key_padding_mask=pad,
            tgt_is_causal=True,
        )  # (B, T, D) fmt: skip
        return F.linear(h, self.tgt_emb.weight, self.out_bias)  # (B, T, V)


__all__ = ["PlainBahdanau", "PlainTransformer"]
