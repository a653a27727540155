"""The attention variants the benchmark measures; each builds its inputs and returns a step.

A scenario is ``global`` (every key), ``local`` (radius r each side), ``causal`` (look-back
r), ``additive`` (Bahdanau's score) or ``sparse`` / ``sparse-fixed`` (the Sparse Transformer's
patterns, ``bench/sparse.py``; the case's radius is their stride l). A step runs the
forward pass, and with ``backward`` the backward pass too.

Legend: B batch, H heads, n sequence length, d head width, r radius, W keys per query.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..masks import band_mask
from . import sparse

Step = Callable[[], None]


@dataclass(frozen=True)
class Case:
    """One measurement: a variant on a scenario at one size."""

    variant: str
    scenario: str  # global | local | causal | additive | sparse | sparse-fixed
    n: int
    backward: bool
    batch: int = 1
    heads: int = 8
    dim: int = 64
    radius: int = 256  # local: each side; causal: look-back; sparse: the stride l
    device: str = "cpu"  # cpu | cuda

    @property
    def keys_per_query(self) -> int:
        """W: the keys one query must score (n for global attention)."""
        if self.scenario in ("global", "additive"):
            return self.n
        return self.radius + 1 if self.scenario == "causal" else 2 * self.radius + 1

    @property
    def flops(self) -> float:
        """The FLOPs the variant must do: 4·n·W·d·H·B forward (QKᵀ and AV); the backward pass
        counts twice the forward (dQ, dK, dV, dS), so fwd+bwd counts 3x. Additive scores
        (hidden width A = d) count n²·(3A + 2d): add, multiply by v and sum, weighted sum.
        The sparse patterns count their allowed pairs exactly: 4·d·pairs (``sparse.pairs``)."""
        if self.scenario in sparse.SCENARIOS:
            fwd = 4.0 * self.dim * sparse.pairs(self)
            return 3 * fwd if self.backward else fwd
        per_pair = 3 * self.dim + 2 * self.dim if self.scenario == "additive" else 4 * self.dim
        fwd = float(per_pair) * self.n * self.keys_per_query * self.heads * self.batch
        return 3 * fwd if self.backward else fwd


def band(n: int, radius: int, causal: bool, device: str = "cpu") -> Tensor:
    """Dense (n, n) bool band mask, True = may attend: what the dense anchors need."""
    return band_mask(n, n, radius, causal=causal, device=torch.device(device))  # (n, n)


def synchronised(step: Step, device: str) -> Step:
    """``step`` that returns only when the device has finished it (CUDA runs asynchronously:
    a timer around the bare call would time the launch)."""
    if device == "cpu":
        return step

    def done() -> None:
        step()
        torch.cuda.synchronize()

    return done


def _naive(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, H, n, n)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (B, H, n, d)


def _attention_fn(case: Case) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """(q, k, v) (B, H, n, d) -> context (B, H, n, d) for the case's variant and scenario."""
    name, n, r = case.variant, case.n, case.radius
    if case.scenario in sparse.SCENARIOS:
        return sparse.attention_fn(case)
    if case.scenario == "additive":
        return _additive(case.dim, chunked=name == "attnkit", device=case.device)
    causal = case.scenario == "causal"
    local = case.scenario != "global"
    if name == "attnkit" and not local:
        from ..core import attend

        return lambda q, k, v: attend(q, k, v, need_weights=False).context  # defaults
    if name in ("attnkit", "attnkit-tiles", "attnkit-autograd"):
        # attnkit: the default (the native banded kernel where built); attnkit-tiles: the SDPA
        # tiles with their own backward; attnkit-autograd: autograd through SDPA + unfold
        from ..local import sliding_window_attention

        own = name != "attnkit-autograd"
        kernel = "auto" if name == "attnkit" else "tiles"
        return lambda q, k, v: sliding_window_attention(
            q, k, v, r, causal, own_backward=own, kernel=kernel
        ).context
    if name == "sdpa":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v)
    if name == "sdpa-band":
        mask = band(n, r, causal, case.device)
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if name == "naive":
        window = band(n, r, causal, case.device) if local else None
        return lambda q, k, v: _naive(q, k, v, window)
    if name == "flex":
        return _flex(n, r, causal, case.device)
    if name == "local-attention":
        return _lucidrains(r, causal, case.device)
    raise ValueError(f"unknown variant {name!r} for scenario {case.scenario!r}")


def _additive(
    dim: int, chunked: bool, device: str = "cpu"
) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """Bahdanau's additive score, A = d: attnkit's (chunked so the (n, n, A) hidden tensor never
    exceeds 2^24 elements, recomputed in the backward pass) or computed in one piece."""
    from ..core import attend
    from ..stages.scores import AdditiveScore

    score = AdditiveScore(dim, dim, dim).to(device)
    if chunked:
        return lambda q, k, v: attend(q, k, v, score=score, need_weights=False).context

    def whole(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        wq = q @ score.w_query.transpose(0, 1)  # (B, H, n, A)
        wk = k @ score.w_keys.transpose(0, 1)  # (B, H, n, A)
        e = torch.tanh(wq[..., :, None, :] + wk[..., None, :, :]) @ score.v  # (B, H, n, n)
        return torch.softmax(e, dim=-1) @ v  # (B, H, n, d)

    return whole


def _flex(
    n: int, r: int, causal: bool, device: str = "cpu"
) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """FlexAttention with a sliding-window block mask, compiled (the only way it runs on CPU,
    where it has no backward pass; on CUDA compiled to its Triton kernels)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def window(b: Tensor, h: Tensor, qi: Tensor, ki: Tensor) -> Tensor:
        if causal:
            return (ki <= qi) & (qi - ki <= r)
        return (qi - ki).abs() <= r

    # uncompiled, create_block_mask materialises an n x n mask (32 GiB at n = 65536)
    make = torch.compile(create_block_mask) if n > 16384 else create_block_mask
    block_mask = make(window, None, None, n, n, device=device)
    compiled = torch.compile(flex_attention)
    return lambda q, k, v: compiled(q, k, v, block_mask=block_mask)


def _lucidrains(
    r: int, causal: bool, device: str = "cpu"
) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """lucidrains' local-attention 1.11.2: buckets of window_size with look-around, masked to
    the exact window; no rotary embedding, so it computes the same function."""
    from local_attention import LocalAttention

    if causal:
        layer = LocalAttention(r, causal=True, look_backward=1, look_forward=0, autopad=True,
                               exact_windowsize=True, use_rotary_pos_emb=False)  # fmt: skip
    else:
        layer = LocalAttention(r, causal=False, look_backward=1, look_forward=1, autopad=True,
                               exact_windowsize=True, use_rotary_pos_emb=False)  # fmt: skip
    layer = layer.to(device)
    return lambda q, k, v: layer(q, k, v)


def available(case: Case) -> str | None:
    """None if the variant can run this case here, else why not."""
    if case.variant == "local-attention" and importlib.util.find_spec("local_attention") is None:
        return "not installed (pip install local-attention==1.11.2)"
    if case.device == "cuda" and not torch.cuda.is_available():
        return "no CUDA device here"
    if case.variant == "flex" and case.backward and case.device == "cpu":
        return "no CPU backward (pytorch#148752)"
    if case.scenario in sparse.SCENARIOS:
        return None if case.variant in sparse.VARIANTS else "not a sparse variant"
    if case.scenario == "global" and case.variant in ("flex", "local-attention", "sdpa-band"):
        return "local only"
    if case.scenario != "global" and case.variant == "sdpa":
        return "global only"
    return None


def make_step(case: Case) -> Step:
    """Inputs (B, H, n, d) float32 on the case's device and one step: forward, then backward
    if asked; on CUDA the step waits for the device (``synchronised``)."""
    gen = torch.Generator().manual_seed(0)
    shape = (case.batch, case.heads, case.n, case.dim)
    q, k, v = (
        torch.randn(shape, generator=gen).to(case.device).requires_grad_(case.backward)
        for _ in range(3)
    )  # fmt: skip
    grad = torch.randn(shape, generator=gen).to(case.device) if case.backward else None
    fn = _attention_fn(case)

    def step() -> None:
        if grad is None:
            with torch.no_grad():
                fn(q, k, v)
            return
        for x in (q, k, v):
            x.grad = None
        fn(q, k, v).backward(grad)

    return synchronised(step, case.device)


VARIANTS = {
    "global": ["attnkit", "sdpa", "naive"],
    "local": ["attnkit", "sdpa-band", "flex", "local-attention", "naive"],
    "causal": ["attnkit", "sdpa-band", "flex", "local-attention", "naive"],
    "additive": ["attnkit", "naive"],
    **{name: list(sparse.VARIANTS) for name in sparse.SCENARIOS},
}

__all__ = ["VARIANTS", "Case", "available", "band", "make_step", "synchronised"]
