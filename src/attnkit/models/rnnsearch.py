"""RNNsearch (Bahdanau, Cho & Bengio 2015, "Neural Machine Translation by Jointly Learning to
Align and Translate"): a bidirectional GRU encoder and a GRU decoder that attends over the
annotations with the additive score, queried by the previous decoder state.

    h_j = [h→_j ; h←_j]                                  annotations (B, S, 2n)
    e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)               (eq. 6; attnkit.AdditiveScore)
    α_ij = softmax_j(e_ij),  c_i = Σ_j α_ij h_j           (eq. 5-6; attnkit.mechanisms.stepwise)
    s_i = GRU([E y_{i-1}; c_i], s_{i-1}),  s_0 = tanh(W_s h←_1)
    p(y_i | ...) = softmax(W_o maxout(U_o s_i + V_o E y_{i-1} + C_o c_i))  (App. A.2.2)

The paper's appendix feeds s_{i-1} to the deep output while eq. 4 writes g(y_{i-1}, s_i, c_i);
this follows eq. 4. ``softness`` (soft | mean | exact | hard | gumbel | variational,
models/latent.py) picks the context the deep output reads; the GRU is always fed the soft c_i.
Legend: B batch, S source length, n encoder width, m decoder width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor, nn

from .._checks import check_ranges
from ..mechanisms.stepwise import attend_step
from ..modules import Attention
from ..stages.scores import AdditiveScore
from .base import DeepOutput, Memory, State, dropped, source_mask
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


@dataclass
class RNNSearchConfig(SoftnessFields):
    src_vocab: int
    tgt_vocab: int
    emb: int = 64
    enc_hidden: int = 128  # n, per direction
    dec_hidden: int = 128  # m
    attn_hidden: int = 128  # width of the additive score's tanh layer
    maxout: int = 128  # deep-output width; 0 = plain linear output
    dropout: float = 0.0

    def __post_init__(self) -> None:
        check_ranges(
            self,
            positive=("src_vocab", "tgt_vocab", "emb", "enc_hidden", "dec_hidden", "attn_hidden"),
            non_negative=("maxout",),  # 0 disables maxout
        )
        check_softness(self)


# Named presets (vocabulary sizes are filled in from the data).
PRESETS: dict[str, dict[str, float | int]] = {
    "tiny": dict(emb=16, enc_hidden=24, dec_hidden=24, attn_hidden=24, maxout=16),
    "small": dict(emb=64, enc_hidden=96, dec_hidden=96, attn_hidden=96, maxout=96),
    "base": dict(emb=128, enc_hidden=256, dec_hidden=256, attn_hidden=256, maxout=256),
    # Bahdanau 2015, App. A.2: 620-d embeddings, 1000 hidden units, 500 maxout units
    "paper": dict(emb=620, enc_hidden=1000, dec_hidden=1000, attn_hidden=1000, maxout=500),
}


class RNNSearch(LatentSeq2Seq):
    name = "rnnsearch"

    def __init__(self, config: RNNSearchConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.encoder = GRUEncoder(
            c.src_vocab, c.emb, c.enc_hidden, bidirectional=True, dropout=c.dropout
        )
        self.init = nn.Linear(c.enc_hidden, c.dec_hidden)  # W_s
        self.tgt_emb = nn.Embedding(c.tgt_vocab, c.emb, padding_idx=0)
        self.attention = Attention(
            AdditiveScore(c.dec_hidden, 2 * c.enc_hidden, c.attn_hidden),
            normaliser=c.resolved_softness.normaliser,  # mean: uniform, else softmax
        )
        fed = 0 if c.decoder == "deng" else 2 * c.enc_hidden  # Deng 2018: no context fed
        self.cell = nn.GRUCell(c.emb + fed, c.dec_hidden)
        self.output = DeepOutput(c.dec_hidden, c.emb, 2 * c.enc_hidden, c.maxout, c.tgt_vocab)
        self.drop = nn.Dropout(c.dropout)
        add_softness(self, c, 2 * c.enc_hidden)

    def encode(self, src: Tensor, src_len: Tensor) -> Memory:
        states, (_, backward_first), _ = self.encoder(src, src_len)  # (B, S, 2n), (B, n)
        score = cast(AdditiveScore, self.attention.score)
        mask = source_mask(src_len, src.shape[1])  # (B, 1, S)
        return {
            "keys": states,
            "projected": score.project_keys(states),  # U_a h_j, once per sentence (B, S, A)
            "mask": mask,
            "padding": ~mask[:, 0],  # (B, S) True = padding, inverted once per sentence
            "s0": torch.tanh(self.init(backward_first)),  # (B, m)
        }

    def init_state(self, memory: Memory) -> State:
        return (memory["s0"],)

    def parts(
        self, prev: Tensor, state: State, memory: Memory, embedded: Tensor | None = None
    ) -> StepParts:
        """One decoder step up to the output layer: α_i, c_i, s_i and the deep output as a
        function of the context it reads (latent.py chooses which)."""
        (s_prev,) = state  # (B, m)
        # ``embedded``: E y_{t-1} looked up for all positions at once (latent.unroll)
        y = dropped(self.drop, self.tgt_emb(prev) if embedded is None else embedded)  # (B, E)
        feed = self.config.decoder != "deng"
        query = s_prev if feed else self.cell(y, s_prev)  # Deng 2018: s_t from y alone (B, m)
        score = cast(AdditiveScore, self.attention.score)
        mask = memory["mask"][:, 0]  # (B, S)
        att = attend_step(  # keys U_a h_j precomputed in encode(), values the annotations h_j
            query,  # (B, m): one query per sentence
            memory["projected"],  # (B, S, A)
            memory["keys"],  # (B, S, 2n)
            score=score.step_on_projected_keys,
            normaliser=self.attention.normaliser,
            mask=mask,
            every_row=True,  # the packed encoder refuses an empty source: each row has a key
            masked_out=memory["padding"],  # ~mask, (B, S)
        )
        c = att.context  # (B, 2n)
        s = self.cell(torch.cat([y, c], dim=-1), s_prev) if feed else query  # (B, m)
        assert att.weights is not None
        features = (dropped(self.drop, s), y)  # what the deep output reads besides the context
        return StepParts(att.weights, c, memory["keys"], mask, features, self.readout, (s,))

    def readout(self, features: tuple[Tensor, ...], ctx: Tensor) -> Tensor:
        """The deep output g(y_{i-1}, s_i, c) (eq. 4, App. A.2.2) of features (s_i, E y_{i-1}),
        (B, [T,] m) and (B, [T,] E), and contexts ctx (B, [T,] [K,] 2n) -> logits
        (B, [T,] [K,] V); K contexts per position when hard/variational read every h_j."""
        s, y = (broadcast_feature(f, ctx) for f in features)  # (B, [T,] [K,] ·)
        return self.output(s, y, ctx)


MODELS.register(ModelEntry("rnnsearch", RNNSearch, RNNSearchConfig, PRESETS))

__all__ = ["PRESETS", "RNNSearch", "RNNSearchConfig"]
