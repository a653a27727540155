"""The two image classifiers of the inductive-bias experiment, at equal parameter counts.

    CNN (LeCun et al. 1998; global average pooling as in Lin et al. 2014):
        x -> conv3×3(1→c) ReLU, maxpool 2 -> conv3×3(c→2c) ReLU, maxpool 2
          -> conv3×3(2c→2c) ReLU -> mean over positions -> linear (2c → C).
        Weights are shared across positions (translation equivariance) and each unit sees a
        small neighbourhood (locality): the priors under test.
    attention, ViT-style (Dosovitskiy et al. 2021, eq. 1–4):
        z₀ = [x_cls; x_p¹E; ...; x_pⁿE] + E_pos      (P×P patches, learned E_pos (n+1, D))
        z_l = pre-norm Transformer encoder layer (attnkit's SelfAttention, Vaswani 2017 eq. 1,
              + a ReLU FFN of width 2D)
        y = linear(LayerNorm(z_L⁰))                    (the class token's output)
        No locality beyond the patch: any patch may attend any other from the first layer,
        and where a patch is comes only from E_pos, learned from data.

``cnn_width`` picks the CNN's channel count c whose parameter count comes closest to the
attention model's (``attnkit.models.sequence_classifiers.closest_width``), per task (the
attention model's count
depends on the number of patches through E_pos).

Legend: B batch, S image side, P patch side, n patches, D model width, H heads, L layers,
C classes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...models.sequence_classifiers import closest_width, parameters
from ...models.transformer import EncoderLayer, TransformerConfig
from .data import CLASSES, patchify

MODELS = ("cnn", "attention")


class SmallCNN(nn.Module):
    """images (B, S, S) -> logits (B, C); three 3×3 convolutions of c, 2c, 2c channels."""

    def __init__(self, channels: int, classes: int = CLASSES) -> None:
        super().__init__()
        if channels < 1:
            raise ValueError(f"channels={channels}; it must be at least 1")
        c = channels
        self.conv1 = nn.Conv2d(1, c, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(c, 2 * c, 3, padding=1, bias=False)
        self.conv3 = nn.Conv2d(2 * c, 2 * c, 3, padding=1, bias=False)
        self.head = nn.Linear(2 * c, classes)

    def forward(self, x: Tensor) -> Tensor:
        h = F.max_pool2d(F.relu(self.conv1(x[:, None])), 2)  # (B, c, S/2, S/2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)  # (B, 2c, S/4, S/4)
        h = F.relu(self.conv3(h))  # (B, 2c, S/4, S/4)
        return self.head(h.mean(dim=(-2, -1)))  # global average pooling: (B, 2c) -> (B, C)


class PatchAttention(nn.Module):
    """ViT-style classifier over P×P patches of an S×S image (see module doc):
    images (B, S, S) -> logits (B, C)."""

    mask: Tensor  # (1, 1, n+1) all True: every token may attend every token

    def __init__(
        self, side: int, patch: int, dim: int, heads: int, layers: int, classes: int = CLASSES
    ) -> None:
        super().__init__()
        if patch < 1 or side % patch:
            raise ValueError(f"patch={patch} must divide the image side {side}")
        self.patch = patch
        self.grid = side // patch
        n = self.grid**2
        c = TransformerConfig(
            1,
            1,
            dim=dim,
            heads=heads,
            enc_layers=layers,
            dec_layers=1,
            ff=2 * dim,
            dropout=0.0,
            norm="pre",
        )
        self.embed = nn.Linear(patch * patch, dim)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)
        self.register_buffer("mask", torch.ones(1, 1, n + 1, dtype=torch.bool), persistent=False)

    def encode(self, x: Tensor, need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        """images (B, S, S) -> final tokens (B, n+1, D) and, when asked, each layer's
        attention weights (B, H, n+1, n+1)."""
        p = self.embed(patchify(x, self.patch))  # (B, n, D)
        z = torch.cat([self.cls.expand(len(x), -1, -1), p], dim=1) + self.pos  # (B, n+1, D)
        weights = []
        for layer in self.layers:
            z, w = layer(z, self.mask, need_weights=need_weights)  # (B, n+1, D)
            if w is not None:
                weights.append(w)
        return self.norm(z), weights

    def forward(self, x: Tensor) -> Tensor:
        z, _ = self.encode(x)
        return self.head(z[:, 0])  # (B, D) -> (B, C)

    @torch.no_grad()
    def class_attention(self, x: Tensor) -> Tensor:
        """Where the class token looks in the last layer: its attention weights to the n
        patches, averaged over heads, renormalised to sum to one over the patches, on the
        patch grid: images (B, S, S) -> (B, S/P, S/P)."""
        was = self.training
        self.eval()
        _, weights = self.encode(x, need_weights=True)
        self.train(was)
        w = weights[-1].mean(dim=1)[:, 0, 1:]  # (B, H, n+1, n+1) -> (B, n)
        w = w / w.sum(dim=-1, keepdim=True)  # (B, n)
        return w.reshape(len(x), self.grid, self.grid)  # (B, S/P, S/P)


def mass_on_cell(maps: Tensor, cells: Tensor, per_side: int) -> Tensor:
    """The share of each map that falls on its digit's canvas cell: maps (B, g, g) over a
    patch grid (summing to one), ``cells`` (B,) = r·per_side + c, the grid cut into
    per_side × per_side cells of g / per_side patches a side -> (B,)."""
    g = maps.shape[-1]
    if g % per_side:
        raise ValueError(f"a {g}x{g} patch grid does not cut into {per_side}x{per_side} cells")
    k = g // per_side
    by_cell = maps.reshape(len(maps), per_side, k, per_side, k).sum(dim=(2, 4))  # (B, n, n)
    return by_cell.reshape(len(maps), -1).gather(1, cells[:, None])[:, 0]  # (B,)


def cnn_width(budget: int) -> int:
    """The CNN channel count c whose parameter count is closest to ``budget``."""
    return closest_width(lambda c: parameters(SmallCNN(c)), budget)


def build(name: str, side: int, patch: int, dim: int, heads: int, layers: int) -> nn.Module:
    """One of MODELS for ``side``×``side`` images; the CNN sized to the attention model's
    parameter count. The count is taken on a throwaway model, then torch's random state is
    restored, so the returned model's weights depend only on the state at the call."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {MODELS}")
    if name == "attention":
        return PatchAttention(side, patch, dim, heads, layers)
    state = torch.random.get_rng_state()
    width = cnn_width(parameters(PatchAttention(side, patch, dim, heads, layers)))
    torch.random.set_rng_state(state)
    return SmallCNN(width)


__all__ = [
    "MODELS",
    "PatchAttention",
    "SmallCNN",
    "build",
    "cnn_width",
    "mass_on_cell",
    "parameters",
]
