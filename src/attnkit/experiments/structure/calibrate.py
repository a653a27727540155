"""The digit-qa part's calibration, on seeds the verdict never uses (900 and up): train one
arm at each of a few learning rates with the part's recipe (its preset, data, batches,
validation every 200 updates, patience 4 counted once a run has left the question-only
prior) and say, per run, whether it left the prior, where it stopped, its best validation
and its test accuracy, so that each arm's learning rate is chosen before the verdict's
seeds run:

    python -m attnkit.experiments.structure.calibrate --arm stacked --lr 1e-3,5e-4 \
        --seed 904 --seeds 4 --jobs 2
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..pool import run_each
from .checks import on_prior
from .config import StructureConfig
from .qa import QA_ARMS, train_qa_arm

CALIBRATION_SEED = 900  # the first calibration seed: the verdict's seeds are 0-4 and fresh sets


def _train(job: tuple[str, float, int, Any]) -> dict[str, Any]:
    arm, lr, seed, setting = job
    return train_qa_arm(arm, seed, replace(setting, lr=lr))


def calibrate(arm: str, lrs: list[float], seeds: list[int], cap: int, jobs: int,
              say: Any = print) -> list[dict[str, Any]]:  # fmt: skip
    """Train ``arm`` at every (lr, seed); one summary row per run."""
    if arm not in QA_ARMS:
        raise ValueError(f"--arm {arm!r}: choose one of {', '.join(QA_ARMS)}")
    if min(seeds) < CALIBRATION_SEED:
        raise ValueError(f"--seed {min(seeds)}: calibrate on seeds >= {CALIBRATION_SEED}, "
                         "disjoint from the verdict's")  # fmt: skip
    setting = replace(StructureConfig(qa_cap=cap).qa_setting, threads=1)
    items = [(arm, lr, s, setting) for lr in lrs for s in seeds]
    rows: list[dict[str, Any]] = []

    def done(item: tuple[str, float, int, Any], r: dict[str, Any]) -> None:
        left = not on_prior(r["valid_best"], r["valid_prior"])
        row = {"arm": item[0], "lr": item[1], "seed": item[2], "left_prior": left,
               "valid_best": r["valid_best"], "valid_prior": r["valid_prior"],
               "test_accuracy": r["test_accuracy"],
               "steps_run": r["steps_run"], "stopped_early": r["stopped_early"],
               "valid_curve": r["valid_curve"]}  # fmt: skip
        rows.append(row)
        say(f"{arm} lr {item[1]:g} seed {item[2]}: "
            f"{'left the prior' if left else 'ON THE PRIOR'}, best valid {r['valid_best']:.3f}"
            f", test {r['test_accuracy']:.3f}, {r['steps_run']} updates"
            f"{'' if r['stopped_early'] else ' (cap)'}")  # fmt: skip

    run_each(_train, items, jobs, done)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arm", default="stacked")
    p.add_argument("--lr", default="1e-3,5e-4", help="comma-separated learning rates")
    p.add_argument("--seed", type=int, default=CALIBRATION_SEED)
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--cap", type=int, default=15000)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    a = p.parse_args(argv)
    lrs = [float(x) for x in a.lr.split(",")]
    rows = calibrate(a.arm, lrs, list(range(a.seed, a.seed + a.seeds)), a.cap, a.jobs)
    if a.out is not None:
        a.out.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
