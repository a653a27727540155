"""RNNencdec (Cho et al. 2014, "Learning Phrase Representations using RNN Encoder-Decoder";
the baseline of Bahdanau 2015): a GRU encoder squeezes the source into one vector c, and a GRU
decoder conditions every step on it. No attention.

    h_t = GRU(E x_t, h_{t-1}),  c = tanh(V h_N)              (eq. 8 of App. A.1)
    h'_0 = tanh(V' c),  h'_t = GRU([E y_{t-1}; c], h'_{t-1})
    p(y_t | ...) = softmax(W_o maxout(O_h h'_t + O_y E y_{t-1} + O_c c))

Legend: B batch, S source length, n encoder width, m decoder width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._checks import check_ranges
from .base import DeepOutput, Memory, Seq2Seq, State
from .encoders import GRUEncoder
from .registry import MODELS, ModelEntry


@dataclass
class RNNEncDecConfig:
    src_vocab: int
    tgt_vocab: int
    emb: int = 64
    enc_hidden: int = 128
    dec_hidden: int = 128
    context: int = 128  # width of the summary vector c
    maxout: int = 128  # 0 = plain linear output
    dropout: float = 0.0

    def __post_init__(self) -> None:
        check_ranges(
            self,
            positive=("src_vocab", "tgt_vocab", "emb", "enc_hidden", "dec_hidden", "context"),
            non_negative=("maxout",),  # 0 disables maxout
        )


PRESETS: dict[str, dict[str, float | int]] = {
    "tiny": dict(emb=16, enc_hidden=24, dec_hidden=24, context=24, maxout=16),
    "small": dict(emb=64, enc_hidden=128, dec_hidden=128, context=128, maxout=96),
    "base": dict(emb=128, enc_hidden=256, dec_hidden=256, context=256, maxout=256),
    # Cho 2014 / Bahdanau 2015 App. A.2: 620-d embeddings, 1000 hidden units, 500 maxout units
    "paper": dict(emb=620, enc_hidden=1000, dec_hidden=1000, context=1000, maxout=500),
}


class RNNEncDec(Seq2Seq):
    name = "rnnencdec"

    def __init__(self, config: RNNEncDecConfig) -> None:
        super().__init__()
        self.config = c = config
        self.encoder = GRUEncoder(
            c.src_vocab, c.emb, c.enc_hidden, bidirectional=False, dropout=c.dropout
        )
        self.summary = nn.Linear(c.enc_hidden, c.context)  # V
        self.init = nn.Linear(c.context, c.dec_hidden)  # V'
        self.tgt_emb = nn.Embedding(c.tgt_vocab, c.emb, padding_idx=0)
        self.cell = nn.GRUCell(c.emb + c.context, c.dec_hidden)
        self.output = DeepOutput(c.dec_hidden, c.emb, c.context, c.maxout, c.tgt_vocab)
        self.drop = nn.Dropout(c.dropout)

    def encode(self, src: Tensor, src_len: Tensor) -> Memory:
        _, (last, _), _ = self.encoder(src, src_len)  # (B, n): state after the last real token
        c = torch.tanh(self.summary(last))  # (B, C)
        return {"c": c, "h0": torch.tanh(self.init(c))}  # (B, C), (B, m)

    def init_state(self, memory: Memory) -> State:
        return (memory["h0"],)

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, None, State]:
        (h_prev,) = state  # (B, m)
        y = self.drop(self.tgt_emb(prev))  # (B, E)
        c = memory["c"]  # (B, C)
        h = self.cell(torch.cat([y, c], dim=-1), h_prev)  # (B, m)
        return self.output(self.drop(h), y, c), None, (h,)


MODELS.register(ModelEntry("rnnencdec", RNNEncDec, RNNEncDecConfig, PRESETS))

__all__ = ["PRESETS", "RNNEncDec", "RNNEncDecConfig"]
