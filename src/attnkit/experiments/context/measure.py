"""What the context experiment measures on a trained model: the bits of each test segment
(Transformer-XL with its memory carried, at any memory length; the vanilla LM recomputing
each character's context from scratch, a sliding window), and the time per predicted
character of both ways of evaluating at a context length C.

Legend: N test characters, L segment length, C context length, W windows in a batch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ...data.lm_text import Segment
from ...data.vocab import Vocab
from ...eval.lm import sliding_nll
from ...tasks.lm import batches, run, unigram_bits

LN2 = math.log(2)


@torch.no_grad()
def xl_segment_bits(model: Any, segs: Sequence[Segment], vocab: Vocab, streams: int,
                    memory: int) -> list[float]:  # fmt: skip
    """Bits per character of each segment, the text read in ``streams`` streams with the
    memory carried (``memory`` hidden states kept per layer)."""
    model.eval()
    total = [0.0] * len(segs)
    count = [0] * len(segs)
    for b in batches(segs, vocab, vocab, streams, None):
        out = run(model, b, memory)
        nll = F.cross_entropy(out.logits.transpose(1, 2), b.targets, ignore_index=0,
                              reduction="none")  # (B, L) fmt: skip
        for row, i in enumerate(b.index):
            total[i] += float(nll[row].sum())
            count[i] += int((b.targets[row] != 0).sum())
    return [t / c / LN2 for t, c in zip(total, count, strict=True)]


@torch.no_grad()
def sliding_segment_bits(model: Any, text: str, vocab: Vocab, context: int, segment: int
                         ) -> list[float]:  # fmt: skip
    """``sliding_nll`` of ``text`` as bits per character of each segment of ``segment``
    characters (segment k predicts characters kL + 1 .. kL + L, as ``lm_text.segments``)."""
    model.eval()
    ids = torch.tensor(vocab.encode(list(text), eos=False))  # (N,)
    nats = sliding_nll(model, ids, min(context, len(ids) - 1))  # (N-1,)
    return [float(part.mean()) / LN2 for part in nats.split(segment)]


@torch.no_grad()
def time_per_char(model_xl: Any, model_lm: Any, ids: torch.Tensor, context: int, chars: int
                  ) -> tuple[float, float]:  # fmt: skip
    """Seconds per predicted character at context length C of (the vanilla LM recomputing
    each character's C-character window, Transformer-XL reading segments of C with a memory
    of C): ``chars`` characters of the vanilla way; XL reads ⌈chars / C⌉ segments after one
    untimed segment that fills its memory. ids (N,) with N >= 2C + 1."""
    model_xl.eval()
    model_lm.eval()
    windows = ids[: chars + context - 1].unfold(0, context, 1)[:chars]  # (chars, C)
    model_lm(windows[:32])  # warm-up, not timed (first-call allocations)
    t0 = time.perf_counter()
    for s in range(0, windows.shape[0], 32):
        model_lm(windows[s : s + 32])
    vanilla = (time.perf_counter() - t0) / windows.shape[0]
    k = max(1, math.ceil(chars / context))
    text = ids[: (k + 1) * context].view(1, -1)  # (1, (k + 1) C)
    mems = model_xl(text[:, :context], memory=context).mems  # fills the memory: not timed
    t0 = time.perf_counter()
    for j in range(1, k + 1):
        mems = model_xl(text[:, j * context : (j + 1) * context], mems, memory=context).mems
    xl = (time.perf_counter() - t0) / (k * context)
    return vanilla, xl


__all__ = ["sliding_nll", "sliding_segment_bits", "time_per_char", "unigram_bits",
           "xl_segment_bits"]  # fmt: skip
