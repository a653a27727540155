"""What attention learns on its own: the "it" example. "The animal didn't cross the street
because it was too tired": it = the animal; "... too wide": it = the street. Vaswani et al.
(2017, appendix, Fig. 4, "apparently involved in anaphora resolution"; Uszkoreit 2017,
Google AI blog) show an encoder self-attention head whose attention from "it" goes to the
noun it means, and moves when the adjective changes. The paper gives no number: an anecdote,
checked as an existence claim (some head does it above chance, and ablating it costs).

The run: the Winograd-style sentences of ``attnkit.data.coref``; an encoder-only tagger
(``models.py``: attnkit's Transformer encoder layers, a two-way read-out at the pronoun's own
position) writes the pronoun's target word, il / elle, the French gender of the noun it
means (``translate``). Only the tag is supervised, never the referent's position; and since
only the pronoun's position is read out, the encoder itself must route the referent's gender
to it. Trained by Adam to a validation plateau (early stopping on the validation loss, a cap
of updates), for each of ``--seeds`` seeds. Split by noun pair (frame, noun 1, noun 2):
training pairs, validation pairs, test pairs (the famous pair among them), every held-out
word seen in training. Held-out sentences come as minimal pairs (same frame, nouns, fillers
and opener; the adjective flipped, so the referent flips).

Measured per seed (``measure.py``, ``jobs.py``): per layer and head, the share of pairs whose
top noun from the pronoun follows the referent in both sentences, the share whose top
noun flips either way, and their margin (follows − anti-follows: 0 for a head whose choice
ignores the referent); the head with the largest margin on the validation pairs is read on
the test pairs; the pronoun accuracy; the accuracy with each head zeroed in turn (the ablation);
the same head choice and accuracy on the untrained model (a control, reported). The two
famous sentences are drawn, and not checked. The checks: ``checks.py``.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from .. import evidence as ev
from ..base import Experiment, Say, Tally, begin
from ..pool import run_each
from .checks import CHANCE, COIN, LEARNED, judge, per_seed
from .config import CorefConfig
from .jobs import split, train_seed

QUICK = dict(seeds=2, dim=8, heads=2, layers=2, ff=16, steps=4, eval_every=2, patience=1,
             batch_size=8, openers=1, jobs=1)  # fmt: skip


def train_seeds(cfg: CorefConfig, say: Say) -> list[dict[str, Any]]:
    """``train_seed`` for each seed, ``cfg.jobs`` at a time (spawned processes)."""
    tally = Tally(cfg.seeds, say)
    out: list[dict[str, Any]] = []

    def collect(seed: int, result: dict[str, Any]) -> None:
        out.append(result)
        tally(f"seed {seed}: trained")

    run_each(partial(train_seed, cfg), cfg.seed_list, cfg.jobs, collect)
    return out


def run_experiment(cfg: CorefConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train and measure every seed; the checks on all of them."""
    data = split(cfg)
    t0 = begin(
        out,
        say,
        f"coref experiment: tag the pronoun il / elle at its own position; "
        f"{len(data['train'])} training sentences ({data['pairs']['train']} noun pairs), "
        f"{len(data['valid']) // 2} validation and {len(data['test']) // 2} test minimal pairs "
        f"({data['pairs']['valid']} and {data['pairs']['test']} unseen noun pairs); an "
        f"encoder-only Transformer (d={cfg.dim}, {cfg.heads} heads, {cfg.layers} layers), "
        f"updates of {cfg.batch_size} to a validation plateau (every {cfg.eval_every}, "
        f"patience {cfg.patience} by > {cfg.min_delta}, cap {cfg.steps}), {cfg.seeds} seeds, "
        f"{cfg.jobs} at a time",
    )
    seeds = train_seeds(cfg, say)
    numbers = per_seed(seeds, cfg.steps)
    checks = judge(numbers)
    return {
        "config": asdict(cfg),
        "sentences": {"train": len(data["train"]), "valid_pairs": len(data["valid"]) // 2,
                      "test_pairs": len(data["test"]) // 2},  # fmt: skip
        "noun_pairs": data["pairs"],
        "parameters": seeds[0]["parameters"],
        "thresholds": {"coin_follows": COIN, "coin_flips": 0.5, "pronoun_chance": CHANCE,
                       "learned": LEARNED, "ablation_gap": 0.0},  # fmt: skip
        "updates": {"cap": cfg.steps, "eval_every": cfg.eval_every, "patience": cfg.patience,
                    "min_delta": cfg.min_delta, "batch_size": cfg.batch_size, "lr": cfg.lr,
                    "clip": cfg.clip, "optimiser": "Adam"},  # fmt: skip
        "per_seed": numbers,
        "seeds": seeds,
        "total_seconds": round(time.perf_counter() - t0, 1),
        **ev.judged(checks),
    }


def rejudge(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a run's JSON of this design) with its checks and verdict recomputed by
    today's ``checks.judge`` from its stored per-seed numbers; nothing retrained. The verdict
    the run printed stays as ``verdict_as_run``."""
    as_run = result.get("verdict_as_run", result["verdict"])
    return {**result, **ev.judged(judge(result["per_seed"])), "verdict_as_run": as_run}


EXPERIMENT = Experiment.of(
    __name__,
    name="coref",
    help="the 'it' example: does a head find the pronoun's noun on its own (Vaswani 2017, Fig. 4)",
    typical="18 min with --jobs 2 on a 2-core CPU with other work beside it (16 seeds)",
    description="Train a small encoder-only Transformer tagger (several seeds, each to a "
    "validation plateau) to write il or elle at the pronoun of Winograd-style sentences, by "
    "the gender of the noun it means (never supervised to a position); on held-out minimal "
    "pairs (the adjective flipped, so the referent flips) measure per layer and head how "
    "often the top noun attended from the pronoun follows the referent, and zero each head "
    "in turn. Checks, with 95% intervals over seeds: the head chosen on validation pairs "
    "follows the referent on test pairs more often than it follows the other noun (a head "
    "that ignores the referent does both equally often), and zeroing "
    "it costs more pronoun accuracy than zeroing another head of its layer. Draws 'The "
    "animal didn't cross the street because it was too tired / wide'. "
    "Writes OUT/coref.{csv,json,png}, OUT/coref-famous.png and OUT/coref.html; exits 0 "
    "REPRODUCED, 1 NOT REPRODUCED, 2 INCONCLUSIVE.",
    config=CorefConfig,
)

__all__ = ["EXPERIMENT", "QUICK", "CorefConfig", "rejudge", "run_experiment", "train_seeds"]
