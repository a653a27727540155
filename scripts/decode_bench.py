"""Greedy decoding speed of a tiny Transformer LM with three self-attention caches: the tuple
grown by ``torch.cat`` at every token (``SelfAttention.step``'s earlier form, an O(t) copy
per token and layer), ``attnkit.KVCache`` preallocated to the length and written in place,
and a sliding ``KVCache`` (window 256, 4 sinks: O(w) memory, attention over at most 260
keys). Same weights and tokens for all three; the arms run alternately, best of ``--repeats``,
one thread. Prints a markdown table (tokens/s, cache memory) and writes it with the raw
figures under ``--out``.

    PYTHONPATH=src python scripts/decode_bench.py --lengths 256 1024 4096 \\
        --out docs/perf/decode
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from attnkit import KVCache
from attnkit.models import build_model
from attnkit.models.lm import sinusoid_at

ARMS = ("torch.cat", "KVCache", "KVCache window 256+4")


def new_caches(lm: Any, arm: str, length: int, like: torch.Tensor) -> list[Any]:
    """One cache per layer for ``arm``."""
    caches: list[Any] = []
    for layer in lm.layers:
        attn = layer.attn
        if arm == "torch.cat":
            caches.append(attn.empty_cache(1, like))
        elif arm == "KVCache":
            caches.append(attn.new_cache(1, like, length))
        else:
            caches.append(attn.new_cache(1, like, window=256, sinks=4))
    return caches


def greedy(lm: Any, arm: str, length: int) -> tuple[float, list[int], int]:
    """Decode ``length`` tokens greedily from token 1: seconds, the tokens, the caches'
    bytes at the end."""
    dim = lm.config.dim
    like = lm.emb.weight
    caches = new_caches(lm, arm, length, like)
    token, tokens = torch.tensor([1]), []
    start = time.perf_counter()
    with torch.no_grad():
        for t in range(length):
            x = lm.emb(token[:, None]) * math.sqrt(dim) + sinusoid_at(t, dim)  # (1, 1, D)
            for i, layer in enumerate(lm.layers):
                h = layer.res1.inner(x)
                result, caches[i] = layer.attn.step(h, caches[i])  # cat: a new tuple
                x = layer.res1.merge(x, result.context)
                x, _ = layer.res2(x, layer.ffn)
            logits = F.linear(lm.norm(x[:, 0]), lm.emb.weight, lm.out_bias)  # (1, V)
            token = logits.argmax(-1)
            tokens.append(int(token))
    seconds = time.perf_counter() - start
    held = sum(_bytes(c) for c in caches)
    return seconds, tokens, held


def _bytes(cache: Any) -> int:
    if isinstance(cache, KVCache):
        return cache.k.numel() * cache.k.element_size() + cache.v.numel() * cache.v.element_size()
    return sum(t.numel() * t.element_size() for t in cache)


def measure(lengths: list[int], repeats: int, kv_heads: int | None,
            log: Callable[[str], None] = print) -> list[dict[str, Any]]:  # fmt: skip
    """Every arm at every length, alternately, best of ``repeats``."""
    torch.manual_seed(0)
    lm = build_model("transformer-lm", src_vocab=256, tgt_vocab=256, preset="small",
                     kv_heads=kv_heads, dropout=0.0).eval()  # fmt: skip
    rows = []
    for length in lengths:
        best = {arm: math.inf for arm in ARMS}
        tokens: dict[str, list[int]] = {}
        held: dict[str, int] = {}
        for _ in range(repeats):
            for arm in ARMS:
                seconds, tokens[arm], held[arm] = greedy(lm, arm, length)
                best[arm] = min(best[arm], seconds)
        row = {"tokens": length, **{f"{arm} tok/s": length / best[arm] for arm in ARMS},
               **{f"{arm} cache MiB": held[arm] / 2**20 for arm in ARMS},
               "same tokens (cat, KVCache)": tokens["torch.cat"] == tokens["KVCache"]}  # fmt: skip
        log(f"t={length}: " + ", ".join(f"{a} {row[f'{a} tok/s']:.0f} tok/s" for a in ARMS))
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table of ``measure``'s rows; KVCache / torch.cat as a ratio."""
    head = ["tokens", *(f"{a} tok/s" for a in ARMS), "KVCache / torch.cat",
            *(f"{a} cache MiB" for a in ARMS), "same tokens"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["tokens"]), *(f"{r[f'{a} tok/s']:.0f}" for a in ARMS),
                 f"{r['KVCache tok/s'] / r['torch.cat tok/s']:.2f}",
                 *(f"{r[f'{a} cache MiB']:.2f}" for a in ARMS),
                 "yes" if r["same tokens (cat, KVCache)"] else "no"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--kv-heads", type=int, default=None)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = measure(args.lengths, args.repeats, args.kv_heads)
    lines = table(rows)
    print("\n".join(lines))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        meta = {"torch": torch.__version__, "machine": platform.machine(),
                "preset": "transformer-lm small (dim 64, 4 heads, 2 layers)",
                "kv_heads": args.kv_heads, "threads": 1, "repeats": args.repeats}  # fmt: skip
        (args.out / "decode_bench.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                               indent=1))  # fmt: skip
        (args.out / "decode_bench.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
