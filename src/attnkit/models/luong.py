"""Luong, Pham & Manning 2015, "Effective Approaches to Attention-based Neural Machine
Translation": stacked LSTM (or GRU) encoder and decoder; the decoder's top state h_t queries
the source, then an attentional hidden state feeds the output and (input feeding) the next step.

    a_t = align(h_t, h̄_s)        global | local-m | local-p   (§3.1-3.2; attnkit alignments)
    score(h_t, h̄_s)              dot | general | concat | location  (eq. 8; attnkit scores)
    c_t = Σ_s a_t(s) h̄_s
    h̃_t = tanh(W_c [c_t; h_t])                                  (eq. 5)
    p(y_t | y_<t, x) = softmax(W_s h̃_t)                         (eq. 6)
    input feeding (§3.3): the decoder input at t+1 is [E y_t; h̃_t]

Local-m puts the window centre at p_t = t (the decoder step), so each step attends row t of
attnkit's band mask. Legend: B batch, S source length, L layers, n width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..alignment import GlobalAlignment
from ..masks import and_masks, band_mask
from ..modules import Attention
from ..registry import build_alignment, build_score
from .base import Memory, Seq2Seq, State, source_mask
from .encoders import GRUEncoder

SCORES = ("dot", "general", "concat", "location")
ALIGNS = ("global", "local-m", "local-p")


@dataclass
class LuongConfig:
    src_vocab: int
    tgt_vocab: int
    emb: int = 64
    hidden: int = 128
    layers: int = 2
    cell: str = "lstm"  # lstm (the paper) | gru
    score: str = "general"
    align: str = "global"
    window: int = 10  # D of local attention (the paper: 10)
    input_feeding: bool = True
    max_src_len: int = 128  # the location score has one weight row per source position
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("src_vocab", "tgt_vocab", "emb", "hidden", "layers", "max_src_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"LuongConfig.{name}={getattr(self, name)}; it must be >= 1")
        if self.cell not in ("lstm", "gru"):
            raise ValueError(f"LuongConfig.cell={self.cell!r}; choose lstm or gru")
        if self.score not in SCORES:
            raise ValueError(f"LuongConfig.score={self.score!r}; choose one of {SCORES}")
        if self.align not in ALIGNS:
            raise ValueError(f"LuongConfig.align={self.align!r}; choose one of {ALIGNS}")
        if self.align != "global" and self.window < 1:
            raise ValueError(f"LuongConfig.window={self.window}; local attention needs >= 1")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LuongConfig.dropout={self.dropout}; it must be in [0, 1)")


PRESETS: dict[str, dict[str, float | int | str | bool]] = {
    "tiny": dict(emb=16, hidden=24, layers=1),
    "small": dict(emb=64, hidden=128, layers=2),
    "base": dict(emb=256, hidden=256, layers=2),
    # Luong 2015, §4.1: 4 layers of 1000 LSTM cells, 1000-d embeddings, dropout 0.2, D = 10
    "paper": dict(emb=1000, hidden=1000, layers=4, dropout=0.2, window=10),
}


class Luong(Seq2Seq):
    name = "luong"

    def __init__(self, config: LuongConfig) -> None:
        super().__init__()
        self.config = c = config
        self.encoder = GRUEncoder(
            c.src_vocab,
            c.emb,
            c.hidden,
            bidirectional=False,
            layers=c.layers,
            dropout=c.dropout,
            cell=c.cell,
        )
        self.tgt_emb = nn.Embedding(c.tgt_vocab, c.emb, padding_idx=0)
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[c.cell]
        in_dim = c.emb + (c.hidden if c.input_feeding else 0)
        self.decoder = rnn(
            in_dim,
            c.hidden,
            num_layers=c.layers,
            batch_first=True,
            dropout=c.dropout if c.layers > 1 else 0.0,
        )
        score = build_score(c.score, c.hidden, c.hidden, hidden=c.hidden, max_keys=c.max_src_len)
        # local-m is applied per step below (p_t = t); the others are attnkit alignments
        align = (
            GlobalAlignment()
            if c.align == "local-m"
            else build_alignment(c.align, c.hidden, c.window)
        )
        self.attention = Attention(score, align)
        self.combine = nn.Linear(2 * c.hidden, c.hidden, bias=False)  # W_c
        self.out = nn.Linear(c.hidden, c.tgt_vocab)  # W_s
        self.drop = nn.Dropout(c.dropout)

    def encode(self, src: Tensor, src_len: Tensor) -> Memory:
        if src.shape[1] > self.config.max_src_len and self.config.score == "location":
            raise ValueError(
                f"source of {src.shape[1]} tokens exceeds max_src_len="
                f"{self.config.max_src_len} of the location score"
            )
        states, _, h = self.encoder(src, src_len)  # (B, S, n); final (L, B, n) [, cell]
        mem = {"keys": states, "mask": source_mask(src_len, src.shape[1])}  # (B, 1, S)
        if isinstance(h, tuple):
            mem["h0"], mem["c0"] = h[0].transpose(0, 1), h[1].transpose(0, 1)  # (B, L, n)
        else:
            mem["h0"] = h.transpose(0, 1)  # (B, L, n)
        return mem

    def init_state(self, memory: Memory) -> State:
        h0 = memory["h0"]
        b = h0.shape[0]
        feed = h0.new_zeros(b, self.config.hidden)  # h̃_0 = 0
        step = torch.zeros(b, dtype=torch.long, device=h0.device)
        if "c0" in memory:
            return (h0, memory["c0"], feed, step)
        return (h0, feed, step)

    def step(self, prev: Tensor, state: State, memory: Memory) -> tuple[Tensor, Tensor, State]:
        lstm = len(state) == 4
        h, feed, t = (state[0], state[2], state[3]) if lstm else (state[0], state[1], state[2])
        y = self.drop(self.tgt_emb(prev))  # (B, E)
        x = torch.cat([y, feed], -1) if self.config.input_feeding else y  # (B, E [+ n])
        hx = (
            (h.transpose(0, 1).contiguous(), state[1].transpose(0, 1).contiguous())
            if lstm
            else h.transpose(0, 1).contiguous()
        )  # (L, B, n)
        out, new = self.decoder(x[:, None], hx)  # (B, 1, n)
        mask = memory["mask"]  # (B, 1, S)
        if self.config.align == "local-m":
            pos = int(t[0])  # every row of a batch is at the same step
            window = band_mask(pos + 1, mask.shape[-1], self.config.window, device=mask.device)
            mask = and_masks(mask, window[pos:])  # type: ignore[assignment]  # (B, 1, S)
        att = self.attention(out, memory["keys"], mask=mask)
        h_t, c_t = out[:, 0], att.context[:, 0]  # (B, n), (B, n)
        h_tilde = torch.tanh(self.combine(torch.cat([c_t, h_t], -1)))  # (B, n)
        logits = self.out(self.drop(h_tilde))  # (B, V)
        if lstm:
            new_state: State = (new[0].transpose(0, 1), new[1].transpose(0, 1), h_tilde, t + 1)
        else:
            new_state = (new.transpose(0, 1), h_tilde, t + 1)
        assert att.weights is not None
        return logits, att.weights[:, 0], new_state


__all__ = ["PRESETS", "Luong", "LuongConfig"]
