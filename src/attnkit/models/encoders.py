"""Recurrent encoders shared by the RNN models. Legend: B batch, S source length, n width."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

RNNState = Tensor | tuple[Tensor, Tensor]  # h (L·dirs, B, n), or an LSTM's (h, c)


def run_packed(rnn: nn.RNNBase, x: Tensor, lengths: Tensor, total: int) -> tuple[Tensor, RNNState]:
    """A batch-first ``rnn`` over the real positions of x (B, S, E), lengths (B,) -> outputs
    (B, total, n·dirs), zero after each length, and the final state, in the batch's order.

    What ``pack_padded_sequence(enforce_sorted=False)`` and ``pad_packed_sequence`` compute,
    with the permutation kept on the device: the lengths are read once (``lengths.cpu()``,
    which the packed RNN needs), sorted there, and the order sent to the device without
    waiting for it. Unsorted packing would copy its sorting indices to the device and its
    unsorting indices back: two more waits for the GPU per batch (tests/test_cuda_syncs.py)."""
    on_host = lengths.cpu()  # (B,) the one read of the device: the packed RNN's batch sizes
    order_host = torch.argsort(on_host, descending=True, stable=True)  # (B,) longest first
    order = order_host.to(x.device, non_blocking=True)  # (B,)
    back = torch.argsort(order)  # (B,) the inverse permutation, on the device
    packed = pack_padded_sequence(x.index_select(0, order), on_host[order_host], batch_first=True)
    out, h = rnn(packed)  # sorted: no indices to permute
    states = pad_packed_sequence(out, batch_first=True, total_length=total)[0]  # (B, total, ·)
    if isinstance(h, tuple):  # an LSTM's (h, c), (L·dirs, B, n) each
        return states.index_select(0, back), (h[0][:, back], h[1][:, back])
    return states.index_select(0, back), h.index_select(1, back)  # h (L·dirs, B, n)


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
        states, h = run_packed(self.rnn, x, src_len, src.shape[1])  # (B, S, n·dirs)
        h_n = h[0] if isinstance(h, tuple) else h  # (layers·dirs, B, n)
        h_n = h_n.view(self.layers, 2 if self.bidirectional else 1, *h_n.shape[1:])
        last = h_n[-1]  # (dirs, B, n) of the top layer
        return states, (last[0], last[1] if self.bidirectional else None), h


__all__ = ["GRUEncoder", "run_packed"]
