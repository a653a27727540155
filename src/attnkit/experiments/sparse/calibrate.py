"""The sparse experiment's calibration of its length n, on seeds the verdict never uses.

The quality claim needs a dense model that uses its reach: at the chosen n every dense seed
must learn the generated text's long-range structure (a name copied from up to a few hundred
characters back: ``measure.copy_targets``), or fixed matched against it says nothing about
long sequences. At n = 1,024 one dense seed in five learned it within 3,450 updates; this
trains dense attention alone at a candidate n on calibration seeds (100, 101, ...: disjoint
from the verdict's 0-4 and from any fresh-seed check) with the experiment's own recipe, and
says for each seed its bits per copied name letter (``checks.NAME_BITS`` is the line), its
test bpc, where it stopped and its learning curve:

    python -m attnkit.experiments.sparse.calibrate --segment 256 --batch-size 12 --seeds 2

Its flags are the experiment's (``SparseConfig``); ``--seed`` defaults to 100 here.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from ..base import Say
from ..pool import history, train_all
from .checks import NAME_BITS
from .config import SparseConfig
from .jobs import fit_config

CALIBRATION_SEED = 100  # the first calibration seed: the verdict's seeds start at 0


def calibrate(cfg: SparseConfig, out: Path, say: Say = print) -> list[dict[str, Any]]:
    """Train dense attention for each of ``cfg``'s seeds (its recipe: n, batch, patience,
    cap) and measure, per seed, bits per copied name letter and test bpc at n (the
    ``best`` weights), the updates run and the valid-bpc curve."""
    from ...data.lm_text import lm_texts
    from ...tasks.lm import window_bits
    from ...train import checkpoint
    from .measure import copy_targets, long_range_bits

    jobs = {f"dense-s{s}": fit_config(cfg, "dense", s, out) for s in cfg.seed_list}
    per_epoch = math.ceil(math.ceil((cfg.train_size - 1) / cfg.segment) / cfg.batch_size)
    train_all(jobs, jobs=cfg.jobs, steps=cfg.epochs * per_epoch, log_dir=out, say=say)
    rows = []
    for name, fc in jobs.items():
        test = lm_texts(fc.data.spec())[2]
        loaded = checkpoint.load(Path(fc.out) / "best")
        ids = torch.tensor(loaded.tgt_vocab.encode(list(test), eos=False))  # (N,)
        bits = window_bits(loaded.model, ids, cfg.segment, cfg.segment)
        names = long_range_bits(loaded.model, ids, copy_targets(test, cfg.segment), cfg.segment)
        curve = [round(r["valid_loss"] / math.log(2), 3) for r in history(Path(fc.out))]
        rows.append({"run": name, "name_bits": round(names, 3),
                     "learned": names <= NAME_BITS, "test_bpc": round(sum(bits) / len(bits), 4),
                     "updates": len(curve) * per_epoch, "curve": curve})  # fmt: skip
        say(f"{name}: {names:.2f} bits per copied name letter "
            f"({'learned' if names <= NAME_BITS else 'not learned'}), test bpc "
            f"{sum(bits) / len(bits):.3f}, {len(curve) * per_epoch} updates; curve {curve}")
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in fields(SparseConfig):
        default = CALIBRATION_SEED if f.name == "seed" else f.default
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default),
                            default=default)  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("runs/sparse-calibrate"))
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    cfg = SparseConfig(**args)
    if cfg.seed < CALIBRATION_SEED:
        raise ValueError(f"--seed {cfg.seed}: calibrate on seeds >= {CALIBRATION_SEED}, "
                         "disjoint from the verdict's")  # fmt: skip
    return calibrate(cfg, out)


if __name__ == "__main__":
    main()
