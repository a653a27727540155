"""Luong, Pham & Manning 2015, "Effective Approaches to Attention-based Neural Machine
Translation": a stacked LSTM (or GRU) encoder and decoder; the top decoder state h_t queries
the encoder states h̄_s *after* the recurrent step.

    h_t = stackedRNN([E y_{t-1}; h̃_{t-1}], h_{t-1})     input feeding (§3.3)
    a_t(s) = align(h_t, h̄_s) = softmax_s(score(h_t, h̄_s))   (eq. 7; dot | general | concat |
                                                                location, eq. 8)
    c_t = Σ_s a_t(s) h̄_s
    h̃_t = tanh(W_c [c_t; h_t])                            (eq. 5)
    p(y_t | y_<t, x) = softmax(W_s h̃_t)                   (eq. 6)

Alignments (§3.1-3.2): global (every source word); local-m (p_t = t, window [p_t-D, p_t+D]);
local-p (p_t = S·sigmoid(v_pᵀ tanh(W_p h_t)), S the real source length, weights in the
window multiplied by exp(-(s-p_t)²/2σ²), σ = D/2). The score, alignment and attention come
from attnkit's registry (build_score / build_alignment, names checked by registry.canonical)
and modules.Attention; a decoding step is a single query, passed with its position t (the
step) so local-m centres its window on p_t = t.

``softness`` (soft | mean | exact | hard | gumbel | variational, models/latent.py) picks the context
that h̃_t reads for the output; input feeding always feeds the soft h̃_t.

Legend: B batch, S source length, L layers, n hidden width, E embedding width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._checks import check_ranges
from ..modules import Attention
from ..registry import build_alignment, build_score, canonical, check_window_for
from .base import Memory, State, source_mask
from .encoders import GRUEncoder
from .latent import (
    LatentSeq2Seq,
    SoftnessFields,
    StepParts,
    add_softness,
    broadcast_feature,
    check_softness,
)
from .registry import MODELS, ModelEntry

# the paper's variants, by attnkit's registry names (an alias of one, e.g. "additive" for
# "concat", is the same variant)
SCORE_NAMES = ("dot", "general", "concat", "location")  # eq. 8
ALIGN_NAMES = ("global", "local-m", "local-p")  # §3.1-3.2


def _check_name(field: str, kind: str, name: str, paper: tuple[str, ...]) -> None:
    """``name`` must be, through the registry, one of the paper's variants."""
    try:
        key: str | None = canonical(kind, name)
    except ValueError:
        key = None
    if key not in {canonical(kind, n) for n in paper}:
        raise ValueError(
            f"LuongConfig.{field}={name!r}; choose one of {paper} (or an attnkit alias of one)"
        )


@dataclass
class LuongConfig(SoftnessFields):
    src_vocab: int
    tgt_vocab: int
    emb: int = 64
    hidden: int = 128  # n: encoder and decoder width (dot needs them equal)
    layers: int = 2
    cell: str = "lstm"  # lstm | gru
    score: str = "general"  # dot | general | concat | location
    align: str = "global"  # global | local-m | local-p
    window: int = 10  # D, half-width of the local window (paper: 10)
    input_feeding: bool = True
    max_src_len: int = 100  # rows of W_a for the location score
    dropout: float = 0.0
    reverse_source: bool = False  # the encoder reads the words right to left (Table 1)

    def __post_init__(self) -> None:
        check_ranges(
            self, positive=("src_vocab", "tgt_vocab", "emb", "hidden", "layers", "max_src_len")
        )
        check_softness(self)
        if self.cell not in ("lstm", "gru"):
            raise ValueError(f"LuongConfig.cell={self.cell!r}; choose 'lstm' or 'gru'")
        _check_name("score", "score", self.score, SCORE_NAMES)
        _check_name("align", "alignment", self.align, ALIGN_NAMES)
        try:
            check_window_for(self.align, self.window)
        except ValueError as e:
            raise ValueError(f"LuongConfig.window={self.window}: {e}") from None
        if not isinstance(self.reverse_source, bool):
            raise ValueError(f"LuongConfig.reverse_source={self.reverse_source!r}; use True/False")
        if not isinstance(self.input_feeding, bool):
            raise ValueError(f"LuongConfig.input_feeding={self.input_feeding!r}; use True/False")
        if self.decoder == "deng" and self.input_feeding:
            raise ValueError(
                "LuongConfig.decoder='deng' (Deng 2018's decoder: no context in the "
                "recurrence) needs input_feeding=False: input feeding sends h̃_t, which holds "
                "the soft context, to the next step (--no-input-feeding)"
            )


# Named presets (vocabulary sizes are filled in from the data).
PRESETS: dict[str, dict[str, float | int | str | bool]] = {
    "tiny": dict(emb=16, hidden=32, layers=1, window=3),
    "small": dict(emb=64, hidden=96, layers=2, window=3),
    "base": dict(emb=128, hidden=256, layers=2, window=5, dropout=0.1),
    # Luong 2015, §4.1: 4 layers, 1000 cells, 1000-d embeddings, dropout 0.2, D = 10
    "paper": dict(emb=1000, hidden=1000, layers=4, window=10, dropout=0.2),
}


def reversed_words(src_len: Tensor, width: int) -> Tensor:
    """The index (B, S) that reverses each row's words and keeps its ``<eos>`` (the last real
    token) and padding in place: s -> ℓ-2-s for s < ℓ-1, else s (ℓ = src_len, eos included).
    It is its own inverse: gathering with it twice gives the row back.

    Sutskever et al. (2014) and Luong et al. (2015, Table 1: "+reverse") feed the source
    reversed; attnkit gathers the encoder states back so that h̄_s stays at x_s's position:
    the attention, local-m's p_t = t and the alignment links index the source in its order."""
    s = torch.arange(width, device=src_len.device)  # (S,)
    last = src_len[:, None] - 1  # (B, 1): the eos position
    return torch.where(s < last, last - 1 - s, s)  # (B, S)


class StackedCell(nn.Module):
    """L stacked LSTM/GRU cells with dropout between layers. State h, c: (B, L, n)."""

    def __init__(self, cell: str, input_dim: int, hidden: int, layers: int, dropout: float):
        super().__init__()
        make = nn.LSTMCell if cell == "lstm" else nn.GRUCell
        self.cells = nn.ModuleList(
            make(input_dim if i == 0 else hidden, hidden) for i in range(layers)
        )
        self.lstm = cell == "lstm"
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        hs, cs = [], []
        for i, cell in enumerate(self.cells):
            if self.lstm:
                h_i, c_i = cell(x, (h[:, i], c[:, i]))  # (B, n) each
            else:
                h_i, c_i = cell(x, h[:, i]), c[:, i]
            hs.append(h_i)
            cs.append(c_i)
            x = self.drop(h_i)
        return torch.stack(hs, 1), torch.stack(cs, 1)  # (B, L, n) each


class Luong(LatentSeq2Seq):
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
        self.decoder = StackedCell(
            c.cell, c.emb + (c.hidden if c.input_feeding else 0), c.hidden, c.layers, c.dropout
        )
        score = build_score(c.score, c.hidden, c.hidden, hidden=c.hidden, max_keys=c.max_src_len)
        normaliser = c.resolved_softness.normaliser  # mean: uniform, else softmax
        self.attention = Attention(score, build_alignment(c.align, c.hidden, c.window), normaliser)
        self.combine = nn.Linear(2 * c.hidden, c.hidden, bias=False)  # W_c
        self.out = nn.Linear(c.hidden, c.tgt_vocab)  # W_s
        self.drop = nn.Dropout(c.dropout)
        add_softness(self, c, c.hidden)

    def encode(self, src: Tensor, src_len: Tensor) -> Memory:
        if src.shape[1] > self.config.max_src_len and self.attention.score.name == "location":
            raise ValueError(
                f"source length {src.shape[1]} > max_src_len={self.config.max_src_len} of the "
                "location score; build the model with a larger max_src_len"
            )
        if self.config.reverse_source:
            order = reversed_words(src_len, src.shape[1])  # (B, S)
            src = src.gather(1, order)  # x_S .. x_1 <eos>
        states, _, final = self.encoder(src, src_len)  # (B, S, n); final: (L, B, n) [x2]
        if self.config.reverse_source:  # h̄_s back at the position of x_s
            states = states.gather(1, order[..., None].expand_as(states))  # (B, S, n)
        h, c = final if isinstance(final, tuple) else (final, torch.zeros_like(final))
        return {
            "keys": states,  # h̄_s (B, S, n)
            "mask": source_mask(src_len, src.shape[1]),  # (B, 1, S)
            "h0": h.transpose(0, 1),  # (B, L, n)
            "c0": c.transpose(0, 1),  # (B, L, n)
        }

    def init_state(self, memory: Memory) -> State:
        h0 = memory["h0"]
        feed = h0.new_zeros(h0.shape[0], self.config.hidden)  # h̃_0 (B, n)
        t = torch.zeros(h0.shape[0], dtype=torch.long, device=h0.device)  # step index (B,)
        return (h0, memory["c0"], feed, t)

    def parts(
        self, prev: Tensor, state: State, memory: Memory, embedded: Tensor | None = None
    ) -> StepParts:
        """One decoder step up to the output layer: h_t, a_t, c_t, the fed h̃_t and the
        output as a function of the context it reads (latent.py chooses which)."""
        h_prev, c_prev, feed, t = state  # (B, L, n), (B, L, n), (B, n), (B,)
        # ``embedded``: E y_{t-1} looked up for all positions at once (latent.unroll)
        y = self.drop(self.tgt_emb(prev) if embedded is None else embedded)  # (B, E)
        x = torch.cat([y, feed], dim=-1) if self.config.input_feeding else y  # (B, E [+ n])
        h, c = self.decoder(x, h_prev, c_prev)  # (B, L, n)
        h_top = h[:, -1]  # h_t (B, n)
        keys, mask = memory["keys"], memory["mask"]  # (B, S, n), (B, 1, S)
        att = self.attention(h_top[:, None], keys, mask=mask, positions=t[:, None])  # (B, 1, n)

        h_tilde = torch.tanh(self.combine(torch.cat([att.context[:, 0], h_top], -1)))  # (B, n)
        assert att.weights is not None
        return StepParts(
            att.weights[:, 0], att.context[:, 0], keys, mask[:, 0], (h_top,), self.readout,
            (h, c, h_tilde, t + 1),
        )  # fmt: skip

    def readout(self, features: tuple[Tensor, ...], ctx: Tensor) -> Tensor:
        """softmax(W_s h̃) with h̃ = tanh(W_c [c; h_t]) (eq. 5-6) of features (h_t,)
        (B, [T,] n) and contexts ctx (B, [T,] [K,] n) -> logits (B, [T,] [K,] V)."""
        h_t = broadcast_feature(features[0], ctx)  # (B, [T,] [K,] n)
        return self.out(self.drop(torch.tanh(self.combine(torch.cat([ctx, h_t], -1)))))


MODELS.register(ModelEntry("luong", Luong, LuongConfig, PRESETS))

__all__ = ["ALIGN_NAMES", "PRESETS", "SCORE_NAMES", "Luong", "LuongConfig", "reversed_words"]
