"""Position in the score: a stage that sees where each query and key stands.

Every position stage has one signature,
``position(query, keys, q_pos, k_pos) -> Positioned(query, keys, bias)``:
    query (..., Tq, Dh), keys (..., Tk, Dh), q_pos (..., Tq) and k_pos (..., Tk) the
    positions (``attend`` passes 0 .. T-1 by default; an incremental decoder its step t)
    -> the query and keys, transformed or as given, and a bias broadcastable to
    (..., Tq, Tk) added to the scores, or None.
``attend`` scores ``score(query', keys') + bias``; the alignment sees query' and keys'.
A stage that only transforms q and k (RoPE, learned absolute) declares ``qk_transform``
(``attnkit.stages.capabilities``): every fast path then runs on the transformed q and k. A bias
goes to SDPA as its float mask; a stage that can give its bias at gathered key indices
declares ``bias_at(query, q_pos, s)`` (ALiBi, T5, Shaw) and runs with the sliding and
local-m alignments in the O(n·window) gathered-window kernel. Per-head parameters have a
leading heads dim H (1 for single-head attention): the bias is (..., H, Tq, Tk), where the
positions' leading dims carry a size-1 heads dim (``modules.heads_positions``).

Legend: B batch, H heads, Tq queries, Tk keys, Dh head width, R relative-encoding width,
K clipping distance (Shaw), N buckets (T5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .rope_scaling import rope_frequencies, scaling_name

# --------------------------------------------------------------------------------------------
# Pure functions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Positioned:
    """What a position stage gives ``attend``: query (..., Tq, Dh) and keys (..., Tk, Dh),
    transformed or as given, and a bias broadcastable to (..., Tq, Tk) added to the scores
    (or None)."""

    query: Tensor
    keys: Tensor
    bias: Tensor | None = None


def relative(q_pos: Tensor, k_pos: Tensor) -> Tensor:
    """j - i, key position minus query position: q_pos (..., Tq), k_pos (..., Tk)
    -> (..., Tq, Tk)."""
    return k_pos[..., None, :] - q_pos[..., :, None]  # (..., Tq, Tk)


def _heads(count: int, device: torch.device) -> Tensor:
    return torch.arange(count, device=device)[:, None, None]  # (H, 1, 1)


def alibi_slopes(heads: int) -> Tensor:
    """Press et al. 2022, §3: the geometric sequence 2^(-8/H), 2^(-16/H), ..., 2^(-8) for H a
    power of two; otherwise the slopes of the nearest lower power of two n followed by every
    other slope of 2n (the authors' code). -> (H,) float64."""

    def power_of_two(n: int) -> list[float]:
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]

    n = 2 ** math.floor(math.log2(heads))
    slopes = power_of_two(n) + power_of_two(2 * n)[0::2][: heads - n]
    return torch.tensor(slopes, dtype=torch.float64)  # (H,)


def alibi_bias(q_pos: Tensor, k_pos: Tensor, slopes: Tensor) -> Tensor:
    """ALiBi (Press et al. 2022, §3): softmax(q_i Kᵀ + m · [-(i-1), ..., -1, 0]), i.e. the bias
    -m_h · |i - j| per head h (the causal form's -m_h (i - j) on the keys j <= i it allows;
    the symmetric |i - j| for bidirectional attention). slopes (H,) -> (..., H, Tq, Tk)."""
    dist = relative(q_pos, k_pos).abs().to(slopes.dtype)  # |i - j| (..., Tq, Tk)
    return -slopes[:, None, None] * dist  # (H, 1, 1) * (..., Tq, Tk) -> (..., H, Tq, Tk)


def t5_bucket(rel: Tensor, buckets: int, max_distance: int, bidirectional: bool) -> Tensor:
    """Raffel et al. 2020, §2.1 (``_relative_position_bucket`` of the authors' code): the
    relative position j - i (..., Tq, Tk) -> its bucket in 0 .. N-1, long. With
    ``bidirectional`` half the buckets are for keys after the query. Distances below N/2
    (of the buckets for one direction) get a bucket each, larger ones share logarithmically
    wider buckets up to ``max_distance``; beyond it, the last bucket."""
    n = -rel.round().long()  # i - j
    out = torch.zeros_like(n)
    if bidirectional:
        buckets //= 2
        out = out + (n < 0).long() * buckets
        n = n.abs()
    else:
        n = n.clamp_min(0)
    exact = buckets // 2
    far = exact + (
        torch.log(n.double().clamp_min(1) / exact) / math.log(max_distance / exact)
        * (buckets - exact)
    ).long()  # fmt: skip
    far = far.clamp_max(buckets - 1)
    return out + torch.where(n < exact, n, far)  # (..., Tq, Tk)


def t5_bias(
    q_pos: Tensor, k_pos: Tensor, table: Tensor, max_distance: int, bidirectional: bool
) -> Tensor:
    """T5's relative bias (Raffel et al. 2020, §2.1): b_h(bucket(j - i)), a learned scalar
    per head and bucket. table (H, N) -> (..., H, Tq, Tk)."""
    heads, buckets = table.shape
    bucket = t5_bucket(relative(q_pos, k_pos), buckets, max_distance, bidirectional)
    return table[_heads(heads, table.device), bucket]  # (H, 1, 1) with (..., Tq, Tk)


def shaw_bias(query: Tensor, rel: Tensor, table: Tensor, scale: float) -> Tensor:
    """Shaw et al. 2018, eq. 4-6: e_ij = q_i (k_j + a^K_ij)ᵀ / √d_z, a^K_ij = w^K_clip(j - i, K),
    clip(x, K) = max(-K, min(K, x)): the bias term q_i a^K_ijᵀ · scale, computed as the
    paper's efficient form, q_i against the 2K + 1 embeddings, then gathered.
    query (..., Tq, Dh), rel j - i (..., Tq, Tk), table w^K (2K + 1, Dh) -> (..., Tq, Tk)."""
    clip = (table.shape[0] - 1) // 2
    index = rel.round().long().clamp(-clip, clip) + clip  # (..., Tq, Tk) in 0 .. 2K
    against = (query @ table.transpose(0, 1)) * scale  # (..., Tq, 2K + 1)
    lead = torch.broadcast_shapes(against.shape[:-2], index.shape[:-2])
    against = against.expand(*lead, *against.shape[-2:])
    index = index.expand(*lead, *index.shape[-2:])
    return against.gather(-1, index)  # (..., Tq, Tk)


def rotate(x: Tensor, pos: Tensor, base: float = 10000.0, theta: Tensor | None = None) -> Tensor:
    """RoPE (Su et al. 2021, eq. 34): R^d_Θ,m x, each pair (x_2i, x_2i+1) rotated by the angle
    m θ_i, θ_i = base^(-2i/d): (x_2i cos mθ_i - x_2i+1 sin mθ_i, x_2i sin mθ_i + x_2i+1 cos mθ_i).
    x (..., T, D) with D even, pos m (..., T) -> (..., T, D). ``theta`` (D/2,): other angles
    per position in place of base^(-2i/d) (a scaled RoPE, ``attnkit.stages.rope_scaling``)."""
    d = x.shape[-1]
    if theta is None:
        inv = base ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)  # θ_i (D/2,)
    else:
        inv = theta.to(device=x.device, dtype=x.dtype)  # θ'_i (D/2,)
    angle = pos.to(x.dtype)[..., None] * inv  # m θ_i (..., T, D/2)
    cos, sin = angle.cos(), angle.sin()
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, D/2) each
    turned = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return turned.flatten(-2)  # (..., T, D)


def sinusoid(rel: Tensor, width: int) -> Tensor:
    """Dai et al. 2019, §3.3: R, the sinusoid encoding (Vaswani 2017, §3.5) of relative
    distances, laid out [sin(r θ), cos(r θ)] as in the authors' code, θ_i = 10000^(-2i/R).
    rel (...) -> (..., R)."""
    inv = 10000.0 ** (-torch.arange(0, width, 2, device=rel.device, dtype=rel.dtype) / width)
    angle = rel[..., None] * inv  # (..., R/2)
    return torch.cat((angle.sin(), angle.cos()), dim=-1)  # (..., R)


def xl_bias(
    query: Tensor, keys: Tensor, rel: Tensor, w_r: Tensor, u: Tensor, v: Tensor, scale: float
) -> Tensor:
    """Transformer-XL's relative terms (Dai et al. 2019, §3.3):

        A^rel_ij = q_iᵀk_j (a) + q_iᵀ W_k,R R_{i-j} (b) + uᵀk_j (c) + vᵀ W_k,R R_{i-j} (d)

    the bias is (b) + (c) + (d) times ``scale`` (1/√Dh: with the scaled-dot score, which
    gives (a) / √Dh, the scores are A^rel / √Dh, as in the authors' code).
    query (..., H, Tq, Dh), keys (..., H, Tk, Dh), rel i - j (..., Tq, Tk), w_r W_k,R
    (H, Dh, R), u and v (H, 1, Dh) -> (..., H, Tq, Tk)."""
    enc = sinusoid(rel.to(query.dtype), w_r.shape[-1])  # R_{i-j} (..., Tq, Tk, R)
    qv = (query + v) @ w_r  # (q_i + v)ᵀ W_k,R (..., H, Tq, R)
    bd = (qv[..., :, None, :] @ enc.transpose(-1, -2)).squeeze(-2)  # (b) + (d) (..., H, Tq, Tk)
    c = (keys * u).sum(-1)[..., None, :]  # uᵀ k_j (..., H, 1, Tk)
    return (bd + c) * scale  # (..., H, Tq, Tk)


def xl_bias_factored(
    query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor, w_r: Tensor, u: Tensor,
    v: Tensor, scale: float,
) -> Tensor:  # fmt: skip
    """``xl_bias`` at query positions i and key positions j, with no (..., Tq, Tk, R)
    tensor: R_{i-j} = [sin((i-j)θ), cos((i-j)θ)] splits by the angle-difference identities,
    sin((i-j)θ) = sin iθ cos jθ - cos iθ sin jθ and cos((i-j)θ) = cos iθ cos jθ + sin iθ sin jθ,
    so with p_i = (q_i + v)ᵀ W_k,R = [a_i, b_i] (the sin and cos halves),

        (b) + (d) = Σ_k a_ik sin((i-j)θ_k) + b_ik cos((i-j)θ_k) = Q'_i · K'_j,
        Q'_i = [a_i sin iθ + b_i cos iθ, b_i sin iθ - a_i cos iθ],  K'_j = [cos jθ, sin jθ]:

    one (Tq, R) x (R, Tk) product per head, as RoPE's rotation. The angles are taken in
    float64 (absolute positions, unlike distances, can be large). query (..., H, Tq, Dh),
    keys (..., H, Tk, Dh), q_pos (..., Tq), k_pos (..., Tk), w_r (H, Dh, R), u and v
    (H, 1, Dh) -> (..., H, Tq, Tk)."""
    width = w_r.shape[-1]
    inv = 10000.0 ** (-torch.arange(0, width, 2, device=query.device, dtype=torch.float64)
                      / width)  # θ_k (R/2,) fmt: skip
    at_q = q_pos.to(torch.float64)[..., None] * inv  # iθ (..., Tq, R/2)
    at_k = k_pos.to(torch.float64)[..., None] * inv  # jθ (..., Tk, R/2)
    sin_q, cos_q = (f(at_q).to(query.dtype) for f in (torch.sin, torch.cos))
    k_enc = torch.cat((at_k.cos(), at_k.sin()), dim=-1).to(query.dtype)  # K' (..., Tk, R)
    a, b = ((query + v) @ w_r).chunk(2, dim=-1)  # (..., H, Tq, R/2) each
    q_enc = torch.cat((a * sin_q + b * cos_q, b * sin_q - a * cos_q), dim=-1)  # Q' (.., Tq, R)
    bd = q_enc @ k_enc.transpose(-1, -2)  # (b) + (d) (..., H, Tq, Tk)
    c = (keys * u).sum(-1)[..., None, :]  # uᵀ k_j (..., H, 1, Tk)
    return (bd + c) * scale  # (..., H, Tq, Tk)


def learned_offsets(pos: Tensor, table: Tensor) -> Tensor:
    """Learned absolute positions (Gehring et al. 2017; Vaswani 2017, §3.5 and Table 3 (E)) at
    the attention: p_h(pos), one learned vector per head and position, to add to q or k.
    pos (..., T) long, table (H, P, Dh) -> (..., H, T, Dh)."""
    heads = torch.arange(table.shape[0], device=table.device)[:, None]  # (H, 1)
    return table[heads, pos]  # (H, 1) with (..., T) -> (..., H, T, Dh)


# --------------------------------------------------------------------------------------------
# Modules: own the parameters, call the functions above
# --------------------------------------------------------------------------------------------


class Position(nn.Module):
    """Base class: ``forward(query, keys, q_pos, k_pos) -> Positioned``; no position (q and k
    as given, no bias). ``qk_transform``: the stage only transforms q and k, never a bias."""

    name = "none"
    formula = ""
    qk_transform = True

    def forward(self, query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor) -> Positioned:
        return Positioned(query, keys)


class LearnedPosition(Position):
    """Learned absolute positions (Gehring et al. 2017; Vaswani 2017, §3.5): q_i + p^Q_i and
    k_j + p^K_j, one learned vector per head and position, up to ``max_len`` positions (the
    same as a learned input embedding projected by W^Q and W^K)."""

    name = "learned"
    formula = "e_ij = (q_i + p^Q_i)ᵀ(k_j + p^K_j) / √d"
    qk_transform = True

    def __init__(self, heads: int, head_dim: int, max_len: int = 512) -> None:
        super().__init__()
        self.max_len = max_len
        self.p_query = nn.Parameter(torch.randn(heads, max_len, head_dim) * 0.02)
        self.p_keys = nn.Parameter(torch.randn(heads, max_len, head_dim) * 0.02)

    def forward(self, query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor) -> Positioned:
        for pos in (q_pos, k_pos):  # bounds read on a CPU only (a GPU would synchronise)
            on_cpu = pos.device.type == "cpu" and pos.numel() > 0
            if pos.is_floating_point() or (on_cpu and int(pos.max()) >= self.max_len):
                raise ValueError(
                    f"learned positions are integers 0 .. {self.max_len - 1} (max_len="
                    f"{self.max_len}); build with a larger max_len or use a relative position"
                )
        p_q = self.p_query.to(query.dtype)
        p_k = self.p_keys.to(keys.dtype)
        q_off = learned_offsets(q_pos, p_q)  # (..., H, Tq, Dh)
        return Positioned(query + q_off, keys + learned_offsets(k_pos, p_k))

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}"


class RotaryPosition(Position):
    """RoPE (Su et al. 2021, eq. 34): q_m = R_Θ,m q, k_n = R_Θ,n k, so that
    q_mᵀ k_n = qᵀ R_Θ,n-m k depends on the positions through n - m only. No parameters.

    ``scaling``, ``factor`` s, ``original_len`` L: RoPE stretched from L to s·L positions
    (``attnkit.stages.rope_scaling``): "linear" (position interpolation, Chen et al. 2023),
    "ntk" (NTK-aware), "yarn" (Peng et al. 2023; it needs L and scales q and k by
    0.1 ln s + 1); "none" (default) is plain RoPE."""

    name = "rope"
    formula = "e_mn = (R_Θ,m q_m)ᵀ (R_Θ,n k_n) / √d"
    qk_transform = True
    theta: Tensor | None

    def __init__(self, head_dim: int, base: float = 10000.0, *, scaling: str = "none",
                 factor: float = 1.0, original_len: int | None = None) -> None:  # fmt: skip
        super().__init__()
        if head_dim % 2:
            raise ValueError(
                f"RoPE rotates pairs of features: head width {head_dim} is odd; use an even "
                "head width (dim / heads)"
            )
        self.head_dim, self.base = head_dim, base
        self.scaling, self.factor = scaling_name(scaling), factor
        theta, self.attention_factor = rope_frequencies(head_dim, base, self.scaling, factor,
                                                        original_len)  # fmt: skip
        self.original_len = original_len
        # float64 and not a buffer: ``model.half()`` must not round the angles
        self.theta = None if self.scaling == "none" else theta  # θ'_i (D/2,)

    def forward(self, query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor) -> Positioned:
        q = rotate(query, q_pos, self.base, self.theta)  # (..., Tq, Dh)
        k = rotate(keys, k_pos, self.base, self.theta)  # (..., Tk, Dh)
        if self.attention_factor != 1.0:  # YaRN's √(1/t) on both: the scores over t
            q, k = q * self.attention_factor, k * self.attention_factor
        return Positioned(q, k)

    def extra_repr(self) -> str:
        scaled = "" if self.scaling == "none" else f", scaling={self.scaling}, " \
            f"factor={self.factor:g}, original_len={self.original_len}"  # fmt: skip
        return f"head_dim={self.head_dim}, base={self.base:g}{scaled}"


class BiasPosition(Position):
    """A stage that adds a bias to the scores (q and k unchanged)."""

    qk_transform = False

    def bias(self, query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """The bias added to the scores: (..., H, Tq, Tk), or broadcastable to the scores."""
        raise NotImplementedError

    def forward(self, query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor) -> Positioned:
        bias = self.bias(query, keys, q_pos, k_pos)  # (..., H, Tq, Tk)
        return Positioned(query, keys, bias.to(query.dtype))


class ALiBi(BiasPosition):
    """ALiBi (Press et al. 2022): the bias -m_h |i - j|, fixed head slopes m_h (see
    ``alibi_slopes``); no parameters."""

    name = "alibi"
    formula = "e_ij = q_iᵀk_j / √d - m_h |i - j|"
    slopes: Tensor

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(heads).float(), persistent=False)

    def bias(self, query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """-m_h |i - j| (..., H, Tq, Tk) (``alibi_bias``)."""
        return alibi_bias(q_pos, k_pos, self.slopes.to(query.dtype))  # slopes (H,)

    def bias_at(self, query: Tensor, q_pos: Tensor, s: Tensor) -> Tensor:
        """The bias at key indices s (..., Tq, W), key j at position j (the gathered-window
        kernel): -m_h |i - s| (..., H, Tq, W)."""
        dist = (s - q_pos[..., None]).abs().to(query.dtype)  # (..., Tq, W)
        return -self.slopes.to(query.dtype)[:, None, None] * dist  # (..., H, Tq, W)


class T5Bias(BiasPosition):
    """T5's bucketed relative bias (Raffel et al. 2020, §2.1): b_h(bucket(j - i)), a learned
    scalar per head and bucket (``t5_bucket``)."""

    name = "t5"
    formula = "e_ij = q_iᵀk_j / √d + b_h(bucket(j - i))"

    def __init__(
        self, heads: int, buckets: int = 32, max_distance: int = 128, bidirectional: bool = True
    ) -> None:
        super().__init__()
        if buckets < 4 or max_distance < buckets:
            raise ValueError(
                f"T5 buckets={buckets}, max_distance={max_distance}; need buckets >= 4 and "
                "max_distance >= buckets (paper: 32, 128)"
            )
        self.table = nn.Parameter(torch.randn(heads, buckets) * 0.02)
        self.max_distance, self.bidirectional = max_distance, bidirectional

    def bias(self, query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """b_h(bucket(j - i)) (..., H, Tq, Tk) (``t5_bias``)."""
        return t5_bias(q_pos, k_pos, self.table, self.max_distance, self.bidirectional)

    def bias_at(self, query: Tensor, q_pos: Tensor, s: Tensor) -> Tensor:
        """The bias at key indices s (..., Tq, W) (the gathered-window kernel):
        b_h(bucket(s - i)) (..., H, Tq, W)."""
        heads, buckets = self.table.shape
        rel = s - q_pos[..., None]  # (..., Tq, W)
        bucket = t5_bucket(rel, buckets, self.max_distance, self.bidirectional)
        return self.table.to(query.dtype)[_heads(heads, s.device), bucket]  # (..., H, Tq, W)

    def extra_repr(self) -> str:
        return f"buckets={self.table.shape[1]}, max_distance={self.max_distance}, " \
               f"bidirectional={self.bidirectional}"  # fmt: skip


class ShawPosition(BiasPosition):
    """Shaw et al. 2018 relative positions (eq. 4-6, the key term): learned w^K_-K .. w^K_K
    shared across heads, distances clipped to ``clip`` (paper: k = 16 for base models)."""

    name = "shaw"
    formula = "e_ij = q_i (k_j + w^K_clip(j-i, K))ᵀ / √d"

    def __init__(self, head_dim: int, clip: int = 16, scale: float | None = None) -> None:
        super().__init__()
        if clip < 0:
            raise ValueError(f"Shaw clip={clip}; give a clipping distance >= 0 (paper: 16)")
        self.table = nn.Parameter(torch.randn(2 * clip + 1, head_dim) * head_dim**-0.5)
        self.scale = head_dim**-0.5 if scale is None else scale

    def bias(self, query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """q_i w^K_clip(j - i, K)ᵀ / √d (..., Tq, Tk) (``shaw_bias``)."""
        rel = relative(q_pos, k_pos)  # (..., Tq, Tk)
        return shaw_bias(query, rel, self.table.to(query.dtype), self.scale)

    def bias_at(self, query: Tensor, q_pos: Tensor, s: Tensor) -> Tensor:
        """The bias at key indices s (..., Tq, W) (the gathered-window kernel):
        q_i w^K_clip(s - i, K)ᵀ / √d (..., Tq, W)."""
        rel = s - q_pos[..., None]  # (..., Tq, W)
        return shaw_bias(query, rel, self.table.to(query.dtype), self.scale)

    def extra_repr(self) -> str:
        return f"clip={(self.table.shape[0] - 1) // 2}"


class XLPosition(BiasPosition):
    """Transformer-XL's relative positions (Dai et al. 2019, §3.3; see ``xl_bias``): learned
    W_k,R (per head), global content bias u and global position bias v (per head)."""

    name = "xl"
    formula = "e_ij = (q_iᵀk_j + q_iᵀW_R R_{i-j} + uᵀk_j + vᵀW_R R_{i-j}) / √d"

    def __init__(self, heads: int, head_dim: int, rel_dim: int | None = None) -> None:
        super().__init__()
        rel_dim = head_dim if rel_dim is None else rel_dim
        if rel_dim % 2:
            raise ValueError(f"XL rel_dim={rel_dim}; the sinusoid needs an even width")
        self.w_r = nn.Parameter(torch.randn(heads, head_dim, rel_dim) * rel_dim**-0.5)
        self.u = nn.Parameter(torch.zeros(heads, 1, head_dim))
        self.v = nn.Parameter(torch.zeros(heads, 1, head_dim))
        self.scale = head_dim**-0.5

    def bias(self, query: Tensor, keys: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """Terms (b), (c), (d) over √d, (..., H, Tq, Tk) (``xl_bias_factored``, which equals
        ``xl_bias`` at the distances i - j without their (..., Tq, Tk, R) encodings)."""
        w_r, u, v = (p.to(query.dtype) for p in (self.w_r, self.u, self.v))
        return xl_bias_factored(query, keys, q_pos, k_pos, w_r, u, v, self.scale)


__all__ = [
    "ALiBi",
    "BiasPosition",
    "LearnedPosition",
    "Position",
    "Positioned",
    "RotaryPosition",
    "ShawPosition",
    "T5Bias",
    "XLPosition",
    "alibi_bias",
    "alibi_slopes",
    "learned_offsets",
    "relative",
    "rotate",
    "shaw_bias",
    "sinusoid",
    "t5_bias",
    "t5_bucket",
    "xl_bias",
    "xl_bias_factored",
]
