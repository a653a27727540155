"""Whole-model speed: training steps/s eager vs ``torch.compile``, and decoding sentences/s
(greedy and beam search), of a Transformer on toy-ko. ``attnkit bench --scenarios
train,decode``; the figures of docs/performance.md.

    train:   a "small" Transformer, batches of 64 toy-ko pairs: the median time of a full
             update (forward, loss, backward, clipping, Adam) over ``steps`` updates after
             a warm-up over every batch (compiled: every batch shape compiled before timing,
             as in a long run), compiled as ``attnkit train --compile`` compiles
    decode:  a "small" Transformer trained ``updates`` steps on toy-ko (fixed seed), then the
             test sentences decoded in batches of 64: greedy, and beam 5 (all sentences x beams
             in one batch); sentences/s, and the hypotheses (to check two builds agree)
    models:  attnkit's RNNsearch and Transformer against the same networks in plain PyTorch
             (bench/plain.py: a hand-written Bahdanau model, torch.nn.Transformer), same
             preset sizes, batches of toy-ko: median ms of a full update of each, timed
             back to back in one process, alternating which goes first, over ``repeats``
             rounds; the ratio plain ms / attnkit ms (>= 1: attnkit at least as fast).
             RNNsearch twice: as it trains (targets packed: no step after a target's end,
             models/packed.py) and over the padded targets, the plain model's positions
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

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
    compile: bool,
    steps: int = 30,
    warmup: int | None = None,
    batch_size: int = 64,
    seed: int = 0,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Median seconds of one training update of a small Transformer; with ``compile`` the
    model's forward is ``torch.compile``d in place with ``options`` (default: those of
    ``attnkit train --compile``, train/runtime.py). ``warmup`` untimed updates first (default:
    one per batch, so that no timed step compiles a new shape)."""
    from ..models import build_seq2seq
    from ..train.loop import loss_of
    from ..train.runtime import compile_options

    train, _, sv, tv = _toy_ko(batch_size * 8, 8, seed)
    data: list[Batch] = batches(train, sv, tv, batch_size)
    warmup = len(data) if warmup is None else warmup
    opts = compile_options("cpu") if options is None else options
    torch.manual_seed(seed)
    model = build_seq2seq("transformer", src_vocab=len(sv), tgt_vocab=len(tv), preset="small")
    if compile:  # reset: a second model's forward would reuse the graphs of the first
        torch._dynamo.reset()
        model.compile(options=opts)
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
        "options": opts if compile else None,
        "threads": torch.get_num_threads(),
        "steps": steps,
        "warmup": warmup,
        "batch_size": batch_size,
        "step_ms": 1000 * median,
        "steps_per_s": 1 / median,
        "warmup_s": first,
        "final_loss": float(loss.detach()),
    }


def _load_weights(model: torch.nn.Module, weights: str) -> bool:
    """``--decode-weights``: load the file into ``model`` (True), or check that it can be
    written after training (False, it does not exist yet); anything else is one line."""
    path = Path(weights)
    what = f"--decode-weights {weights}"
    if path.is_dir():
        raise ValueError(f"{what} is a folder; name a file (it is written after training)")
    if not path.exists():
        if not path.parent.is_dir():
            raise ValueError(f"{what}: no folder {path.parent}; create it or name another file")
        if not os.access(path.parent, os.W_OK):
            raise ValueError(f"{what}: cannot write in {path.parent}; name another file")
        return False
    try:
        state = torch.load(path, weights_only=True)
    except Exception as err:  # pickle, zip and torch errors: the file is not a state_dict
        first = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        raise ValueError(
            f"{what} is not a file of torch.save ({first}); delete it to train and save one"
        ) from None
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError, ValueError) as err:
        first = " ".join(str(err).split())[:200]
        raise ValueError(
            f"{what} does not hold the bench's small Transformer ({first}); delete it to "
            "train and save one"
        ) from None
    return True


def _save_weights(model: torch.nn.Module, weights: str) -> None:
    try:
        torch.save(model.state_dict(), weights)
    except (RuntimeError, OSError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"--decode-weights {weights}: cannot write it ({first})") from None


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
    from ..models import build_seq2seq
    from ..train.loop import loss_of

    train, test_set, sv, tv = _toy_ko(4000, test, seed)
    torch.manual_seed(seed)
    model = build_seq2seq("transformer", src_vocab=len(sv), tgt_vocab=len(tv), preset="small")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    done, epoch = (updates, 0) if weights and _load_weights(model, weights) else (0, 0)
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
            _save_weights(model, weights)
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


def _plain_twin(model: torch.nn.Module) -> torch.nn.Module:
    """The plain PyTorch network of the same sizes as an attnkit RNNSearch or Transformer."""
    from ..models.rnnsearch import RNNSearchConfig
    from .plain import PlainBahdanau, PlainTransformer

    c: Any = model.config
    if isinstance(c, RNNSearchConfig):
        return PlainBahdanau(
            c.src_vocab, c.tgt_vocab, c.emb, c.enc_hidden, c.dec_hidden, c.attn_hidden, c.maxout
        )
    return PlainTransformer(
        c.src_vocab, c.tgt_vocab, c.dim, c.heads, c.enc_layers, c.dec_layers, c.ff, c.dropout
    )


# a row of the models scenario -> (the attnkit model it builds, its loss's ``packed``: None
# the default, packed targets on the CPU; False the padded loop, the plain model's work)
ROWS: dict[str, tuple[str, bool | None]] = {
    "rnnsearch": ("rnnsearch", None),
    "rnnsearch-padded": ("rnnsearch", False),
    "transformer": ("transformer", None),
}


def _update(
    model: torch.nn.Module, opt: torch.optim.Optimizer, b: Batch, plain: bool,
    packed: bool | None = None,
) -> float:  # fmt: skip
    """One timed training update (forward, cross-entropy, backward, clipping, Adam): seconds.
    ``packed=False``: an attnkit recurrent model's loss over the padded targets."""
    from ..train.loop import loss_of

    start = time.perf_counter()
    if plain:
        logits = model(b.src, b.src_len, b.tgt_in)  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), b.tgt_out.flatten(), ignore_index=0)
    elif packed is None:
        loss, _ = loss_of(model, b)  # type: ignore[arg-type]
    else:
        own: Any = model.training_loss  # RNNsearch, Luong (models/latent.py)
        loss = own(b.src, b.src_len, b.tgt_in, b.tgt_out, packed=packed)[0]
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return time.perf_counter() - start


def versus_speed(
    names: tuple[str, ...] = ("rnnsearch", "rnnsearch-padded", "transformer"),
    preset: str = "base",
    steps: int = 5,
    warmup: int = 2,
    repeats: int = 5,
    batch_size: int = 64,
    seed: int = 0,
    log: Log = print,
) -> dict[str, Any]:
    """Training speed of attnkit's models against plain PyTorch twins of the same sizes.
    Per model and round: ``steps`` timed updates of each (after ``warmup`` untimed ones in
    the first round), back to back on the same batches, the order alternating by round;
    ms is the median update, ratio = plain ms / attnkit ms, reported per round and as the
    median over rounds. ``names``: rows of ``ROWS``; "rnnsearch-padded" times RNNsearch
    over the padded targets, the same positions as the plain model (the default skips the
    positions after each target's end, models/packed.py)."""
    from ..models import build_seq2seq

    train, _, sv, tv = _toy_ko(batch_size * 8, 8, seed)
    data: list[Batch] = batches(train, sv, tv, batch_size, random.Random(seed))
    rows = []
    for name in names:
        if name not in ROWS:
            raise ValueError(f"models row {name!r}: choose from {', '.join(ROWS)}")
        built, packed = ROWS[name]
        torch.manual_seed(seed)
        ours = build_seq2seq(built, src_vocab=len(sv), tgt_vocab=len(tv), preset=preset)
        torch.manual_seed(seed)
        plain = _plain_twin(ours)
        pair = {"attnkit": ours, "plain": plain}
        opts = {k: torch.optim.Adam(m.parameters(), lr=1e-4) for k, m in pair.items()}
        for k, m in pair.items():
            m.train()
            for i in range(warmup):
                _update(m, opts[k], data[i % len(data)], k == "plain", packed)
        rounds = []
        for r in range(repeats):
            ms: dict[str, float] = {}
            for k in ("attnkit", "plain") if r % 2 == 0 else ("plain", "attnkit"):
                took = [_update(pair[k], opts[k], data[(r * steps + i) % len(data)],
                                k == "plain", packed) for i in range(steps)]  # fmt: skip
                ms[k] = 1000 * statistics.median(took)
            rounds.append({**ms, "ratio": ms["plain"] / ms["attnkit"]})
            log(f"models: {name} round {r + 1}: attnkit {ms['attnkit']:.1f} ms, plain "
                f"{ms['plain']:.1f} ms, ratio {rounds[-1]['ratio']:.2f}")  # fmt: skip
        rows.append({
            "model": name,
            "preset": preset,
            "plain": type(plain).__name__,
            "params": {k: sum(p.numel() for p in m.parameters()) for k, m in pair.items()},
            "rounds": rounds,
            "attnkit_ms": statistics.median(x["attnkit"] for x in rounds),
            "plain_ms": statistics.median(x["plain"] for x in rounds),
            "ratio": statistics.median(x["ratio"] for x in rounds),
        })  # fmt: skip
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {"names": list(names), "preset": preset, "batch_size": batch_size, "steps": steps,
            "warmup": warmup, "repeats": repeats, "seed": seed, "load": list(load),
            "rows": rows}  # fmt: skip


__all__ = ["decode_speed", "train_speed", "versus_speed"]
