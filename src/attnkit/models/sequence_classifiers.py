"""Four sequence classifiers that read tokens left to right and classify from the LAST
position: an LSTM, a GRU, a causal dilated CNN and a small causal self-attention model.
They share one frame (``SequenceClassifier``): token embedding e = E[x] -> body -> the last
position's features -> a linear layer to class logits, so that the gradient of the loss with
respect to the input embedding at any position, ∂ℓ/∂e_{t−Δ}, is measured the same way for all.

    LSTM (Hochreiter & Schmidhuber 1997), GRU (Cho et al. 2014): h_t = cell(h_{t−1}, e_t);
        path from e_{t−Δ} to the readout: Δ recurrent steps.
    CNN (causal dilated convolutions, van den Oord et al. 2016; Bai et al. 2018):
        kernel 2, dilations 1, 2, 4, ..., 2^{L−1} with L = ⌈log₂ T⌉, so the last position
        sees all T inputs; a residual ReLU block per layer; path: ≤ L layers.
    attention (Vaswani et al. 2017): x₀ = e + PE (sinusoids, §3.5), pre-norm layers of
        causal multi-head self-attention (attnkit's SelfAttention, eq. 1) and a ReLU FFN;
        path from any position to the readout: one attention step.

Widths are chosen to give the same parameter budget: ``budget_widths`` keeps the attention
model as given and picks the LSTM / GRU hidden size and the CNN channel count whose
parameter counts come closest to it.

Legend: B batch, T sequence length, E embedding width, H hidden / channel width, C classes,
V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..masks import causal_mask
from .transformer import EncoderLayer, TransformerConfig, sinusoids

MODELS = ("lstm", "gru", "cnn", "attention")


@dataclass(frozen=True)
class Sizes:
    """What every model shares: vocabulary V, classes C, embedding width E, length T."""

    vocab: int
    classes: int
    emb: int
    length: int

    def __post_init__(self) -> None:
        for name in ("vocab", "classes", "emb", "length"):
            if getattr(self, name) < 1:
                raise ValueError(f"Sizes.{name}={getattr(self, name)}; it must be at least 1")


class SequenceClassifier(nn.Module):
    """tokens (B, T) -> logits (B, C) from the last position. Subclasses define ``features``:
    embeddings (B, T, E) -> features at the last position (B, H)."""

    def __init__(self, sizes: Sizes, width: int) -> None:
        super().__init__()
        self.sizes = sizes
        self.embed = nn.Embedding(sizes.vocab, sizes.emb)
        self.head = nn.Linear(width, sizes.classes)

    def features(self, e: Tensor) -> Tensor:
        """embeddings (B, T, E) -> the last position's features (B, H)."""
        raise NotImplementedError

    def readout(self, e: Tensor) -> Tensor:
        """embeddings (B, T, E) -> logits (B, C); the gradient probe differentiates this."""
        return self.head(self.features(e))  # (B, C)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.readout(self.embed(tokens))  # (B, T) -> (B, T, E) -> (B, C)


class RecurrentClassifier(SequenceClassifier):
    """nn.LSTM or nn.GRU, one layer; the features are the last hidden state h_T."""

    def __init__(self, sizes: Sizes, hidden: int, cell: str) -> None:
        super().__init__(sizes, hidden)
        if cell not in ("lstm", "gru"):
            raise ValueError(f"cell={cell!r}; choose 'lstm' or 'gru'")
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(sizes.emb, hidden, batch_first=True)

    def features(self, e: Tensor) -> Tensor:
        out, _ = self.rnn(e)  # (B, T, H)
        return out[:, -1]  # (B, H)


class CausalConvClassifier(SequenceClassifier):
    """Causal dilated CNN: conv_0 (E -> H), then x ← x + ReLU(conv_l(x)), dilation 2^l."""

    def __init__(self, sizes: Sizes, channels: int) -> None:
        super().__init__(sizes, channels)
        self.layers = conv_layers(sizes.length)
        self.convs = nn.ModuleList(
            nn.Conv1d(sizes.emb if i == 0 else channels, channels, 2, dilation=2**i)
            for i in range(self.layers)
        )

    def features(self, e: Tensor) -> Tensor:
        x = e.transpose(1, 2)  # (B, E, T)
        for i, conv in enumerate(self.convs):
            y = F.relu(conv(F.pad(x, (2**i, 0))))  # left padding keeps it causal: (B, H, T)
            x = y if i == 0 else x + y  # (B, H, T)
        return x[:, :, -1]  # (B, H)


def conv_layers(length: int) -> int:
    """Layers L of kernel-2 convolutions with dilations 1..2^{L−1} whose receptive field
    2^L covers ``length`` positions: L = ⌈log₂ T⌉ (at least 1)."""
    return max(1, math.ceil(math.log2(length)))


class AttentionClassifier(SequenceClassifier):
    """x₀ = e + PE; pre-norm causal self-attention layers (attnkit EncoderLayer with a causal
    mask); a final LayerNorm; the features are x_L at the last position."""

    pe: Tensor  # (T, E) sinusoids
    mask: Tensor  # (T, T) causal, True = may attend

    def __init__(self, sizes: Sizes, heads: int, layers: int) -> None:
        super().__init__(sizes, sizes.emb)
        c = TransformerConfig(
            sizes.vocab, sizes.classes, dim=sizes.emb, heads=heads, enc_layers=layers,
            dec_layers=1, ff=2 * sizes.emb, dropout=0.0, norm="pre",
        )  # fmt: skip
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(layers))
        self.norm = nn.LayerNorm(sizes.emb)
        self.register_buffer("pe", sinusoids(sizes.length, sizes.emb), persistent=False)
        self.register_buffer("mask", causal_mask(sizes.length), persistent=False)

    def features(self, e: Tensor) -> Tensor:
        t = e.shape[1]
        x = e + self.pe[:t]  # (B, T, E)
        for layer in self.layers:
            x, _ = layer(x, self.mask[:t, :t])  # (B, T, E)
        return self.norm(x[:, -1])  # (B, E)


def parameters(model: nn.Module) -> int:
    """The number of trainable and frozen parameters of ``model``: the budget held equal."""
    return sum(p.numel() for p in model.parameters())


def build(name: str, sizes: Sizes, width: int, heads: int = 2, layers: int = 2) -> nn.Module:
    """One of MODELS at ``width`` (hidden size, channels; the attention model's width is E)."""
    if name in ("lstm", "gru"):
        return RecurrentClassifier(sizes, width, name)
    if name == "cnn":
        return CausalConvClassifier(sizes, width)
    if name == "attention":
        return AttentionClassifier(sizes, heads, layers)
    raise ValueError(f"unknown model {name!r}; choose one of {MODELS}")


def closest_width(count: Callable[[int], int], budget: int) -> int:
    """The width w >= 1 whose parameter count ``count(w)`` is closest to ``budget`` (counts
    grow with w: double w until it passes the budget, binary-search the crossing, then take
    the nearer neighbour; only widths up to twice the answer are ever built)."""
    hi = 1
    while count(hi) < budget:
        hi *= 2
    lo = max(1, hi // 2)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if count(mid) < budget else (lo, mid)
    return min((w for w in (lo - 1, lo) if w >= 1), key=lambda w: abs(count(w) - budget))


def _count(name: str, sizes: Sizes, width: int) -> int:
    return parameters(build(name, sizes, width))


def budget_widths(sizes: Sizes, heads: int, layers: int) -> dict[str, int]:
    """Widths giving every model the attention model's parameter count (as near as an
    integer width allows): {"attention": E, "lstm": H, "gru": H, "cnn": channels}."""
    budget = parameters(build("attention", sizes, sizes.emb, heads, layers))
    widths = {"attention": sizes.emb}
    for name in ("lstm", "gru", "cnn"):
        widths[name] = closest_width(partial(_count, name, sizes), budget)
    return widths


def input_gradient_norms(model: SequenceClassifier, tokens: Tensor, labels: Tensor,
                         positions: Tensor) -> Tensor:  # fmt: skip
    """‖∂ℓ_b / ∂e_{b, p_b}‖₂ for each example b: the gradient of its cross-entropy loss
    ℓ_b = −log softmax(f(e_b))_{y_b} with respect to its input embedding at position p_b.
    tokens (B, T), labels (B,), positions (B,) -> (B,). The examples do not interact (no
    batch statistics), so one backward pass of Σ_b ℓ_b gives every per-example gradient."""
    was = model.training
    model.eval()
    e = model.embed(tokens).detach().requires_grad_(True)  # (B, T, E)
    loss = F.cross_entropy(model.readout(e), labels, reduction="sum")
    (grad,) = torch.autograd.grad(loss, e)  # (B, T, E)
    model.train(was)
    return grad[torch.arange(len(tokens)), positions].norm(dim=-1)  # (B,)


__all__ = [
    "MODELS",
    "AttentionClassifier",
    "CausalConvClassifier",
    "RecurrentClassifier",
    "SequenceClassifier",
    "Sizes",
    "budget_widths",
    "build",
    "closest_width",
    "conv_layers",
    "input_gradient_norms",
    "parameters",
]
