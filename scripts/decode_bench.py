"""Greedy decoding speed of a tiny Transformer LM with five self-attention caches: the tuple
grown by ``torch.cat`` at every token (``SelfAttention.step``'s earlier form, an O(t) copy
per token and layer), ``attnkit.KVCache`` preallocated to the length and written in place,
a sliding ``KVCache`` (window 256, 4 sinks: O(w) memory, attention over at most 260 keys),
and Hugging Face's ``DynamicCache`` (torch.cat per layer) and ``StaticCache`` (preallocated
to the length, ``index_copy_``). Same weights, projections and attention for every arm; only
the cache differs. The full caches must give the same tokens (the table says so per row).

Timing: the arms take turns every ``--chunk`` tokens (each keeps its own state), so that
the load of a shared machine falls on all of them alike; each chunk is timed in the
decoding thread's CPU time (``time.thread_time``: time spent waiting for a core is not
counted) and the best of ``--repeats`` runs is kept per chunk; tokens/s = tokens / the sum
of the best chunks. One thread. Prints a markdown table (tokens/s, cache memory) and writes
it with the raw figures and the load average under ``--out``.

    PYTHONPATH=src python scripts/decode_bench.py --lengths 256 1024 4096 8192 \\
        --repeats 3 --out docs/perf/decode
"""

from __future__ import annotations

import argparse
import json
import math
import os
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
from attnkit.stages.alignment import Alignment, CausalAlignment

try:
    from transformers import DynamicCache, PretrainedConfig, StaticCache
except ImportError:  # the Hugging Face arms need it; the others do not
    DynamicCache = PretrainedConfig = StaticCache = None

WINDOW, SINKS = 256, 4
SLIDING = f"KVCache window {WINDOW}+{SINKS}"
ATTNKIT_ARMS = ("torch.cat", "KVCache", SLIDING)
HF_ARMS = ("HF DynamicCache", "HF StaticCache")
FULL_ARMS = ("torch.cat", "KVCache", *HF_ARMS)  # attend every token so far: the same tokens
EVERY_KEY = Alignment()  # a cached step attends every key it holds, as SelfAttention.step


def arms(log: Callable[[str], None] = print) -> tuple[str, ...]:
    """The arms this environment can run: the Hugging Face ones need transformers."""
    if DynamicCache is None:
        log("transformers is not importable: the HF DynamicCache / StaticCache arms are "
            "skipped (pip install transformers to run them)")  # fmt: skip
        return ATTNKIT_ARMS
    return ATTNKIT_ARMS + HF_ARMS


class Decoder:
    """One arm's greedy decoding from token 1, advanced a chunk at a time: its caches, the
    last token, the tokens so far."""

    def __init__(self, lm: Any, arm: str, length: int) -> None:
        self.lm, self.arm, self.t = lm, arm, 0
        self.token = torch.tensor([1])
        self.tokens: list[int] = []
        like, layers = lm.emb.weight, lm.layers
        self.caches: list[Any] = []
        self.hf: Any = None
        if arm == "torch.cat":
            self.caches = [layer.attn.empty_cache(1, like) for layer in layers]
        elif arm == "KVCache":
            self.caches = [layer.attn.new_cache(1, like, length) for layer in layers]
        elif arm == SLIDING:
            self.caches = [layer.attn.new_cache(1, like, window=WINDOW, sinks=SINKS)
                           for layer in layers]  # fmt: skip
        elif arm == "HF DynamicCache":
            self.hf = DynamicCache()
        elif arm == "HF StaticCache":
            config = PretrainedConfig(num_hidden_layers=len(layers))
            self.hf = StaticCache(config=config, max_cache_len=length)
        else:
            raise ValueError(f"unknown arm {arm!r}; choose from {ATTNKIT_ARMS + HF_ARMS}")

    def advance(self, n: int) -> tuple[float, float]:
        """Decode the next ``n`` tokens: (CPU seconds of this thread, wall seconds)."""
        lm, dim = self.lm, self.lm.config.dim
        cpu, wall = time.thread_time(), time.perf_counter()
        with torch.no_grad():
            for _ in range(n):
                t = self.t
                x = lm.emb(self.token[:, None]) * math.sqrt(dim) + sinusoid_at(t, dim)  # (1, 1, D)
                at = None if self.hf is None else torch.tensor([t])  # HF's cache_position
                for i, layer in enumerate(lm.layers):
                    h = layer.res1.inner(x)
                    if self.hf is None:
                        result, self.caches[i] = layer.attn.step(h, self.caches[i])
                    else:
                        result = self._hf_step(layer.attn, h, i, at)
                    x = layer.res1.merge(x, result.context)
                    x, _ = layer.res2(x, layer.ffn)
                logits = F.linear(lm.norm(x[:, 0]), lm.emb.weight, lm.out_bias)  # (1, V)
                self.token = logits.argmax(-1)
                self.tokens.append(int(self.token))
                self.t = t + 1
        return time.thread_time() - cpu, time.perf_counter() - wall

    def _hf_step(self, attn: Any, h: torch.Tensor, i: int, at: torch.Tensor) -> Any:
        """``SelfAttention.step`` with a Hugging Face cache: the same checks, projection and
        attention, the keys and values kept by ``cache.update(k, v, layer)``."""
        if not isinstance(attn.align, CausalAlignment) or h.dim() != 3 or h.shape[1] != 1:
            raise ValueError("the HF arms decode causal self-attention one token at a time")
        if not attn._fusable():  # step() checks it at every call too: the same work
            raise ValueError("the HF arms use the fused q, k, v projection of plain layers")
        q, k_new, v_new = attn.project_qkv(h)  # (1, H|Hkv, 1, Dh)
        k, v = self.hf.update(k_new, v_new, i, {"cache_position": at})  # (1, Hkv, T, Dh)
        if self.arm == "HF StaticCache":  # it returns all its slots: attend the filled ones
            k, v = k[:, :, : self.t + 1], v[:, :, : self.t + 1]
        return attn.attend_heads(q, k, v, EVERY_KEY, None, False)

    def cache_bytes(self) -> int:
        """The bytes the caches hold now."""
        if self.hf is not None:
            pairs = [(layer.keys, layer.values) for layer in self.hf.layers]
        else:
            pairs = [(c.k, c.v) if isinstance(c, KVCache) else c for c in self.caches]
        return sum(x.numel() * x.element_size() for pair in pairs for x in pair)


def build_lm(kv_heads: int | None) -> Any:
    """The small Transformer LM of every arm (seed 0); its attention has no position stage
    (sinusoids are added to the embeddings), so every arm attends alike."""
    torch.manual_seed(0)
    lm = build_model("transformer-lm", src_vocab=256, tgt_vocab=256, preset="small",
                     kv_heads=kv_heads, dropout=0.0).eval()  # fmt: skip
    assert all(layer.attn.position is None for layer in lm.layers)
    return lm


def measure(lengths: list[int], repeats: int, kv_heads: int | None,
            log: Callable[[str], None] = print, chunk: int = 64,
            names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Every arm at every length, taking turns every ``chunk`` tokens; per chunk the best
    of ``repeats`` runs (CPU time). A row per length: tokens/s, the best whole run's wall
    tokens/s, cache MiB, and whether the full caches gave torch.cat's tokens."""
    names = arms(log) if names is None else names
    lm = build_lm(kv_heads)
    rows = []
    for length in lengths:
        starts = list(range(0, length, chunk))
        cpu = {a: [[math.inf] * len(starts) for _ in range(repeats)] for a in names}
        wall = {a: [0.0] * repeats for a in names}
        for r in range(repeats):
            decoders = {a: Decoder(lm, a, length) for a in names}
            for c, start in enumerate(starts):
                n = min(chunk, length - start)
                k = (c + r) % len(names)  # a different arm goes first each chunk
                for a in names[k:] + names[:k]:
                    cpu[a][r][c], seconds = decoders[a].advance(n)
                    wall[a][r] += seconds
        best = {a: sum(min(run[c] for run in cpu[a]) for c in range(len(starts))) for a in names}
        row: dict[str, Any] = {"tokens": length}
        for a in names:
            row[f"{a} tok/s"] = length / best[a]
            row[f"{a} wall tok/s"] = length / min(wall[a])
            row[f"{a} cache MiB"] = decoders[a].cache_bytes() / 2**20
        full = [a for a in names if a in FULL_ARMS]
        row["same tokens"] = all(decoders[a].tokens == decoders["torch.cat"].tokens for a in full)
        log(f"t={length}: " + ", ".join(f"{a} {row[f'{a} tok/s']:.0f} tok/s" for a in names))
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table of ``measure``'s rows: tokens/s per arm, KVCache over each other
    full cache as a ratio, cache MiB per arm."""
    names = [k[: -len(" tok/s")] for k in rows[0] if k.endswith(" tok/s") and " wall " not in k]
    others = [a for a in names if a in FULL_ARMS and a != "KVCache"]
    head = ["tokens", *(f"{a} tok/s" for a in names), *(f"KVCache / {a}" for a in others),
            *(f"{a} MiB" for a in names), "same tokens"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["tokens"]), *(f"{r[f'{a} tok/s']:.0f}" for a in names),
                 *(f"{r['KVCache tok/s'] / r[f'{a} tok/s']:.2f}" for a in others),
                 *(f"{r[f'{a} cache MiB']:.2f}" for a in names),
                 "yes" if r["same tokens"] else "no"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--chunk", type=int, default=64)
    p.add_argument("--kv-heads", type=int, default=None)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    load_start = os.getloadavg()
    rows = measure(args.lengths, args.repeats, args.kv_heads, chunk=args.chunk)
    load_end = os.getloadavg()
    lines = table(rows)
    print("\n".join(lines))
    print(f"load average (1, 5, 15 min): start {load_start}, end {load_end}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        meta = {"torch": torch.__version__, "machine": platform.machine(), "cpus": os.cpu_count(),
                "preset": "transformer-lm small (dim 64, 4 heads, 2 layers)",
                "kv_heads": args.kv_heads, "threads": 1, "repeats": args.repeats,
                "chunk": args.chunk, "clock": "time.thread_time (CPU time of the decoding thread)",
                "transformers": _transformers_version(),
                "loadavg_start": load_start, "loadavg_end": load_end}  # fmt: skip
        (args.out / "decode_bench.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                               indent=1))  # fmt: skip
        (args.out / "decode_bench.md").write_text("\n".join(lines) + "\n")
    return 0 if all(r["same tokens"] for r in rows) else 1


def _transformers_version() -> str | None:
    try:
        import transformers
    except ImportError:
        return None
    return str(transformers.__version__)


if __name__ == "__main__":
    raise SystemExit(main())
