"""Independent float64 references of RoPE's scalings, written from the papers' formulas with
``math``. Nothing here calls attnkit.

Legend: d head width, s factor, L original length, b base; θ_i = b^(-2i/d), i = 0 .. d/2 - 1.
"""

from __future__ import annotations

import math


def thetas(d: int, base: float = 10000.0) -> list[float]:
    """Su et al. 2021, eq. 15: θ_i = b^(-2(i-1)/d) (0-based here)."""
    return [base ** (-2 * i / d) for i in range(d // 2)]


def pi_thetas(d: int, s: float, base: float = 10000.0) -> list[float]:
    """Chen et al. 2023, eq. 4: f'(x, m) = f(x, m/s), so each angle m θ_i becomes m θ_i / s."""
    return [t / s for t in thetas(d, base)]


def ntk_thetas(d: int, s: float, base: float = 10000.0) -> list[float]:
    """Peng et al. 2023, eq. 15-16 ("NTK-aware"): b' = b · s^(d/(d-2)), θ'_i = b'^(-2i/d)."""
    b2 = base * s ** (d / (d - 2))
    return [b2 ** (-2 * i / d) for i in range(d // 2)]


def yarn_thetas(d: int, s: float, length: int, base: float = 10000.0, alpha: float = 1.0,
                beta: float = 32.0) -> tuple[list[float], float]:  # fmt: skip
    """Peng et al. 2023, §3.2 ("NTK-by-parts") and §3.4: λ_i = 2π/θ_i, r_i = L/λ_i; pairs with
    r_i > β keep θ_i, pairs with r_i < α take θ_i/s, between them a ramp. The ramp runs over
    the pair index between the (floored / ceiled) indices where r = β and r = α, as in the
    authors' code (``find_correction_range``); solving r_i = L θ_i / 2π = r for i gives
    i = d·ln(L/(2π r)) / (2 ln b) (the index counted in features, as their code does).
    √(1/t) = 0.1 ln s + 1 (eq. 22). -> (θ', √(1/t))."""
    def index(r: float) -> float:
        return d * math.log(length / (2 * math.pi * r)) / (2 * math.log(base))

    low = max(math.floor(index(beta)), 0)
    high = min(math.ceil(index(alpha)), d - 1)
    if low == high:
        high += 0.001
    out = []
    for i, t in enumerate(thetas(d, base)):
        interp = min(max((i - low) / (high - low), 0.0), 1.0)  # 1 - γ
        out.append(t / s * interp + t * (1 - interp))
    return out, 0.1 * math.log(s) + 1.0


def rotate_pairs(x: list[float], m: float, angles: list[float]) -> list[float]:
    """Su et al. 2021, eq. 34 with angles θ'_i: pair (x_2i, x_2i+1) rotated by m θ'_i."""
    out = []
    for i, t in enumerate(angles):
        c, s = math.cos(m * t), math.sin(m * t)
        a, b = x[2 * i], x[2 * i + 1]
        out += [a * c - b * s, a * s + b * c]
    return out
