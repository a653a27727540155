"""Whole-model speed: training steps/s eager vs ``torch.compile``, and decoding sentences/s
(greedy and beam search), of a Transformer on toy-ko. ``attnkit bench --scenarios
train,decode``; the figures of docs/performance.md.

    train:   a "small" Transformer, batches of 64 toy-ko pairs: the median time of a full
             update (forward, loss, backward, clipping, Adam) over ``steps`` updates after
             ``warmup`` (compiled: after the shapes it meets were compiled)
    decode:  a "small" Transformer trained ``updates`` steps on toy-ko (fixed seed), then the
             test sentences decoded in batches of 64: greedy, and beam 5 (all sentences x beams
             in one batch); sentences/s, and the hypotheses (to check two builds agree)
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..data.batching import Batch, batches
from ..data.tasks import load_task
from ..data.vocab import Vocab

Log = Callable[[str], None]


def _toy_ko(train: int, test: int, seed: int = 0) -> tuple[list, list, Vocab, Vocab]:
    splits = load_task("toy-ko", seed=seed, train_size=train, valid_size=8, test_size=test)
    src = Vocab.build(e.src for e in splits.train)
    tgt = Vocab.build(e.tgt for e in splits.train)
    return splits.train, splits.test, src, tgt


def train_speed(
    compile: bool, steps: int = 30, warmup: int = 5, batch_size: int = 64, seed: int = 0
) -> dict[str, Any]:
    """Median seconds of one training update of a small Transformer; with ``compile`` the
    model's forward is ``torch.compile``d in place (as ``attnkit train --compile``)."""
    from ..models import build_model
    from ..train.loop import loss_of

    train, _, sv, tv = _toy_ko(batch_size * 8, 8, seed)
    data: list[Batch] = batches(train, sv, tv, batch_size)
    torch.manual_seed(seed)
    model = build_model("transformer", src_vocab=len(sv), tgt_vocab=len(tv), preset="small")
    if compile:
        model.compile()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    seconds, first = [], 0.0
    for i in range(warmup + steps):
        b = data[i % len(data)]
        start = time.perf_counter()
        loss, _ = loss_of(model, b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        took = time.perf_counter() - start
        if i < warmup:
            first += took
        else:
            seconds.append(took)
    median = statistics.median(seconds)
    return {
        "compile": compile,
        "steps": steps,
        "batch_size": batch_size,
        "step_ms": 1000 * median,
        "steps_per_s": 1 / median,
        "warmup_s": first,
        "final_loss": float(loss.detach()),
    }


def decode_speed(
    beams: tuple[int, ...] = (1, 5),
    updates: int = 300,
    test: int = 256,
    batch_size: int = 64,
    repeats: int = 3,
    seed: int = 0,
    log: Log = print,
    weights: str = "",
) -> dict[str, Any]:
    """Sentences/s of greedy and beam search with a small Transformer trained on toy-ko for
    ``updates`` seeded steps (the best of ``repeats`` timings), and the hypotheses.
    ``weights``: a state_dict file, loaded when it exists, else written after training (so
    two builds of attnkit decode with the very same parameters)."""
    from ..decode.search import decode
    from ..models import build_model
    from ..train.loop import loss_of

    train, test_set, sv, tv = _toy_ko(4000, test, seed)
    torch.manual_seed(seed)
    model = build_model("transformer", src_vocab=len(sv), tgt_vocab=len(tv), preset="small")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    done, epoch = (updates, 0) if weights and Path(weights).exists() else (0, 0)
    if done:
        model.load_state_dict(torch.load(weights))
    while done < updates:  # a fixed number of seeded updates: the same model in any build
        for b in batches(train, sv, tv, 64, random.Random(seed * 1000 + epoch))[: updates - done]:
            loss, _ = loss_of(model, b)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            done += 1
        epoch += 1
        if weights:
            torch.save(model.state_dict(), weights)
    log(f"decode: a small Transformer after {updates} updates")
    model.eval()
    test_batches = batches(test_set, sv, tv, batch_size)
    rows = []
    for beam in beams:
        best, hyps = float("inf"), list[list[int]]()
        for _ in range(repeats):
            hyps = []
            start = time.perf_counter()
            for b in test_batches:
                hyps.extend(decode(model, b.src, b.src_len, beam=beam).tokens)
            best = min(best, time.perf_counter() - start)
        rows.append({"beam": beam, "sentences": len(test_set), "seconds": best,
                     "sentences_per_s": len(test_set) / best, "hypotheses": hyps})  # fmt: skip
        log(f"decode: beam {beam}: {len(test_set) / best:.1f} sentences/s")
    return {"updates": updates, "rows": rows}


__all__ = ["decode_speed", "train_speed"]
