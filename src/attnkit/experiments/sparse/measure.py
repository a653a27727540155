"""What the sparse experiment measures: test bpc of each trained arm at length n, and the
cost of one attention (``attnkit.attend``, forward + backward) by alignment and length n.

The cost: queries, keys and values (1, H, n, Dh) with gradients, the arm's alignment with
l = round(√n), ``need_weights=False`` (the factorised and sliding kernels answer, the dense
causal alignment takes the reference path); the activation memory is the bytes of the
distinct storages autograd saves for backward beyond q, k, v themselves, the time the
forward + backward wall clock (one warm-up pass, then ``repeats`` timed)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch

from ...bench.measure import SavedBytes
from ...core import attend
from ...registry import build_alignment
from ..pool import history, lm_data
from .config import ARMS, SparseConfig, stride_of


def layer_cost(arm: str, n: int, heads: int, head_dim: int, repeats: int) -> dict[str, Any]:
    """One attention of ``arm`` at length n: saved bytes and ``repeats`` forward+backward
    times (seconds)."""
    align = build_alignment(ARMS[arm], head_dim, None if arm == "dense" else stride_of(n))
    gen = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(1, heads, n, head_dim, generator=gen).requires_grad_()
               for _ in range(3))  # fmt: skip

    def step() -> int:
        saved = SavedBytes([q, k, v])
        with saved:
            out = attend(q, k, v, align=align, need_weights=False).context  # (1, H, n, Dh)
        out.sum().backward()
        return saved.total

    step()  # warm-up
    times, saved = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        saved = step()
        times.append(time.perf_counter() - t0)
    return {"saved_bytes": saved, "seconds": times}


def cost_grid(cfg: SparseConfig) -> dict[str, dict[str, dict[str, Any]]]:
    """{arm: {n: layer_cost}} over the cost grid, with the model's heads and head width."""
    return {arm: {str(n): layer_cost(arm, n, cfg.heads, cfg.dim // cfg.heads, cfg.repeats)
                  for n in cfg.n_list} for arm in cfg.arm_list}  # fmt: skip


def valid_curve(run: Path) -> list[float]:
    """A run's learning curve: its valid bpc at each validation (one per epoch), from
    ``run/history.json`` (valid loss in nats per character / ln 2)."""
    return [round(row["valid_loss"] / math.log(2), 4) for row in history(run)]


def measure_seed(cfg: SparseConfig, seed: int, out: Path) -> dict[str, Any]:
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


__all__ = ["SavedBytes", "cost_grid", "layer_cost", "measure_seed", "valid_curve"]
