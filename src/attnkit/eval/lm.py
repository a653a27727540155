"""Language-model evaluation shared by the experiments: the vanilla sliding-window
evaluation of Al-Rfou et al. (2018), each character predicted from a window of the characters
before it, computed from scratch.

Legend: N characters, C context length, W windows in a batch.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def sliding_nll(model: Any, ids: torch.Tensor, context: int, batch: int = 256) -> torch.Tensor:
    """The vanilla evaluation (Al-Rfou et al. 2018; Dai 2019, §3.2 "evaluation"): character t
    predicted from the ``context`` characters before it, each window computed from scratch.
    ids (N,) -> nats of characters 1 .. N-1 (N-1,): characters 1 .. C-1 from the first
    window's prefix (all the context they have), each later one from its own full window."""
    first = model(ids[None, :context]).logits[0]  # (C, V): predicts characters 1 .. C
    out = [F.cross_entropy(first[:-1], ids[1:context], reduction="none")]  # (C-1,)
    windows = ids[:-1].unfold(0, context, 1)  # (N-C, C): window s predicts character s + C
    targets = ids[context:]  # (N-C,)
    for s in range(0, windows.shape[0], batch):
        logits = model(windows[s : s + batch]).logits[:, -1]  # (W, V)
        out.append(F.cross_entropy(logits, targets[s : s + batch], reduction="none"))
    return torch.cat(out)  # (N-1,)


__all__ = ["sliding_nll"]
