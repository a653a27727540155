"""Score functions: how well each key matches each query.

Every score has one signature, ``score(query, keys) -> scores``:
    query (..., Tq, Dq), keys (..., Tk, Dk) -> scores (..., Tq, Tk)
A pure function carries the math; a thin ``nn.Module`` owns the parameters and calls it.

Legend: B batch, Tq queries, Tk keys, Dq/Dk query/key widths, A hidden width of additive scores.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from .._checks import check_width
from ._additive_chunks import AdditiveChunks

# --------------------------------------------------------------------------------------------
# Pure functions
# --------------------------------------------------------------------------------------------


def _same_width(query: Tensor, keys: Tensor, name: str) -> None:
    check_width(
        "query",
        query.shape[-1],
        keys.shape[-1],
        f"the {name} score needs query and key widths to match (keys have "
        f"{keys.shape[-1]}); use GeneralScore or AdditiveScore to score across widths",
    )


def dot_score(query: Tensor, keys: Tensor) -> Tensor:
    """Dot score (Luong 2015, eq. 8 "dot"): score(h_t, h_s) = h_tᵀ h_s."""
    _same_width(query, keys, "dot")
    return query @ keys.transpose(-2, -1)  # (..., Tq, Tk)


def scaled_dot_score(query: Tensor, keys: Tensor, scale: float | None = None) -> Tensor:
    """Scaled dot product (Vaswani 2017, eq. 1): score(q, k) = qᵀk / √d_k."""
    _same_width(query, keys, "scaled_dot")
    scale = 1.0 / math.sqrt(keys.shape[-1]) if scale is None else scale
    return (query @ keys.transpose(-2, -1)) * scale  # (..., Tq, Tk)


def general_score(query: Tensor, keys: Tensor, weight: Tensor) -> Tensor:
    """General / bilinear score (Luong 2015, eq. 8 "general"): score(h_t, h_s) = h_tᵀ W_a h_s.

    weight W_a: (Dq, Dk). Queries and keys may differ in width.
    """
    check_width("query", query.shape[-1], weight.shape[0], "W_a is (Dq, Dk)")
    check_width("keys", keys.shape[-1], weight.shape[1], "W_a is (Dq, Dk)")
    return (query @ weight) @ keys.transpose(-2, -1)  # (..., Tq, Dk) @ (..., Dk, Tk)


def _additive_block(wq: Tensor, wk: Tensor, v: Tensor) -> Tensor:
    hidden = torch.tanh(wq[..., :, None, :] + wk[..., None, :, :])  # (..., tq, Tk, A)
    return hidden @ v  # (..., tq, Tk)


def additive_score(
    query: Tensor,
    keys: Tensor,
    w_query: Tensor,
    w_keys: Tensor,
    v: Tensor,
    bias: Tensor | None = None,
    *,
    max_elements: int = 1 << 24,
) -> Tensor:
    """Additive / concat score (Bahdanau 2015, eq. 6 and App. A.1.2; Luong 2015 "concat"):

        score(s, h) = vᵀ tanh(W₁ s + W₂ h + b)

    w_query W₁: (A, Dq), w_keys W₂: (A, Dk), v: (A,), bias b: (A,) or None.
    The (..., Tq, Tk, A) hidden tensor is never larger than ``max_elements`` (unless one
    (..., 1, 1, A) slice already is): queries, and keys when one query row is too large, are
    processed in blocks (and recomputed in the backward pass).
    """
    wk = keys @ w_keys.transpose(0, 1)  # (..., Tk, A)
    if bias is not None:
        wk = wk + bias
    return additive_projected_score(query, wk, w_query, v, max_elements=max_elements)


# a chunked additive score's blocks hold at most this fraction of the whole hidden tensor
CHUNK_FRACTION = 16


def additive_projected_score(
    query: Tensor,
    projected_keys: Tensor,
    w_query: Tensor,
    v: Tensor,
    *,
    max_elements: int = 1 << 24,
) -> Tensor:
    """The additive score on keys already projected, ``projected_keys`` = W₂ h + b
    (..., Tk, A): score(s, h) = vᵀ tanh(W₁ s + projected_keys). A decoder that queries the
    same annotations at every step projects them once per sentence (Bahdanau 2015, App.
    A.1.2: "U_a h_j does not depend on i, we can pre-compute it"). -> (..., Tq, Tk)."""
    wq = query @ w_query.transpose(0, 1)  # (..., Tq, A)
    wk = projected_keys  # (..., Tk, A)
    lead_q, lead_k = query.shape[:-2], wk.shape[:-2]
    # skip torch.broadcast_shapes when the leading dims agree: a decoder step calls this T
    # times, and its generic helper is slow next to a step (docs/perf/log-performance.md, "Figures
    # behind the code's choices")
    batch = math.prod(lead_q if lead_q == lead_k else torch.broadcast_shapes(lead_q, lead_k))
    tq, tk, a = query.shape[-2], wk.shape[-2], w_query.shape[0]
    per_key = max(1, batch * a)  # elements of one (query, key) column of the hidden tensor
    whole = per_key * tq * tk
    if whole <= max_elements:  # the whole (..., Tq, Tk, A) tensor fits
        return _additive_block(wq, wk, v)  # (..., Tq, Tk)
    # blocks of at most 1/CHUNK_FRACTION of the whole tensor (and of max_elements): the peak
    # stays under a tenth of the dense form's however little the whole exceeds the budget
    budget = max(per_key, min(max_elements, whole // CHUNK_FRACTION))
    k_chunk = max(1, min(tk, budget // per_key))
    q_chunk = max(1, min(tq, budget // (per_key * k_chunk)))
    if wq.shape[:-2] == wk.shape[:-2] and v.dim() == 1:  # blocks rebuilt in its backward
        return AdditiveChunks.apply(wq, wk, v, q_chunk, k_chunk)  # (..., Tq, Tk)
    use_ckpt = torch.is_grad_enabled() and (wq.requires_grad or wk.requires_grad or v.requires_grad)
    rows = []
    for qs in range(0, tq, q_chunk):
        piece = wq[..., qs : qs + q_chunk, :]  # (..., tq, A)
        cols = []
        for ks in range(0, tk, k_chunk):
            keys_piece = wk[..., ks : ks + k_chunk, :]  # (..., tk, A)
            if use_ckpt:
                out = checkpoint(_additive_block, piece, keys_piece, v, use_reentrant=False)
            else:
                out = _additive_block(piece, keys_piece, v)
            assert isinstance(out, Tensor)
            cols.append(out)  # (..., tq, tk)
        rows.append(torch.cat(cols, dim=-1))  # (..., tq, Tk)
    return torch.cat(rows, dim=-2)  # (..., Tq, Tk)


def additive_step_score(
    query: Tensor, projected_keys: Tensor, w_query: Tensor, v: Tensor
) -> Tensor:
    """``additive_projected_score`` for one query per row, a decoder's step (Bahdanau 2015,
    eq. 6 with U_a h_j precomputed): score(s, h_j) = vᵀ tanh(W₁ s + projected_keys_j).
    query (..., Dq), projected_keys (..., Tk, A) -> (..., Tk). The (..., Tk, A) hidden tensor
    is the size of the projected keys, so it is never blocked (see ``max_elements``)."""
    wq = query @ w_query.transpose(0, 1)  # (..., A)
    return torch.tanh(projected_keys + wq[..., None, :]) @ v  # (..., Tk, A) @ (A,) -> (..., Tk)


def location_score(query: Tensor, weight: Tensor, num_keys: int) -> Tensor:
    """Location-based score (Luong 2015, eq. 9): a_t = softmax(W_a h_t); looks at the query alone.

    weight W_a: (max_keys, Dq). Returns (..., Tq, num_keys): the first ``num_keys`` rows of W_a.
    """
    if num_keys > weight.shape[0]:
        raise ValueError(
            f"location score was built for at most {weight.shape[0]} keys but got {num_keys}; "
            "build LocationScore with a larger max_keys"
        )
    return query @ weight[:num_keys].transpose(0, 1)  # (..., Tq, Tk)


def cosine_score(query: Tensor, keys: Tensor, scale: float = 1.0, eps: float = 1e-8) -> Tensor:
    """Cosine score (Graves 2014, content addressing): score(q, k) = β · qᵀk / (‖q‖ ‖k‖)."""
    _same_width(query, keys, "cosine")
    qn = query / query.norm(dim=-1, keepdim=True).clamp_min(eps)  # (..., Tq, D)
    kn = keys / keys.norm(dim=-1, keepdim=True).clamp_min(eps)  # (..., Tk, D)
    return scale * (qn @ kn.transpose(-2, -1))  # (..., Tq, Tk)


# The pure functions' capabilities (see attnkit.stages.capabilities): what Score modules declare as
# class attributes.
setattr(scaled_dot_score, "plain_scaled_dot", True)  # noqa: B010 - a function attribute
setattr(scaled_dot_score, "gatherable", True)  # noqa: B010
setattr(dot_score, "gatherable", True)  # noqa: B010


# --------------------------------------------------------------------------------------------
# Modules: own the parameters, call the functions above
# --------------------------------------------------------------------------------------------


class Score(nn.Module):
    """Base class of score modules: ``forward(query (..., Tq, Dq), keys (..., Tk, Dk))``
    returns (..., Tq, Tk).

    Capabilities (``attnkit.stages.capabilities``): ``gatherable`` — the score broadcasts over
    leading dims, so it can score a gathered window of keys (..., Tq, W, Dk) for one query
    (..., Tq, 1, Dq); ``plain_scaled_dot`` — it is exactly qᵀk / √d_k (fused SDPA)."""

    name: str = "score"
    formula: str = ""
    gatherable: bool = False

    @property
    def plain_scaled_dot(self) -> bool:
        """Whether this score is exactly qᵀk / √d_k (so attend may call fused SDPA)."""
        return False

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


class DotScore(Score):
    """Dot score (Luong 2015, eq. 8 "dot"): score(h_t, h_s) = h_tᵀ h_s; no parameters,
    query and key widths equal. See ``dot_score``."""

    name = "dot"
    formula = "score(h_t, h_s) = h_tᵀ h_s"
    gatherable = True

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return dot_score(query, keys)


class ScaledDotScore(Score):
    """Scaled dot product (Vaswani 2017, eq. 1): score(q, k) = qᵀk / √d_k, or qᵀk · ``scale``
    when given; no parameters. See ``scaled_dot_score``."""

    name = "scaled_dot"
    formula = "score(q, k) = qᵀk / √d_k"
    gatherable = True

    def __init__(self, scale: float | None = None) -> None:
        super().__init__()
        self.scale = scale

    @property
    def plain_scaled_dot(self) -> bool:
        """True unless a ``scale`` other than the default 1/√d_k was given."""
        return self.scale is None

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return scaled_dot_score(query, keys, self.scale)


class GeneralScore(Score):
    """General / bilinear score (Luong 2015, eq. 8 "general"): score(h_t, h_s) = h_tᵀ W_a h_s
    with a learned W_a (query_dim, key_dim); widths may differ. See ``general_score``."""

    name = "general"
    formula = "score(h_t, h_s) = h_tᵀ W_a h_s"
    gatherable = True

    def __init__(self, query_dim: int, key_dim: int | None = None) -> None:
        super().__init__()
        key_dim = query_dim if key_dim is None else key_dim
        self.weight = nn.Parameter(torch.empty(query_dim, key_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        check_width("query", query.shape[-1], self.weight.shape[0], "see GeneralScore(query_dim)")
        check_width("keys", keys.shape[-1], self.weight.shape[1], "see GeneralScore(key_dim)")
        return general_score(query, keys, self.weight.to(query.dtype))  # half params: upcast


class AdditiveScore(Score):
    """Additive / concat score (Bahdanau 2015, eq. 6; Luong 2015 "concat"):
    score(s, h) = vᵀ tanh(W₁ s + W₂ h + b), learned W₁ (hidden, query_dim), W₂ (hidden,
    key_dim), v (hidden,), b (hidden,) when ``bias``. ``max_elements`` bounds the
    (..., Tq, Tk, hidden) tensor (see ``additive_score``)."""

    name = "additive"
    formula = "score(s, h) = vᵀ tanh(W₁ s + W₂ h + b)"
    gatherable = True

    def __init__(
        self,
        query_dim: int,
        key_dim: int | None = None,
        hidden: int | None = None,
        *,
        bias: bool = True,
        max_elements: int = 1 << 24,
    ) -> None:
        super().__init__()
        key_dim = query_dim if key_dim is None else key_dim
        hidden = query_dim if hidden is None else hidden
        self.w_query = nn.Parameter(torch.empty(hidden, query_dim))
        self.w_keys = nn.Parameter(torch.empty(hidden, key_dim))
        self.v = nn.Parameter(torch.empty(hidden))
        self.bias = nn.Parameter(torch.zeros(hidden)) if bias else None
        self.max_elements = max_elements
        nn.init.xavier_uniform_(self.w_query)
        nn.init.xavier_uniform_(self.w_keys)
        nn.init.uniform_(self.v, -1.0 / math.sqrt(hidden), 1.0 / math.sqrt(hidden))

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        check_width("query", query.shape[-1], self.w_query.shape[1], "see AdditiveScore(query_dim)")
        check_width("keys", keys.shape[-1], self.w_keys.shape[1], "see AdditiveScore(key_dim)")
        return additive_score(
            query,
            keys,
            self.w_query.to(query.dtype),  # parameters meet attend's float32 (or float64) work
            self.w_keys.to(query.dtype),
            self.v.to(query.dtype),
            None if self.bias is None else self.bias.to(query.dtype),
            max_elements=self.max_elements,
        )

    def project_keys(self, keys: Tensor) -> Tensor:
        """W₂ h + b: keys (..., Tk, Dk) -> (..., Tk, A), for ``on_projected_keys``."""
        check_width("keys", keys.shape[-1], self.w_keys.shape[1], "see AdditiveScore(key_dim)")
        bias = None if self.bias is None else self.bias.to(keys.dtype)
        return F.linear(keys, self.w_keys.to(keys.dtype), bias)  # (..., Tk, A), one addmm

    def on_projected_keys(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """The same score, given keys from ``project_keys`` (compute those once, query them
        many times): pass as ``attend(q, project_keys(h), h, score=s.on_projected_keys)``."""
        check_width("query", query.shape[-1], self.w_query.shape[1], "see AdditiveScore(query_dim)")
        return additive_projected_score(
            query,
            projected_keys,
            self.w_query.to(query.dtype),
            self.v.to(query.dtype),
            max_elements=self.max_elements,
        )

    def step_on_projected_keys(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """The same score for one query per row (``attnkit.mechanisms.stepwise.attend_step``): query
        (..., Dq), keys from ``project_keys`` (..., Tk, A) -> (..., Tk). See
        ``additive_step_score``."""
        check_width("query", query.shape[-1], self.w_query.shape[1], "see AdditiveScore(query_dim)")
        w: Tensor = self.w_query
        v: Tensor = self.v
        if not (w.dtype == v.dtype == query.dtype):  # no .to() per step when the dtypes agree
            w, v = w.to(query.dtype), v.to(query.dtype)
        return additive_step_score(query, projected_keys, w, v)


class LocationScore(Score):
    """Location-based score (Luong 2015, eq. 9): a_t = softmax(W_a h_t), from the query alone;
    learned W_a (max_keys, query_dim), so at most ``max_keys`` keys. See ``location_score``."""

    name = "location"
    formula = "a_t = softmax(W_a h_t)"
    gatherable = False  # it ignores the keys: a gathered window would not select its rows

    def __init__(self, query_dim: int, max_keys: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_keys, query_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        check_width("query", query.shape[-1], self.weight.shape[1], "see LocationScore(query_dim)")
        return location_score(query, self.weight.to(query.dtype), keys.shape[-2])


class CosineScore(Score):
    """Cosine score (Graves 2014, content addressing): score(q, k) = β qᵀk / (‖q‖ ‖k‖), with
    β = ``scale``; no learned parameters. See ``cosine_score``."""

    name = "cosine"
    formula = "score(q, k) = β qᵀk / (‖q‖ ‖k‖)"
    gatherable = True

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return cosine_score(query, keys, self.scale)


__all__ = [
    "AdditiveScore",
    "CosineScore",
    "DotScore",
    "GeneralScore",
    "LocationScore",
    "ScaledDotScore",
    "Score",
    "additive_score",
    "additive_step_score",
    "cosine_score",
    "dot_score",
    "general_score",
    "location_score",
    "scaled_dot_score",
]
