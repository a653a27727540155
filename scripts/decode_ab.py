"""Decoding speed of two builds of attnkit with the same weights: this checkout against
another one (e.g. 2734bb5^, before the projected key/value cache), each build in its own
processes, run alternately so both see the same load. Each run decodes the toy-ko test
sentences with the small Transformer (greedy and beam 5, batches of 64, one thread, best of
3) and writes its hypotheses; the pairs' speed ratios and whether the hypotheses are
identical are printed.

    git worktree add /tmp/before 2734bb5^
    PYTHONPATH=src python scripts/decode_ab.py --before /tmp/before/src --pairs 3

The worker uses only what both builds have (tasks, batching, the model registry,
``decode.search.decode``, ``train.loop.loss_of``): the weights are trained once, 300 seeded
updates, by this checkout and saved (``--weights``), then loaded by every run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def worker(weights: str, out: str, test: int = 256, repeats: int = 3) -> None:
    """One run in the build on sys.path: train or load the weights, time the decodings."""
    import torch

    from attnkit.data.batching import batches
    from attnkit.data.tasks import load_task
    from attnkit.data.vocab import Vocab
    from attnkit.decode.search import decode
    from attnkit.models import build_model
    from attnkit.train.loop import loss_of

    torch.set_num_threads(1)
    splits = load_task("toy-ko", seed=0, train_size=4000, valid_size=8, test_size=test)
    sv = Vocab.build(e.src for e in splits.train)
    tv = Vocab.build(e.tgt for e in splits.train)
    torch.manual_seed(0)
    model = build_model("transformer", src_vocab=len(sv), tgt_vocab=len(tv), preset="small")
    if Path(weights).exists():
        model.load_state_dict(torch.load(weights, weights_only=True))
    else:
        opt, done, epoch = torch.optim.Adam(model.parameters(), lr=1e-3), 0, 0
        model.train()
        while done < 300:
            for b in batches(splits.train, sv, tv, 64, random.Random(epoch))[: 300 - done]:
                loss, _ = loss_of(model, b)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                done += 1
            epoch += 1
        torch.save(model.state_dict(), weights)
    model.eval()
    test_batches = batches(splits.test, sv, tv, 64)
    result = {}
    for beam in (1, 5):
        best, hyps = float("inf"), list[list[int]]()
        for _ in range(repeats):
            start = time.perf_counter()
            hyps = [
                h for b in test_batches for h in decode(model, b.src, b.src_len, beam=beam).tokens
            ]
            best = min(best, time.perf_counter() - start)
        result[str(beam)] = {"sentences_per_s": len(splits.test) / best, "hypotheses": hyps}
    Path(out).write_text(json.dumps(result))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="the other build's src folder")
    p.add_argument("--pairs", type=int, default=3, help="before/after runs, alternately")
    p.add_argument("--weights", default="", help="state_dict file (default: a temporary one)")
    p.add_argument("--worker", nargs=2, metavar=("WEIGHTS", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(*args.worker)
        return 0
    here = str(Path(__file__).resolve().parents[1] / "src")
    if not (Path(args.before) / "attnkit").is_dir():
        p.error(f"--before {args.before}: no attnkit package there (give a checkout's src)")
    tmp = Path(tempfile.mkdtemp())
    weights = args.weights or str(tmp / "weights.pt")

    def run(src: str, name: str) -> dict:
        out = tmp / f"{name}.json"
        env = {**os.environ, "PYTHONPATH": src}
        subprocess.run([sys.executable, __file__, "--before", src, "--worker", weights, str(out)],
                       env=env, check=True)  # fmt: skip
        return json.loads(out.read_text())

    if not Path(weights).exists():
        run(here, "train")  # this build trains and saves the weights every run then loads
    ratios: dict[str, list[float]] = {"1": [], "5": []}
    for i in range(args.pairs):
        before, after = run(args.before, f"before{i}"), run(here, f"after{i}")
        for beam in ("1", "5"):
            b, a = before[beam], after[beam]
            ratios[beam].append(a["sentences_per_s"] / b["sentences_per_s"])
            same = sum(x == y for x, y in zip(a["hypotheses"], b["hypotheses"], strict=True))
            print(f"pair {i + 1} beam {beam}: before {b['sentences_per_s']:.1f} sent/s, "
                  f"after {a['sentences_per_s']:.1f}, x{ratios[beam][-1]:.2f}, "
                  f"same hypotheses {same}/{len(a['hypotheses'])}")  # fmt: skip
    for beam, name in (("1", "greedy"), ("5", "beam 5")):
        print(f"{name}: after / before = x{statistics.median(ratios[beam]):.2f} "
              f"(median of {args.pairs} pairs; range {min(ratios[beam]):.2f}-"
              f"{max(ratios[beam]):.2f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
