"""Packed documents: what ``attend`` costs for one packed row of n tokens in documents of
equal length L, under ``document(ids) & causal()`` and ``document(ids) & band(128,
causal=True)`` (a look-back window of 128), forward and forward + backward, three arms:

* dense: the (n, n) mask tensor given to ``attend``, what a mask function cost before it ran
  by document (fused SDPA over all n² scores);
* by document: the mask function given to ``attend`` (``attnkit.document_blocks``);
* floor: ``F.scaled_dot_product_attention`` on the documents stacked as a batch (n / L, H,
  L, D), ``is_causal=True``, or the window as an (L, L) mask: what the documents alone cost.

One thread, the arms interleaved in every repeat, the best of ``--repeats`` in CPU seconds
of the process (the wall times are in the json too); the dense arm only
up to ``--dense-max`` tokens (its n² would take the run past two minutes). Each setting
checks once that the by-document context equals the floor's. Writes packed_bench.{md,json}
under ``--out`` with ``os.getloadavg()`` before and after (the machine may be shared).

    PYTHONPATH=src python scripts/packed_bench.py --out docs/perf/packed
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
from torch import Tensor

from attnkit import attend
from attnkit.mask_mods import MaskMod, band, causal, document

ARMS = ("dense", "by document", "floor")
WINDOW = 128


def mask_for(kind: str, ids: Tensor) -> MaskMod:
    """The packed mask: ``causal`` or a causal look-back of ``WINDOW`` keys."""
    return document(ids) & (causal() if kind == "causal" else band(WINDOW, causal=True))


def floor(q: Tensor, k: Tensor, v: Tensor, doc: int, kind: str) -> Tensor:
    """SDPA on each document, the documents as a batch: q, k, v (H, n, D) -> (H, n, D)."""
    h, n, d = q.shape
    qs, ks, vs = (x.view(h, n // doc, doc, d).transpose(0, 1) for x in (q, k, v))  # (n/L,H,L,D)
    if kind == "causal":
        out = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
    else:
        i = torch.arange(doc)
        allowed = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] <= WINDOW)  # (L, L)
        out = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=allowed)
    return out.transpose(0, 1).reshape(h, n, d)  # (H, n, D)


def arm_fn(arm: str, kind: str, ids: Tensor, doc: int) -> Callable[..., Tensor]:
    """The context of ``arm``: (H, n, D) inputs -> (H, n, D)."""
    mod = mask_for(kind, ids)
    if arm == "floor":
        return lambda q, k, v: floor(q, k, v, doc, kind)
    if arm == "dense":
        dense = mod.dense(ids.numel(), ids.numel())  # (n, n), built once, outside the timing
        return lambda q, k, v: attend(q, k, v, mask=dense, need_weights=False).context
    return lambda q, k, v: attend(q, k, v, mask=mod, need_weights=False).context


def once(fn: Callable[..., Tensor], xs: tuple[Tensor, ...], backward: bool) -> tuple[float, float]:
    """CPU seconds of this process and wall seconds for one forward (no autograd), or one
    forward and backward. On one thread the CPU time is what the call costs whatever else
    runs on the machine; the wall time counts the time other processes held the cores."""
    if backward:
        xs = tuple(x.detach().requires_grad_() for x in xs)
    with torch.set_grad_enabled(backward):
        cpu, wall = time.process_time(), time.perf_counter()
        out = fn(*xs)
        if backward:
            out.sum().backward()
    return time.process_time() - cpu, time.perf_counter() - wall


def measure(lengths: list[int], docs: list[int], repeats: int, dense_max: int, heads: int = 2,
            dim: int = 32, log: Callable[[str], None] = print) -> list[dict[str, Any]]:  # fmt: skip
    """Every setting (n, L, mask), the arms interleaved, best of ``repeats`` each."""
    rows = []
    for n in lengths:
        for doc in docs:
            if n % doc:
                continue
            ids = torch.arange(n) // doc  # (n,): documents of ``doc`` tokens
            g = torch.Generator().manual_seed(n + doc)
            xs = tuple(torch.randn(heads, n, dim, generator=g) for _ in range(3))  # (H, n, D)
            for kind in ("causal", f"window {WINDOW}"):
                arms = [a for a in ARMS if a != "dense" or n <= dense_max]
                fns = {a: arm_fn(a, kind, ids, doc) for a in arms}
                with torch.no_grad():
                    diff = (fns["by document"](*xs) - fns["floor"](*xs)).abs().max().item()
                best: dict[str, float] = {}
                times: dict[str, list[float]] = {}
                walls: dict[str, list[float]] = {}
                for backward in (False, True):
                    for _ in range(repeats):
                        for a in arms:
                            key = f"{a} {'fwd+bwd' if backward else 'fwd'} s"
                            cpu, wall = once(fns[a], xs, backward)
                            times.setdefault(key, []).append(cpu)
                            walls.setdefault(key, []).append(wall)
                            best[key] = min(times[key])
                row = {"n": n, "doc": doc, "mask": kind, **best, "cpu s": times,
                       "wall s": walls, "max |by document - floor|": diff}  # fmt: skip
                log(f"n={n} L={doc} {kind}: " + ", ".join(f"{k} {v * 1e3:.1f} ms"
                                                            for k, v in best.items()))  # fmt: skip
                rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table of ``measure``'s rows, CPU milliseconds; a dense arm not run is
    "—"."""
    head = ["n", "doc", "mask"]
    for part in ("fwd", "fwd+bwd"):
        head += [f"{a} {part} ms" for a in ARMS] + [f"dense / by doc {part}",
                                                   f"by doc / floor {part}"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["n"]), str(r["doc"]), r["mask"]]
        for part in ("fwd", "fwd+bwd"):
            t = {a: r.get(f"{a} {part} s", math.nan) for a in ARMS}
            cells += ["—" if math.isnan(t[a]) else f"{t[a] * 1e3:.1f}" for a in ARMS]
            ratio = t["dense"] / t["by document"]
            cells += ["—" if math.isnan(ratio) else f"{ratio:.1f}",
                      f"{t['by document'] / t['floor']:.2f}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write(out: Path, rows: list[dict[str, Any]], args: Any, load_before: tuple[float, ...],
          wall: float) -> None:  # fmt: skip
    """packed_bench.json (the settings, the load average, every time) and packed_bench.md."""
    out.mkdir(parents=True, exist_ok=True)
    meta = {"torch": torch.__version__, "machine": platform.machine(), "threads": 1,
            "heads": 2, "head_dim": 32, "dtype": "float32", "window": WINDOW,
            "repeats": args.repeats, "dense_max": args.dense_max, "timer": "process CPU s",
            "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
            "cpu_count": os.cpu_count(), "wall_s": wall}  # fmt: skip
    (out / "packed_bench.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / "packed_bench.md").write_text("\n".join(table(rows)) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[2048, 4096, 8192, 16384])
    p.add_argument("--docs", type=int, nargs="+", default=[256, 1024])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--dense-max", type=int, default=8192)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for n in args.lengths:  # written after each length: a run cut short keeps what it measured
        rows += measure([n], args.docs, args.repeats, args.dense_max,
                        log=lambda line: print(line, flush=True))  # fmt: skip
        if args.out is not None:
            write(args.out, rows, args, load_before, time.perf_counter() - start)
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
