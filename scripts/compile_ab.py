"""Training step of the small Transformer on toy-ko, eager against ``torch.compile``, in one
process: both models built from the same seed, warmed up on every batch (every shape compiled),
then ``--rounds`` rounds of one step per batch each, the order alternating; prints the median
over rounds of each round's median ms and eager ms / compiled ms (> 1: compiled faster).

    PYTHONPATH=src python scripts/compile_ab.py --options attnkit   # as `attnkit train --compile`
    PYTHONPATH=src python scripts/compile_ab.py --options default   # inductor's defaults

One compiled variant per process: two compiled models in one process share Dynamo's graphs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from attnkit.bench.models import _toy_ko
from attnkit.data.batching import Batch, batches
from attnkit.models import build_model
from attnkit.train.loop import loss_of
from attnkit.train.runtime import compile_options


def summary(ms: dict[str, list[float]]) -> str:
    """Median ms per step of each round's eager and compiled medians, and eager / compiled
    (above 1: compiled is faster)."""
    med = {k: statistics.median(v) for k, v in ms.items()}
    return (f"eager {med['eager']:.2f} ms/step, compiled {med['compiled']:.2f} ms/step, "
            f"eager/compiled {med['eager'] / med['compiled']:.2f}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--options", choices=("attnkit", "default"), default="attnkit")
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args()
    torch.set_num_threads(1)
    train, _, sv, tv = _toy_ko(512, 8, 0)
    data = batches(train, sv, tv, 64)

    def make(options: dict | None) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        m = build_model("transformer", src_vocab=len(sv), tgt_vocab=len(tv), preset="small")
        if options is not None:
            m.compile(options=options)
        return m.train(), torch.optim.Adam(m.parameters(), lr=1e-3)

    def step(m: torch.nn.Module, opt: torch.optim.Optimizer, b: Batch) -> float:
        start = time.perf_counter()
        loss, _ = loss_of(m, b)  # type: ignore[arg-type]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return time.perf_counter() - start

    options = compile_options("cpu") if args.options == "attnkit" else {}
    pair = {"eager": make(None), "compiled": make(options)}
    for k in pair:  # every batch shape compiled before timing
        for b in data:
            step(*pair[k], b)
    ms: dict[str, list[float]] = {k: [] for k in pair}
    for r in range(args.rounds):
        for k in list(pair) if r % 2 == 0 else list(pair)[::-1]:
            ms[k].append(1000 * statistics.median(step(*pair[k], b) for b in data))
    print(f"options {options}, threads {torch.get_num_threads()}, load {os.getloadavg()}")
    print(summary(ms))


if __name__ == "__main__":
    main()
