"""Recurrent encoders shared by the RNN models. Legend: B batch, S source length, n width."""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class GRUEncoder(nn.Module):
    """Embeds ids (B, S) and runs a (bi)directional GRU over the real tokens only (packed).

    forward -> (states (B, S, n·dirs), (last forward state (B, n), last backward state (B, n)
    or None)); the backward GRU's last state is h←_1, its state at the first token."""

    def __init__(
        self,
        vocab: int,
        emb: int,
        hidden: int,
        *,
        bidirectional: bool,
        layers: int = 1,
        dropout: float = 0.0,
        cell: str = "gru",
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, emb, padding_idx=0)
        rnn = {"gru": nn.GRU, "lstm": nn.LSTM}[cell]
        self.rnn = rnn(
            emb,
            hidden,
            num_layers=layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if layers > 1 else 0.0,
        )
        self.drop = nn.Dropout(dropout)
        self.bidirectional = bidirectional
        self.layers = layers

    def forward(self, src: Tensor, src_len: Tensor):
        x = self.drop(self.embed(src))  # (B, S, E)
        packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
        out, h = self.rnn(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        h_n = h[0] if isinstance(h, tuple) else h  # (layers·dirs, B, n)
        h_n = h_n.view(self.layers, 2 if self.bidirectional else 1, *h_n.shape[1:])
        last = h_n[-1]  # (dirs, B, n) of the top layer
        return states, (last[0], last[1] if self.bidirectional else None), h


__all__ = ["GRUEncoder"]
