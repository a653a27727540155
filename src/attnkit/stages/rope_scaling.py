"""RoPE past its training length: the frequencies θ'_i that stretch a rotary position stage
trained at L positions to s·L (``RotaryPosition(scaling=..., factor=s)``).

RoPE rotates pair i of a head of width D by m·θ_i, θ_i = b^(-2i/D), i = 0 .. D/2 - 1 (Su et al.
2021). The scalings change θ (the angle of position m becomes m·θ'_i):

    "linear"  position interpolation (Chen et al. 2023, eq. 4: f'(x, m) = f(x, m·L/L')):
              θ'_i = θ_i / s, every position squeezed into the trained range;
    "ntk"     NTK-aware scaling (bloc97 2023; Peng et al. 2023, §3.1, eq. 15-16): the base
              stretched, b' = b · s^(D/(D-2)): the fastest pair unchanged, the slowest
              interpolated by s;
    "yarn"    YaRN (Peng et al. 2023, §3.2-3.4): "NTK-by-parts" interpolation,
              θ'_i = (1 - γ_i) θ_i / s + γ_i θ_i, with γ_i = 1 for pairs that turn more than β
              times within L (wavelength λ_i = 2π/θ_i, r_i = L/λ_i > β: extrapolated),
              0 for those that turn less than α times (interpolated), a linear ramp between;
              plus the attention temperature √(1/t) = 0.1 ln s + 1 by which q and k are both
              scaled (eq. 22). As in the authors' code and ``transformers``, the ramp runs
              linearly over the pair index between the (floored / ceiled) indices where
              r_i = β and r_i = α, α = ``beta_slow`` = 1, β = ``beta_fast`` = 32.

Legend: D head width, s factor, L the original (training) length, b the base.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

SCALINGS = ("none", "linear", "ntk", "yarn")
"""The scalings of ``rope_frequencies``."""
SCALING_ALIASES = {"pi": "linear", "interpolation": "linear", "ntk-aware": "ntk"}


def scaling_name(name: str) -> str:
    """A scaling's canonical name (aliases resolved); a ValueError listing the choices."""
    key = SCALING_ALIASES.get(name, name)
    if key not in SCALINGS:
        raise ValueError(f"unknown RoPE scaling {name!r}; choose one of {', '.join(SCALINGS)}")
    return key


def yarn_correction_range(head_dim: int, base: float, original_len: int, beta_fast: float,
                          beta_slow: float) -> tuple[float, float]:  # fmt: skip
    """Peng et al. 2023, §3.2: the pair index (counting every feature, as the authors' code)
    where a pair turns r times within L, D·ln(L / (2π r)) / (2 ln b), at r = β (``beta_fast``,
    floored) and r = α (``beta_slow``, ceiled), clamped to [0, D - 1]."""

    def at(turns: float) -> float:
        return head_dim * math.log(original_len / (turns * 2 * math.pi)) / (2 * math.log(base))

    return max(math.floor(at(beta_fast)), 0), min(math.ceil(at(beta_slow)), head_dim - 1)


def yarn_attention_factor(factor: float) -> float:
    """Peng et al. 2023, eq. 22: √(1/t) = 0.1 ln s + 1 (1 for s <= 1), the factor q and k are
    each multiplied by, so that the scores are divided by t."""
    return 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0


def rope_frequencies(
    head_dim: int, base: float = 10000.0, scaling: str = "none", factor: float = 1.0,
    original_len: int | None = None, beta_fast: float = 32.0, beta_slow: float = 1.0,
) -> tuple[Tensor, float]:  # fmt: skip
    """The angles per position θ'_i of a scaled RoPE (see the module) and the factor q and k
    are multiplied by (YaRN's √(1/t); 1 for the others). -> (θ' (D/2,) float64, factor)."""
    key = scaling_name(scaling)
    if not factor >= 1:
        raise ValueError(f"RoPE factor={factor}; give the context extension s >= 1 (1: none)")
    exponent = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim  # 2i/D (D/2,)
    theta = base**-exponent  # θ_i (D/2,)
    if key == "none":
        return theta, 1.0
    if key == "linear":
        return theta / factor, 1.0
    if key == "ntk":
        stretched = base * factor ** (head_dim / (head_dim - 2))  # b'
        return stretched**-exponent, 1.0
    if original_len is None or original_len < 1:
        raise ValueError("RoPE scaling 'yarn' needs original_len=L, the length trained at")
    low, high = yarn_correction_range(head_dim, base, original_len, beta_fast, beta_slow)
    if low == high:
        high += 0.001  # one pair at the boundary: a step, not a division by zero
    index = torch.arange(head_dim // 2, dtype=torch.float64)  # i (D/2,)
    interpolated = ((index - low) / (high - low)).clamp(0, 1)  # 1 - γ_i (D/2,)
    mixed = theta / factor * interpolated + theta * (1 - interpolated)  # θ'_i (D/2,)
    return mixed, yarn_attention_factor(factor)


__all__ = [
    "SCALINGS",
    "SCALING_ALIASES",
    "rope_frequencies",
    "scaling_name",
    "yarn_attention_factor",
    "yarn_correction_range",
]
