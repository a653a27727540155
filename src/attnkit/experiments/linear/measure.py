"""What the linear experiment measures: (a) the cost of one causal attention (forward +
backward) against n, (b) the time per decoded token against its position t, (c) test bpc of
each trained arm at length n.

(a) queries, keys and values (1, H, n, d) with gradients: ``linear`` is ``attnkit.attend``
with the ``LinearScore`` (φ = elu + 1) and the ``ratio`` normaliser under the causal
alignment (the chunked prefix sums of ``attnkit.linear``); ``softmax`` is
``F.scaled_dot_product_attention(is_causal=True)``, the fused kernel; ``sliding`` is
``attend`` with a causal ``SlidingWindow(w)`` (its O(n·w) band kernel). The activation memory
is the bytes of the distinct storages autograd saves for backward beyond q, k, v; the time
the forward + backward wall clock (one warm-up pass, then ``repeats`` timed).

(b) an untrained ``transformer-lm`` of the experiment's sizes decodes one token at a time with
``TransformerLM.step``: linear attention as an RNN with a state of O(H·d²) per layer
(Katharopoulos et al. 2020, §3.4), softmax attention over a KV cache that holds every past
token; the time of each of ``decode_tokens`` steps from position t, and the elements of the
state each layer holds at t.

Legend: H heads, n positions, d head width, w look-back, t decoded position.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ...bench.measure import SavedBytes
from ...core import attend
from ...stages.alignment import CausalAlignment, SlidingWindow
from ...stages.kernels import LinearScore, ratio
from ..base import timed_steps
from ..pool import lm_data
from ..pool import valid_bpc_curve as valid_curve
from .config import LinearConfig

DECODED = ("linear", "softmax")  # the decoding comparison: the RNN against the KV cache
KERNELS = ("linear", "softmax", "sliding")
"""The attentions of the cost grid: linear (compared), softmax SDPA (compared), the sliding
window (reported)."""


def attention_of(kernel: str, window: int) -> Any:
    """q, k, v (1, H, n, d) -> the causal attention ``kernel``'s context (1, H, n, d)."""
    if kernel == "linear":
        score, align = LinearScore(), CausalAlignment()
        return lambda q, k, v: attend(q, k, v, score=score, normaliser=ratio, align=align,
                                      need_weights=False).context  # fmt: skip
    if kernel == "softmax":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if kernel == "sliding":
        band = SlidingWindow(window, causal=True)
        return lambda q, k, v: attend(q, k, v, align=band, need_weights=False).context
    raise ValueError(f"unknown kernel {kernel!r}; choose one of {KERNELS}")


def layer_cost(kernel: str, n: int, heads: int, head_dim: int, window: int,
               repeats: int) -> dict[str, Any]:  # fmt: skip
    """One causal attention ``kernel`` at length n: saved bytes and ``repeats`` forward +
    backward times (seconds)."""
    run = attention_of(kernel, window)
    gen = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(1, heads, n, head_dim, generator=gen).requires_grad_()
               for _ in range(3))  # fmt: skip

    def step() -> int:
        saved = SavedBytes([q, k, v])
        with saved:
            out = run(q, k, v)  # (1, H, n, d)
        out.sum().backward()
        for x in (q, k, v):
            x.grad = None
        return saved.total

    return timed_steps(step, repeats)


def cost_grid(cfg: LinearConfig) -> dict[str, dict[str, dict[str, Any]]]:
    """{kernel: {n: layer_cost}} over the cost grid."""
    return {kernel: {str(n): layer_cost(kernel, n, cfg.cost_heads, cfg.cost_head_dim,
                                        cfg.window, cfg.repeats) for n in cfg.n_list}
            for kernel in KERNELS}  # fmt: skip


def _state_elements(state: Any) -> int:
    """Elements a layer's decoding state holds: a LinearState's S and z, or a KVCache's
    keys and values up to the positions written (its allocation may run ahead)."""
    if hasattr(state, "kv"):
        return int(state.kv.numel() + state.k_sum.numel())
    written = int(state.length) if hasattr(state, "length") else state.k.shape[-2]
    per = state.k.shape[0] * state.k.shape[1] * (state.k.shape[-1] + state.v.shape[-1])
    return int(per * written)


@torch.no_grad()
def decode_cost(cfg: LinearConfig) -> dict[str, dict[str, dict[str, Any]]]:
    """{attention: {t: {"seconds": the times of the ``decode_tokens`` steps from t, "state":
    elements of the first layer's state after t}}} for untrained transformer-lms of the
    experiment's sizes (softmax and linear attention, seeded), decoding one sequence token by
    token in lockstep (each position stepped by both before the next), so that a change in
    the machine's load falls on both alike."""
    from ...models.lm import TransformerLM, TransformerLMConfig

    models = {}
    for attention in DECODED:
        torch.manual_seed(cfg.seed)
        models[attention] = TransformerLM(TransformerLMConfig(
            32, 32, dim=cfg.dim, heads=cfg.heads, layers=cfg.layers, ff=cfg.ff, dropout=0.0,
            attention=attention)).eval()  # fmt: skip
    ts = cfg.t_list
    last = ts[-1] + cfg.decode_tokens
    ids = torch.randint(1, 32, (1, last), generator=torch.Generator().manual_seed(cfg.seed))
    timed = {t + i: str(t) for t in ts for i in range(cfg.decode_tokens)}
    out: dict[str, dict[str, dict[str, Any]]] = {
        a: {str(t): {"seconds": [], "state": 0} for t in ts} for a in DECODED}
    states: dict[str, Any] = dict.fromkeys(DECODED)
    for pos in range(last):
        for attention, model in models.items():
            t0 = time.perf_counter()
            _, states[attention] = model.step(ids[:, pos], states[attention], pos)
            seconds = time.perf_counter() - t0
            if pos in timed:
                out[attention][timed[pos]]["seconds"].append(seconds)
            if str(pos) in out[attention]:
                out[attention][str(pos)]["state"] = _state_elements(states[attention][0])
    return out


def measure_seed(cfg: LinearConfig, seed: int, out: Path) -> dict[str, Any]:
    """Bits per test segment of each arm at length n (``tasks.lm.window_bits``: the test text
    cut into windows of n, each read from scratch) by its early-stopped weights (``best``:
    the lowest valid loss), the unigram bpc, each arm's parameters and learning curve."""
    from ...data.lm_text import lm_texts
    from ...tasks.lm import unigram_bits, window_bits
    from ...train import checkpoint

    train, _, test = lm_texts(lm_data(cfg, seed).spec())
    bits, params, curves = {}, {}, {}
    for arm in cfg.arm_list:
        loaded = checkpoint.load(out / f"{arm}-s{seed}" / "best")
        ids = torch.tensor(loaded.tgt_vocab.encode(list(test), eos=False))  # (N,)
        bits[arm] = window_bits(loaded.model, ids, cfg.segment, cfg.segment)
        params[arm] = sum(p.numel() for p in loaded.model.parameters())
        curves[arm] = valid_curve(out / f"{arm}-s{seed}")
    return {"bits": bits, "unigram": unigram_bits(train, test), "parameters": params,
            "curves": curves}  # fmt: skip


__all__ = ["DECODED", "KERNELS", "attention_of", "cost_grid", "decode_cost", "layer_cost",
           "measure_seed", "valid_curve"]
