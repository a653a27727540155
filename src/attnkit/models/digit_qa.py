"""A question-answering model over digit canvases with co-attention (Lu et al. 2016) or
stacked attention (Yang et al. 2016).

    patches v = CNN(canvas) + position            (B, N, D)   N = (H/4)·(W/4) image patches
    words   q = BiLSTM(embed(question))           (B, T, D)
    q̂, v̂ = co-attention(q, v, masks)              (B, D) each: "parallel" (eq. 3-4),
                                                   "alternating" (eq. 5-6), or "none": each
                                                   side pooled on its own, by its masked
                                                   mean (pool="mean") or by feature-wise
                                                   attention (pool="multidim", Shen 2018)
    p(answer) = softmax(W_o tanh(W_h [q̂; v̂]))     (B, A)

    "stacked" (Yang, He, Gao, Deng & Smola 2016, §3.3) reads no word states: the question
    vector u⁰ = [h→_T; h←_1] (B, D), the BiLSTM's last states, attends over the patches for
    ``hops`` hops, u^k = Σ_i p^k_i v_i + u^(k-1), and the answer is read from u^K alone:
    p(answer) = softmax(W_o tanh(W_h u^K))        (B, A)   (W_h is (D, D) here, not (D, 2D))

The variants differ only in how the question and the image are pooled; the CNN, the question
encoder and the classifier's form are the same. Legend: B batch, T question words, N patches,
D width, K hops, A answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._checks import check_ranges
from ..mechanisms.coattention import AlternatingCoAttention, CoAttentionResult, ParallelCoAttention
from ..mechanisms.multidim import FeaturewisePool
from ..mechanisms.stacked import StackedAttention, StackedResult
from .encoders import GRUEncoder
from .registry import MODELS, ModelEntry

# Lu 2016's two forms and their pooled baseline: the arms `attnkit experiment structure` compares
COATTENTION = ("parallel", "alternating", "none")
VARIANTS = (*COATTENTION, "stacked")  # every value of DigitQAConfig.coattention
POOLS = ("mean", "multidim")  # how coattention="none" pools each side


@dataclass
class DigitQAConfig:
    src_vocab: int  # question words
    tgt_vocab: int  # answers
    dim: int = 64  # D: patch, word and summary width (even: two LSTM directions of D/2)
    hidden: int = 64  # K: the co-attention's hidden width
    channels: int = 32  # CNN channels
    max_grid: int = 8  # most patches per image side (position embeddings)
    coattention: str = "parallel"  # parallel | alternating | none | stacked
    pool: str = "mean"  # with coattention="none": mean | multidim (feature-wise attention)
    hops: int = 2  # with coattention="stacked": attention hops K (Yang 2016 uses 2)
    dropout: float = 0.0

    def __post_init__(self) -> None:
        check_ranges(self, positive=("src_vocab", "tgt_vocab", "dim", "hidden", "channels",
                                     "max_grid"))  # fmt: skip
        if self.dim % 2:
            raise ValueError(f"DigitQAConfig.dim={self.dim}; it must be even (two LSTM "
                             "directions of dim/2)")  # fmt: skip
        if self.hops < 1:
            raise ValueError(f"DigitQAConfig.hops={self.hops}; stacked attention needs at "
                             "least one hop: pass hops >= 1 (the paper uses 2)")  # fmt: skip
        if self.coattention not in VARIANTS:
            raise ValueError(
                f"DigitQAConfig.coattention={self.coattention!r}; choose one of {VARIANTS}"
            )
        if self.pool not in POOLS:
            raise ValueError(f"DigitQAConfig.pool={self.pool!r}; choose one of {POOLS}")
        if self.pool != "mean" and self.coattention != "none":
            raise ValueError(
                f"DigitQAConfig.pool={self.pool!r} pools the sides of coattention='none'; "
                f"coattention={self.coattention!r} pools them itself"
            )
        if self.hops != 2 and self.coattention != "stacked":
            raise ValueError(
                f"DigitQAConfig.hops={self.hops} counts the hops of coattention='stacked'; "
                f"coattention={self.coattention!r} has none: leave hops at 2"
            )


PRESETS: dict[str, dict[str, float | int | str]] = {
    "tiny": dict(dim=16, hidden=16, channels=8),
    "small": dict(dim=64, hidden=64, channels=32),
    "base": dict(dim=128, hidden=128, channels=64),
}


@dataclass
class QAOutput:
    """logits (B, A); the weights over question words (B, T) and over image patches (B, N)
    (None for "none" with mean pooling; with pool="multidim" the feature-wise weights averaged
    over features; for "stacked" no word weights and the last hop's patch weights), the patch
    grid (rows, cols), the co-attention result, and stacked attention's result (u^K and every
    hop's patch weights (B, K, N))."""

    logits: Tensor
    question_weights: Tensor | None
    image_weights: Tensor | None
    grid: tuple[int, int]
    coattention: CoAttentionResult | None = None
    stacked: StackedResult | None = None


def _masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """x (B, L, D), mask (B, L) -> the mean of the real rows (B, D)."""
    m = mask[..., None].to(x.dtype)  # (B, L, 1)
    return (x * m).sum(1) / m.sum(1).clamp_min(1.0)  # (B, D)


class PatchCNN(nn.Module):
    """Canvas (B, 1, H, W) -> patch features (B, N, D) on a (H/4) × (W/4) grid, each patch
    seeing about 26 pixels around it (its neighbouring digits), plus a learned position."""

    def __init__(self, channels: int, dim: int, max_grid: int) -> None:
        super().__init__()
        c = channels
        self.net = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, dim, 3, padding=1),
        )  # fmt: skip
        self.rows = nn.Embedding(max_grid, dim)
        self.cols = nn.Embedding(max_grid, dim)

    def forward(self, image: Tensor) -> tuple[Tensor, tuple[int, int]]:
        f = self.net(image)  # (B, D, h, w)
        h, w = f.shape[-2:]
        if max(h, w) > self.rows.num_embeddings:
            raise ValueError(f"a {h}x{w} patch grid exceeds max_grid={self.rows.num_embeddings}; "
                             "build the model with a larger max_grid")  # fmt: skip
        r = torch.arange(h, device=f.device)
        c = torch.arange(w, device=f.device)
        pos = self.rows(r)[:, None, :] + self.cols(c)[None, :, :]  # (h, w, D)
        v = f.flatten(2).transpose(1, 2) + pos.flatten(0, 1)  # (B, N, D)
        return torch.tanh(v), (h, w)


class DigitQA(nn.Module):
    """Canvas + question -> answer logits, pooling with the configured co-attention.

    forward(image (B, 1, H, W) float, question (B, T) ids (0 = pad), q_len (B,)) -> QAOutput.
    """

    family = "qa"

    def __init__(self, config: DigitQAConfig) -> None:
        super().__init__()
        self.config = cfg = config
        self.cnn = PatchCNN(cfg.channels, cfg.dim, cfg.max_grid)
        self.words = GRUEncoder(cfg.src_vocab, cfg.dim, cfg.dim // 2, bidirectional=True,
                                dropout=cfg.dropout, cell="lstm")  # fmt: skip
        self.coatt: nn.Module | None = {
            "parallel": lambda: ParallelCoAttention(cfg.dim, cfg.hidden),
            "alternating": lambda: AlternatingCoAttention(cfg.dim, cfg.hidden),
            "none": lambda: None,
            "stacked": lambda: StackedAttention(cfg.dim, cfg.hidden, cfg.hops),
        }[cfg.coattention]()
        multidim = cfg.coattention == "none" and cfg.pool == "multidim"
        self.pools = nn.ModuleList(
            [FeaturewisePool(cfg.dim, cfg.hidden), FeaturewisePool(cfg.dim, cfg.hidden)]
            if multidim
            else []
        )  # question, image
        self.drop = nn.Dropout(cfg.dropout)
        stacked = cfg.coattention == "stacked"  # reads u^K (D) instead of [q̂; v̂] (2D)
        self.hidden = nn.Linear(cfg.dim if stacked else 2 * cfg.dim, cfg.dim)
        self.out = nn.Linear(cfg.dim, cfg.tgt_vocab)

    def forward(self, image: Tensor, question: Tensor, q_len: Tensor) -> QAOutput:
        v, grid = self.cnn(image)  # (B, N, D)
        q, (last_fwd, last_bwd), _ = self.words(question, q_len)  # (B, T, D), (B, D/2) each
        if isinstance(self.coatt, StackedAttention):
            stacked = self.coatt(torch.cat([last_fwd, last_bwd], dim=-1), v)  # u⁰ (B, D)
            h = torch.tanh(self.hidden(self.drop(stacked.query)))  # (B, D)
            logits = self.out(self.drop(h))  # (B, A)
            return QAOutput(logits, None, stacked.weights[:, -1], grid, stacked=stacked)
        q_mask = torch.arange(q.shape[1], device=q.device)[None, :] < q_len.to(q.device)[:, None]
        result = None
        q_w = v_w = None
        if self.pools:  # feature-wise attention on each side: weights (B, T, D), (B, N, D)
            v_mask = torch.ones(v.shape[:2], dtype=torch.bool, device=v.device)  # (B, N)
            pq, pv = self.pools[0](q, q_mask), self.pools[1](v, v_mask)
            q_hat, v_hat = pq.vector, pv.vector  # (B, D) each
            assert pq.weights is not None and pv.weights is not None
            q_w, v_w = pq.weights.mean(-1), pv.weights.mean(-1)  # (B, T), (B, N) for the view
        elif self.coatt is None:
            q_hat, v_hat = _masked_mean(q, q_mask), v.mean(dim=1)  # (B, D) each
        else:
            result = self.coatt(q, v, q_mask, None)
            q_hat, v_hat = result.question, result.image  # (B, D) each
        h = torch.tanh(self.hidden(self.drop(torch.cat([q_hat, v_hat], dim=-1))))  # (B, D)
        logits = self.out(self.drop(h))  # (B, A)
        return QAOutput(
            logits,
            q_w if result is None else result.question_weights,
            v_w if result is None else result.image_weights,
            grid,
            result,
        )


MODELS.register(ModelEntry("digit-qa", DigitQA, DigitQAConfig, PRESETS))

__all__ = ["COATTENTION", "POOLS", "PRESETS", "VARIANTS", "DigitQA", "DigitQAConfig", "QAOutput"]
