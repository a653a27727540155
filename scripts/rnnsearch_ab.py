"""Interleaved A/B of RNNsearch's training update in one process: another checkout's attnkit
(copied to a temporary folder and imported as ``attnkit_before``), this one, and
``PlainBahdanau`` (bench/plain.py), ``base`` preset, the same weights for both attnkit models,
toy-ko batches of 64, one thread. Each round runs one update (forward, cross-entropy,
backward, clipping, Adam) of each model on the same batch, the order rotating; the figures
are medians of the per-round paired ratios (interquartile range), wall and thread CPU time.

    PYTHONPATH=src python scripts/rnnsearch_ab.py --before ../before/src --rounds 300
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from typing import Any

import torch
import torch.nn.functional as F
from _ab import import_before  # scripts/_ab.py: the other checkout, imported beside this one

from attnkit.bench.models import _plain_twin, _toy_ko
from attnkit.data.batching import batches
from attnkit.models import build_model


def _quartiles(xs: list[float]) -> str:
    xs, n = sorted(xs), len(xs)
    return f"{statistics.median(xs):.3f} ({xs[n // 4]:.3f}-{xs[3 * n // 4]:.3f})"


def report(rec: dict[str, list[tuple[float, float]]]) -> list[str]:
    """Per clock (wall, thread CPU): each model's median seconds per update, then the paired
    ratios x / y of the same rounds (above 1: y is faster) as median (interquartile range)."""
    lines = []
    for i, clock in enumerate(("wall", "thread CPU")):
        ms = {k: round(1000 * statistics.median(x[i] for x in v), 1) for k, v in rec.items()}
        lines.append(f"{clock}: median ms per update {ms}")
        for x, y in (("before", "after"), ("plain", "after"), ("plain", "before")):
            ratio = [u[i] / w[i] for u, w in zip(rec[x], rec[y], strict=True)]
            lines.append(f"  {x} / {y}: {_quartiles(ratio)}")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="the other checkout's src folder")
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--preset", default="base")
    a = p.parse_args()
    torch.set_num_threads(1)
    train, _, sv, tv = _toy_ko(64 * 8, 8, 0)
    data = batches(train, sv, tv, 64, random.Random(0))
    torch.manual_seed(0)
    after = build_model("rnnsearch", src_vocab=len(sv), tgt_vocab=len(tv), preset=a.preset)
    before = import_before(a.before, "models").build_model(
        "rnnsearch", src_vocab=len(sv), tgt_vocab=len(tv), preset=a.preset
    )  # fmt: skip
    before.load_state_dict(after.state_dict())
    torch.manual_seed(0)
    models = {"before": before, "after": after, "plain": _plain_twin(after)}
    opts = {k: torch.optim.Adam(m.parameters(), lr=1e-4) for k, m in models.items()}

    def update(k: str, b: Any) -> tuple[float, float]:
        m, w0, c0 = models[k], time.perf_counter(), time.thread_time()
        if k == "plain":
            logits = m(b.src, b.src_len, b.tgt_in)  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), b.tgt_out.flatten(), ignore_index=0)
        else:
            loss, _ = m.training_loss(b.src, b.src_len, b.tgt_in, b.tgt_out, 0.0)
        opts[k].zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opts[k].step()
        return time.perf_counter() - w0, time.thread_time() - c0

    for m in models.values():
        m.train()
    for i in range(3):
        for k in models:
            update(k, data[i % len(data)])
    order, rec = list(models), {k: list[tuple[float, float]]() for k in models}
    for r in range(a.rounds):
        for k in order[r % 3 :] + order[: r % 3]:
            rec[k].append(update(k, data[r % len(data)]))
    print(f"load {os.getloadavg()}, {a.rounds} rounds")
    print("\n".join(report(rec)))


if __name__ == "__main__":
    main()
