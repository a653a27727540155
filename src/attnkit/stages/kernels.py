"""Attention through a feature map: the score is a kernel, sim(q, k) = φ(q)ᵀφ(k) >= 0, and the
normaliser divides by the row sum instead of taking a softmax (Katharopoulos et al. 2020, eq. 2-4):

    V'_i = Σ_j φ(Q_i)ᵀφ(K_j) V_j / Σ_j φ(Q_i)ᵀφ(K_j)
         = φ(Q_i)ᵀ (Σ_j φ(K_j) V_jᵀ) / φ(Q_i)ᵀ (Σ_j φ(K_j))          (reassociated)

The second line costs O(n·M·Dv) instead of O(n²): ``attnkit.linear`` holds those kernels, and
``attend`` takes them when the score declares ``feature_map`` and the normaliser
``kernel_ratio`` (``attnkit.stages.capabilities``). Used as ordinary stages on the dense path,
the same score and normaliser give the weights the reassociated form implies,
a_ij = φ(q_i)ᵀφ(k_j) / Σ_j φ(q_i)ᵀφ(k_j) (O(n²): ``need_weights=True``).

Feature maps, ``φ(x, query) -> (..., T, M)``, non-negative:
    ``elu_features``   φ(x) = elu(x) + 1, M = D (Katharopoulos et al. 2020, eq. 7);
    ``FavorFeatures``  positive orthogonal random features (Choromanski et al. 2021, FAVOR+),
                       φ(q)ᵀφ(k) an unbiased estimate of exp(qᵀk / √D), M = ``features``.
``query`` says whether x are queries: a map may scale each query's features by a positive
factor of its own (FAVOR+ does, against overflow), which the ratio cancels.

Legend: B batch, H heads, Tq queries, Tk keys, D head width, M features, Dv value width.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._checks import check_mask
from .scores import Score

FeatureMap = Callable[[Tensor, bool], Tensor]
"""A feature map: ``φ(x (..., T, D), query) -> (..., T, M)``, non-negative."""

# --------------------------------------------------------------------------------------------
# Pure functions
# --------------------------------------------------------------------------------------------


def elu_features(x: Tensor, query: bool = False) -> Tensor:
    """Katharopoulos et al. 2020, eq. 7: φ(x) = elu(x) + 1, positive, M = D.
    x (..., T, D) -> (..., T, D); ``query`` unused (the map is the same for both). Written
    as x + 1 (x > 0), exp(x) (x <= 0) rather than ``F.elu``, whose backward on a transposed
    view fails under torch.compile's AOT graphs (torch 2.13)."""
    return torch.where(x > 0, x + 1, torch.exp(x.clamp_max(0)))  # (..., T, D)


def orthogonal_gaussian(features: int, dim: int, generator: torch.Generator | None = None,
                        dtype: torch.dtype = torch.float32) -> Tensor:  # fmt: skip
    """Choromanski et al. 2021, §2.4 (orthogonal random features): ω_1 .. ω_M, each marginally
    N(0, I_D), exactly orthogonal within blocks of D: a block is Q of the QR of a Gaussian
    (D, D) matrix, its rows rescaled by the norms of independent N(0, I_D) vectors (so that
    their lengths follow the χ_D law of a Gaussian vector's). -> (M, D)."""
    blocks = []
    for _ in range(math.ceil(features / dim)):
        g = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
        q, r = torch.linalg.qr(g)  # (D, D): orthonormal columns
        q = q * torch.sign(torch.diagonal(r))  # the Haar-distributed Q (signs fixed by R)
        blocks.append(q.T)  # orthonormal rows (D, D)
    omega = torch.cat(blocks)[:features]  # (M, D)
    norms = torch.randn(features, dim, generator=generator, dtype=torch.float64).norm(dim=-1)
    return (omega * norms[:, None]).to(dtype)  # (M, D)


def favor_features(x: Tensor, omega: Tensor, query: bool = False) -> Tensor:
    """FAVOR+ (Choromanski et al. 2021, Lemma 1 with eq. 5's h(x) = exp(-‖x‖²/2)): the positive
    random features of the softmax kernel,

        φ(x) = exp(ω_rᵀx̂ - ‖x̂‖²/2) / √M,  r = 1 .. M,   x̂ = x / D^(1/4),

    so that E[φ(q)ᵀφ(k)] = exp(q̂ᵀk̂) = exp(qᵀk / √D), the scores of scaled dot-product
    attention. For queries the exponent's row maximum is subtracted (detached): a positive
    factor per query, which the ratio cancels; keys keep the exact form, bounded by
    exp(‖ω_r‖²/2) (ω_rᵀx̂ - ‖x̂‖²/2 <= ‖ω_r‖²/2). x (..., T, D), omega (M, D) -> (..., T, M)."""
    d = x.shape[-1]
    xh = x * d**-0.25  # x̂ (..., T, D)
    expo = xh @ omega.to(x.dtype).T - (xh * xh).sum(-1, keepdim=True) / 2  # (..., T, M)
    if query:
        expo = expo - expo.amax(dim=-1, keepdim=True).detach()
    return torch.exp(expo) * omega.shape[0] ** -0.5  # (..., T, M)


def kernel_scores(phi_q: Tensor, phi_k: Tensor) -> Tensor:
    """sim(q_i, k_j) = φ(q_i)ᵀφ(k_j): phi_q (..., Tq, M), phi_k (..., Tk, M) -> (..., Tq, Tk)."""
    return phi_q @ phi_k.transpose(-2, -1)  # (..., Tq, Tk)


def kernel_ratio(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Katharopoulos et al. 2020, eq. 2: a_ij = e_ij / Σ_{j allowed} e_ij for non-negative
    kernel scores e (..., Tq, Tk); zero on masked keys, a row whose sum is zero (every key
    masked) all zero. -> weights (..., Tq, Tk), float32 at least. A negative score (only a
    score that is no kernel gives one) counts as zero, [e_ij]₊, so that the weights stay a
    distribution or zero, never NaN, like every normaliser's (``attnkit.build`` refuses the
    ratio with such scores)."""
    check_mask(mask, tuple(scores.shape), scores.device)
    e = scores.to(torch.promote_types(scores.dtype, torch.float32)).clamp_min(0)
    if mask is not None:
        e = e * mask  # (..., Tq, Tk)
    den = e.sum(-1, keepdim=True)  # (..., Tq, 1)
    return e / den.clamp_min(torch.finfo(e.dtype).tiny)


# --------------------------------------------------------------------------------------------
# Modules and stage objects
# --------------------------------------------------------------------------------------------


class FavorFeatures(nn.Module):
    """FAVOR+'s feature map (``favor_features``) with its random projection ω (M, D) held as a
    buffer (saved with the model, so that a trained model keeps its features).

    ``redraw_every``: in training, draw a fresh ω every that many attention calls (0: never);
    Choromanski et al. 2021, §4.2 redraw the features during training. A redraw happens at a
    query call, before the queries' features, so the queries and keys of one attention share
    one ω. ``redraw()`` draws one now. ``seed``: the first ω's seed (None: torch's generator).
    """

    omega: Tensor

    def __init__(self, head_dim: int, features: int = 64, *, redraw_every: int = 0,
                 seed: int | None = None) -> None:  # fmt: skip
        super().__init__()
        if features < 1:
            raise ValueError(f"FAVOR+ features={features}; give at least 1 random feature")
        if redraw_every < 0:
            raise ValueError(f"redraw_every={redraw_every}; give 0 (never) or a positive count")
        self.head_dim, self.features, self.redraw_every = head_dim, features, redraw_every
        gen = None if seed is None else torch.Generator().manual_seed(seed)
        self.register_buffer("omega", orthogonal_gaussian(features, head_dim, gen))
        self.calls = 0

    def redraw(self, generator: torch.Generator | None = None) -> None:
        """Draw a fresh ω (M, D) in place (same device and dtype)."""
        fresh = orthogonal_gaussian(self.features, self.head_dim, generator, self.omega.dtype)
        self.omega.copy_(fresh.to(self.omega.device))

    def forward(self, x: Tensor, query: bool = False) -> Tensor:
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"FAVOR+ features were drawn for width {self.head_dim}, got "
                             f"{x.shape[-1]}; build with head_dim={x.shape[-1]}")  # fmt: skip
        if query and self.training and self.redraw_every:
            if self.calls and self.calls % self.redraw_every == 0:
                self.redraw()
            self.calls += 1
        return favor_features(x, self.omega, query)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, features={self.features}, " \
               f"redraw_every={self.redraw_every}"  # fmt: skip


class KernelScore(Score):
    """A kernel score, sim(q, k) = φ(q)ᵀφ(k) (``kernel_scores``), declaring ``feature_map``
    (``attnkit.stages.capabilities``): with the ``KernelRatio`` normaliser ``attend`` runs the
    O(n·M·Dv) kernels of ``attnkit.linear``. ``features(x, query)`` gives φ(x) (..., T, M)."""

    name = "kernel"
    formula = "sim(q, k) = φ(q)ᵀφ(k)"
    gatherable = True  # φ is per vector: it broadcasts over a gathered window of keys
    feature_map = True

    def __init__(self, phi: FeatureMap = elu_features, name: str | None = None) -> None:
        super().__init__()
        self.phi = phi
        if name is not None:
            self.name = name

    def features(self, x: Tensor, query: bool) -> Tensor:
        """φ(x): x (..., T, D) -> (..., T, M), non-negative."""
        return self.phi(x, query)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return kernel_scores(self.features(query, True), self.features(keys, False))


class LinearScore(KernelScore):
    """Linear attention's score (Katharopoulos et al. 2020, eq. 7): φ(x) = elu(x) + 1."""

    name = "linear"
    formula = "sim(q, k) = (elu(q) + 1)ᵀ(elu(k) + 1)"

    def __init__(self) -> None:
        super().__init__(elu_features)


class PerformerScore(KernelScore):
    """The Performer's score (Choromanski et al. 2021, FAVOR+): φ(q)ᵀφ(k) ≈ exp(qᵀk / √D) with
    ``features`` positive orthogonal random features (``FavorFeatures``)."""

    name = "performer"
    formula = "sim(q, k) = φ(q)ᵀφ(k) ≈ exp(qᵀk/√d), φ(x) = exp(Ωx̂ - ‖x̂‖²/2)/√m"

    def __init__(self, head_dim: int, features: int = 64, *, redraw_every: int = 0,
                 seed: int | None = None) -> None:  # fmt: skip
        super().__init__(FavorFeatures(head_dim, features, redraw_every=redraw_every, seed=seed))


@dataclass(frozen=True)
class KernelRatio:
    """The normaliser of kernel scores, a_ij = e_ij / Σ_j e_ij (``kernel_ratio``), declaring
    ``kernel_ratio`` (``attnkit.stages.capabilities``)."""

    name: str = "ratio"
    kernel_ratio: bool = True

    def __call__(self, scores: Tensor, mask: Tensor | None = None) -> Tensor:
        return kernel_ratio(scores, mask)


ratio = KernelRatio()
"""The kernel-ratio normaliser, ``KernelRatio()``."""


def default_features(head_dim: int) -> int:
    """The Performer's usual feature count for head width D: round(D · ln D), at least D
    (performer-pytorch's default ``nb_features``)."""
    return max(head_dim, round(head_dim * math.log(max(head_dim, 2))))


__all__ = [
    "FavorFeatures",
    "FeatureMap",
    "KernelRatio",
    "KernelScore",
    "LinearScore",
    "PerformerScore",
    "default_features",
    "elu_features",
    "favor_features",
    "kernel_ratio",
    "kernel_scores",
    "orthogonal_gaussian",
    "ratio",
]
