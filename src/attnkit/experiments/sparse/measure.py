"""What the sparse experiment measures: test bpc of each trained arm at length n, and the
cost of one attention (``attnkit.attend``, forward + backward) by alignment and length n.

The cost: queries, keys and values (1, H, n, Dh) with gradients, the arm's alignment with
l = round(√n), ``need_weights=False`` (the factorised and sliding kernels answer, the dense
causal alignment takes the reference path); the activation memory is the bytes of the
distinct storages autograd saves for backward beyond q, k, v themselves, the time the
forward + backward wall clock (one warm-up pass, then ``repeats`` timed)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import torch

from ...bench.measure import SavedBytes
from ...core import attend
from ...registry import STRIDED, build_alignment
from ..base import timed_steps
from ..pool import lm_data
from ..pool import valid_bpc_curve as valid_curve
from .config import ARMS, SparseConfig, stride_of


def layer_cost(arm: str, n: int, heads: int, head_dim: int, repeats: int, summary: int = 1
               ) -> dict[str, Any]:  # fmt: skip
    """One attention of ``arm`` at length n: saved bytes and ``repeats`` forward+backward
    times (seconds); ``summary``: the fixed pattern's c."""
    size = "stride" if ARMS[arm] in STRIDED else "window"  # a pattern's l, a window's radius
    align = build_alignment(ARMS[arm], head_dim,
                            **{size: None if arm == "dense" else stride_of(n)},
                            summary=summary if arm == "fixed" else None)  # fmt: skip
    gen = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(1, heads, n, head_dim, generator=gen).requires_grad_()
               for _ in range(3))  # fmt: skip

    def step() -> int:
        saved = SavedBytes([q, k, v])
        with saved:
            out = attend(q, k, v, align=align, need_weights=False).context  # (1, H, n, Dh)
        out.sum().backward()
        return saved.total

    return timed_steps(step, repeats)


def cost_grid(cfg: SparseConfig) -> dict[str, dict[str, dict[str, Any]]]:
    """{arm: {n: layer_cost}} over the cost grid, with the model's heads and head width, for
    every alignment (``ARMS``), trained or not: the cost claim is the strided and fixed
    patterns' whichever arms ``--arms`` trains."""
    return {arm: {str(n): layer_cost(arm, n, cfg.heads, cfg.dim // cfg.heads, cfg.repeats,
                                     cfg.summary)
                  for n in cfg.n_list} for arm in ARMS}  # fmt: skip


GIVEN = re.compile(r"this is ([a-z]{5})\.")  # where a record gives its name
ASKED = re.compile(r"ask ([a-z]{5})\.")  # where the name comes back


def copy_targets(text: str, length: int) -> list[int]:
    """The long-range structure of the generated text (data/lm_text.py): the indices t of the
    name letters of each "ask NAME." whose "this is NAME." stands in the same window of
    ``length`` characters (the windows of ``window_bits``: window w reads characters
    w·L .. w·L + L - 1 and predicts w·L + 1 .. w·L + L). Such a letter is predictable only by
    copying it from up to a few hundred characters back; without the copy it costs about
    log2(26) = 4.7 bits (the names are random letters). Whole windows only."""
    given = [(m.start(1), m.group(1)) for m in GIVEN.finditer(text)]
    end = (len(text) - 1) // length * length  # the last character a whole window predicts
    out: list[int] = []
    k = -1
    for m in ASKED.finditer(text):
        while k + 1 < len(given) and given[k + 1][0] < m.start(1):
            k += 1  # the record's header: the last name given before this "ask"
        if k < 0 or given[k][1] != m.group(1):
            continue
        out.extend(t for t in range(m.start(1), m.end(1))
                   if t <= end and given[k][0] >= (t - 1) // length * length)  # fmt: skip
    return out


@torch.no_grad()
def long_range_bits(model: torch.nn.Module, ids: torch.Tensor, targets: list[int], length: int,
                    batch: int = 4096) -> float:  # fmt: skip
    """Mean bits of the characters ``targets`` (``copy_targets``) under ``model`` reading
    ``ids`` (N,) in consecutive windows of ``length``, each from scratch (as ``window_bits``):
    character t is predicted at flat position t - 1. NaN when there is no target."""
    import torch.nn.functional as F

    if not targets:
        return math.nan
    windows = (ids.shape[0] - 1) // length
    inputs = ids[: windows * length].view(-1, length)  # (W, L)
    labels = ids[1 : windows * length + 1].view(-1, length)  # (W, L)
    was = model.training
    model.eval()
    rows = max(1, batch // length)
    nats = torch.cat([
        F.cross_entropy(model(inputs[s : s + rows]).logits.transpose(1, 2),
                        labels[s : s + rows], reduction="none")  # (W', L)
        for s in range(0, windows, rows)
    ]).reshape(-1)  # (W·L,)
    model.train(was)
    picked = nats[torch.tensor(targets) - 1].double()  # (T,)
    return float(picked.mean() / math.log(2))


def measure_seed(cfg: SparseConfig, seed: int, out: Path) -> dict[str, Any]:
    """Bits per test segment of each arm at length n (``tasks.lm.window_bits``: the test text
    cut into windows of n, each read from scratch) by its early-stopped weights (``best``:
    the lowest valid loss), its bits on the copied name letters (``copy_targets``), the
    unigram bpc, each arm's parameters and learning curve."""
    from ...data.lm_text import lm_texts
    from ...tasks.lm import unigram_bits, window_bits
    from ...train import checkpoint

    train, _, test = lm_texts(lm_data(cfg, seed, cfg.asks).spec())
    targets = copy_targets(test, cfg.segment)
    bits, names, params, curves = {}, {}, {}, {}
    for arm in cfg.arm_list:
        loaded = checkpoint.load(out / f"{arm}-s{seed}" / "best")
        ids = torch.tensor(loaded.tgt_vocab.encode(list(test), eos=False))  # (N,)
        bits[arm] = window_bits(loaded.model, ids, cfg.segment, cfg.segment)
        names[arm] = long_range_bits(loaded.model, ids, targets, cfg.segment)
        params[arm] = sum(p.numel() for p in loaded.model.parameters())
        curves[arm] = valid_curve(out / f"{arm}-s{seed}")
    return {"bits": bits, "name_bits": names, "copied_letters": len(targets),
            "unigram": unigram_bits(train, test), "parameters": params,
            "curves": curves}  # fmt: skip


__all__ = ["SavedBytes", "copy_targets", "cost_grid", "layer_cost", "long_range_bits",
           "measure_seed", "valid_curve"]
