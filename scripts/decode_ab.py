"""Decoding speed of two builds of attnkit with the same weights: this checkout against
another one (e.g. 2734bb5^, before the projected key/value cache), each build in its own
processes, run alternately so both see the same load. Each run decodes the toy-ko test
sentences with the small Transformer (greedy and beam 5, batches of 64, one thread, best of
3) and writes its hypotheses; the pairs' speed ratios and whether the hypotheses are
identical are printed.

    git worktree add /tmp/before 2734bb5^
    PYTHONPATH=src python scripts/decode_ab.py --before /tmp/before/src --pairs 3

Each run times with this checkout's ``attnkit.bench.models.decode_speed``, loaded into the
build under test (it calls only what both builds have: tasks, batching, the model registry,
``decode.search.decode``, ``train.loop.loss_of``). The weights are trained once, 300 seeded
updates, by this checkout and saved (``--weights``), then loaded by every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def worker(weights: str, out: str) -> None:
    """One run in the build on sys.path: this checkout's ``bench.models.decode_speed``, loaded
    into that build's ``attnkit.bench`` package (its imports are package-relative, so it
    decodes with that build's models and search): the weights trained once or loaded, then
    greedy and beam 5 timed."""
    import importlib.util

    import torch

    import attnkit.bench  # the build under test: another checkout's or this one

    torch.set_num_threads(1)
    path = Path(__file__).resolve().parents[1] / "src" / "attnkit" / "bench" / "models.py"
    spec = importlib.util.spec_from_file_location("attnkit.bench._decode_ab", path)
    assert spec is not None and spec.loader is not None and attnkit.bench.__file__
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.decode_speed(weights=weights, log=lambda line: None)["rows"]
    result = {str(r["beam"]): {k: r[k] for k in ("sentences_per_s", "hypotheses")} for r in rows}
    Path(out).write_text(json.dumps(result))


def summarise(pairs: list[tuple[dict, dict]]) -> list[str]:
    """The report of (before, after) runs: per pair and beam, both speeds, after / before (above
    1: this checkout is faster) and how many hypotheses agree; then each beam's median ratio."""
    lines, ratios = [], {"1": list[float](), "5": list[float]()}
    for i, (before, after) in enumerate(pairs):
        for beam in ("1", "5"):
            b, a = before[beam], after[beam]
            ratios[beam].append(a["sentences_per_s"] / b["sentences_per_s"])
            same = sum(x == y for x, y in zip(a["hypotheses"], b["hypotheses"], strict=True))
            lines.append(f"pair {i + 1} beam {beam}: before {b['sentences_per_s']:.1f} sent/s, "
                         f"after {a['sentences_per_s']:.1f}, x{ratios[beam][-1]:.2f}, "
                         f"same hypotheses {same}/{len(a['hypotheses'])}")  # fmt: skip
    for beam, name in (("1", "greedy"), ("5", "beam 5")):
        r = ratios[beam]
        lines.append(f"{name}: after / before = x{statistics.median(r):.2f} (median of "
                     f"{len(r)} pairs; range {min(r):.2f}-{max(r):.2f})")  # fmt: skip
    return lines


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
    pairs = [(run(args.before, f"before{i}"), run(here, f"after{i}")) for i in range(args.pairs)]
    print("\n".join(summarise(pairs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
