"""The layers of Vaswani et al. (2017), Table 1, and what the complexity experiment measures
on each: FLOPs, bytes saved for backward, the depth of the autograd graph, fwd+bwd time, and
the maximum path length through a stack.

Every layer maps x (B, n, d) -> (B, n, d):

* ``recurrent``: a GRU (``torch.nn.GRU``), h_t = GRU(x_t, h_{t-1});   O(n·d²), n sequential steps
* ``convolution``: a causal Conv1d of kernel k (and dilation δ), y_t = Σ_{i<k} W_i x_{t-iδ};
  O(k·n·d²); a stack of ceil((n-1)/(k-1)) contiguous or ceil(log_k n) dilated (δ = k^l) layers
  connects every pair
* ``self_attention``: ``attnkit.nn.MultiheadAttention``, softmax(QKᵀ/√d_h)V; O(n²·d)
* ``restricted``: the same module with ``SlidingWindow(r)``, |i - j| <= r, which ``attend``
  sends to the O(n·r) band kernel (``attnkit.local.sliding``); O(r·n·d)

Legend: B batch, n positions, d model width, k kernel, r radius, H heads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from ...bench.measure import SavedBytes
from ...bench.measure import graph_depth as measured_graph
from ...local import DEFAULT_BLOCK, native
from ...nn import MultiheadAttention
from ...stages.alignment import SlidingWindow

LAYERS = ("recurrent", "convolution", "self_attention", "restricted")
# the stacks whose maximum path length is measured (Table 1's rows; the conv row two ways)
STACKS = ("recurrent", "conv_contiguous", "conv_dilated", "self_attention", "restricted")


class Recurrent(nn.Module):
    """A GRU layer (Cho et al. 2014): (B, n, d) -> (B, n, d), one step per position."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.gru = nn.GRU(d, d, batch_first=True)

    def forward(self, x: Tensor) -> Tensor:
        return self.gru(x)[0]  # (B, n, d)


class CausalConv(nn.Module):
    """y_t = b + Σ_{i<k} W_i x_{t - i·dilation}, zero before the start: (B, n, d) -> (B, n, d)."""

    def __init__(self, d: int, kernel: int, dilation: int = 1) -> None:
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv = nn.Conv1d(d, d, kernel, dilation=dilation)

    def forward(self, x: Tensor) -> Tensor:
        h = F.pad(x.transpose(1, 2), (self.pad, 0))  # (B, d, pad + n)
        return self.conv(h).transpose(1, 2)  # (B, n, d)


class SelfAttentionLayer(nn.Module):
    """Multi-head self-attention (Vaswani 2017, §3.2.2) through attnkit's fused path; with a
    radius, restricted to |i - j| <= r (the band kernel): (B, n, d) -> (B, n, d)."""

    def __init__(self, d: int, heads: int, radius: int | None = None) -> None:
        super().__init__()
        align = None if radius is None else SlidingWindow(radius)
        self.mha = MultiheadAttention(d, heads, batch_first=True, align=align)

    def forward(self, x: Tensor) -> Tensor:
        return self.mha(x, x, x, need_weights=False)[0]  # (B, n, d)


def make_layer(kind: str, d: int, *, heads: int, kernel: int, radius: int) -> nn.Module:
    """One timed layer of Table 1 (``LAYERS``)."""
    if kind == "recurrent":
        return Recurrent(d)
    if kind == "convolution":
        return CausalConv(d, kernel)
    if kind == "self_attention":
        return SelfAttentionLayer(d, heads)
    if kind == "restricted":
        return SelfAttentionLayer(d, heads, radius)
    raise ValueError(f"unknown layer {kind!r}; choose one of {LAYERS}")


def make_stack_layer(kind: str, depth: int, d: int, *, heads: int, kernel: int, radius: int):
    """Layer number ``depth`` (0-based) of a ``STACKS`` stack: the dilated conv stack doubles
    (x kernel) its dilation at each layer, δ = k^depth (WaveNet, van den Oord 2016)."""
    if kind == "conv_contiguous":
        return CausalConv(d, kernel)
    if kind == "conv_dilated":
        return CausalConv(d, kernel, dilation=kernel**depth)
    return make_layer(kind, d, heads=heads, kernel=kernel, radius=radius)


def forward_flops(kind: str, b: int, n: int, d: int, kernel: int, radius: int) -> int:
    """Forward FLOPs (2 per multiply-add, matrix products only, as FlopCounterMode counts)."""
    if kind == "recurrent":
        return 12 * b * n * d * d  # 3 gates, each x_t W (d x d) and h W (d x d), n steps
    if kind == "convolution":
        return 2 * b * n * kernel * d * d
    proj = 8 * b * n * d * d  # Q, K, V and output projections
    return proj + mixing_flops(kind, b, n, d, kernel, radius)


def mixing_flops(kind: str, b: int, n: int, d: int, kernel: int, radius: int) -> int:
    """Forward FLOPs of the term Table 1 writes: the recurrence (12·n·d²), the convolution
    (2·k·n·d²), QKᵀ and AV (4·n²·d), or the band kernel's: the native kernel's blocks of bq
    queries reach at most bq + 2r keys each (``native.band_pairs``), the SDPA tiles' (where it
    is not built) nb blocks reach bq + 2r keys each, 4·nb·bq·(bq + 2r)·d; O((bq + r)·n·d)
    with bq fixed either way."""
    if kind in ("recurrent", "convolution"):
        return forward_flops(kind, b, n, d, kernel, radius)
    if kind == "self_attention":
        return 4 * b * n * n * d
    r = min(radius, n - 1)
    if native.kernel() is not None:  # the banded C++ kernel: blocks of its own, ends clipped
        return 4 * b * d * native.band_pairs(n, n, r, False, min(native.BLOCK, n))
    bq = min(DEFAULT_BLOCK, n)
    blocks = -(-n // bq)
    return 4 * b * blocks * bq * (bq + 2 * r) * d


# attnkit's fused path runs SDPA's CPU flash kernel, which FlopCounterMode does not list; it is
# the same computation as the flash kernels it does list (QKᵀ, AV; five products backward)
def _cpu_sdpa(q: tuple, k: tuple, v: tuple, *args: object, **kwargs: object) -> int:
    return int(sdpa_flop_count(q, k, v))  # args are shapes: FlopCounterMode wraps the formula


def _cpu_sdpa_backward(grad: tuple, q: tuple, k: tuple, v: tuple, *a: object, **kw: object) -> int:
    return int(sdpa_backward_flop_count(grad, q, k, v))


_CPU_SDPA = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward,
}
_ATTENTION_OPS = {
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_attention",
    "band_attention",  # attnkit.local.native, its FLOPs registered there
}


def flop_counter() -> FlopCounterMode:
    return FlopCounterMode(display=False, custom_mapping=dict(_CPU_SDPA))


def split_flops(counter: FlopCounterMode) -> tuple[int, int]:
    """(all FLOPs, FLOPs of attention kernels) that ``counter`` saw."""
    counts = counter.get_flop_counts()["Global"]
    attn = sum(v for op, v in counts.items() if str(op).split(".")[1] in _ATTENTION_OPS)
    return counter.get_total_flops(), attn




def graph_depth(y: Tensor) -> int:
    """The longest chain of autograd nodes from ``y`` back to a leaf: operations that must run
    one after another (each may be parallel inside); ``bench.measure.graph_depth``'s first
    number."""
    return measured_graph(y)[0]


@dataclass
class Measured:
    """One layer at one (n, d): forward and fwd+bwd FLOPs, the forward FLOPs of attention
    kernels, bytes saved for backward, autograd depth, the least CPU and wall-clock seconds
    of one fwd+bwd pass, and the CPU seconds of every timed pass."""

    flops_forward: int
    flops_attention: int
    flops_total: int
    saved_bytes: int
    depth: int
    cpu_seconds: float
    wall_seconds: float
    cpu_repeats: list[float]


def measure(layer: nn.Module, x: Tensor, repeats: int) -> Measured:
    """A counted warm-up pass (FLOPs, saved bytes, depth), then ``repeats`` timed passes of
    forward + backward of y.sum(). Time is the minimum over the passes of this process's CPU
    time (``time.process_time``: on one torch thread, forward and backward run in this
    process and the time it waits for a busy core is not counted), and of wall-clock time."""
    params = list(layer.parameters())
    saved, fwd = SavedBytes(params), flop_counter()
    with fwd, saved:
        y = layer(x)  # (B, n, d)
    depth = graph_depth(y)
    with flop_counter() as bwd:
        y.sum().backward()
    flops_fwd, attn = split_flops(fwd)
    cpus, wall = [], math.inf
    for _ in range(repeats):
        layer.zero_grad(set_to_none=True)
        x.grad = None
        c0, w0 = time.process_time(), time.perf_counter()
        layer(x).sum().backward()
        cpus.append(time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
    total = flops_fwd + bwd.get_total_flops()
    return Measured(flops_fwd, attn, total, saved.total, depth, min(cpus), wall, cpus)


def path_length(make: Callable[[int], nn.Module], n: int, d: int, max_layers: int) -> int | None:
    """The fewest stacked layers (``make(i)`` is layer i) at which output position n-1 has a
    non-zero gradient with respect to input position 0; None if ``max_layers`` do not reach.
    float64, so that a gradient through many layers does not underflow to zero."""
    x = torch.randn(1, n, d, dtype=torch.float64, requires_grad=True)  # (1, n, d)
    h = x
    for i in range(max_layers):
        h = make(i).double()(h)  # (1, n, d)
        (g,) = torch.autograd.grad(h[0, n - 1].sum(), x, retain_graph=True)  # (1, n, d)
        if bool((g[0, 0] != 0).any()):
            return i + 1
    return None


def expected_path(kind: str, n: int, kernel: int, radius: int) -> int:
    """Table 1's maximum path length, in layers, from position 0 to n-1: one layer of a
    recurrent (its path runs through n-1 steps instead) or self-attention layer; a causal
    kernel-k conv reaches k-1 positions further back per layer, a dilated stack k^L - 1 after
    L layers, a radius-r window r positions per layer."""
    if kind in ("recurrent", "self_attention"):
        return 1
    if kind == "conv_contiguous":
        return -(-(n - 1) // (kernel - 1))
    if kind == "conv_dilated":
        layers = 0
        while kernel**layers < n:
            layers += 1
        return layers
    if kind == "restricted":
        return -(-(n - 1) // radius)
    raise ValueError(f"unknown stack {kind!r}; choose one of {STACKS}")


def recurrent_steps(d: int, n: int) -> float:
    """Sequential steps on the recurrent path from x_0 to y_{n-1}, from the autograd graph:
    (depth(n) - depth(1)) / (depth(2) - depth(1)), the depth one step adds."""
    layer = Recurrent(d)
    depths = [graph_depth(layer(torch.randn(1, m, d, requires_grad=True))) for m in (1, 2, n)]
    return (depths[2] - depths[0]) / (depths[1] - depths[0])


__all__ = [
    "LAYERS",
    "STACKS",
    "CausalConv",
    "Measured",
    "Recurrent",
    "SavedBytes",
    "SelfAttentionLayer",
    "expected_path",
    "flop_counter",
    "forward_flops",
    "graph_depth",
    "make_layer",
    "make_stack_layer",
    "measure",
    "mixing_flops",
    "path_length",
    "recurrent_steps",
    "split_flops",
]
