"""The extrapolation experiment's RoPE part (``--part rope``): Chen et al. 2023, "Extending
Context Window of Large Language Models via Positional Interpolation" (PI), and Peng et al.
2023, "YaRN: Efficient Context Window Extension of Large Language Models".

Per seed, one plain-RoPE ``transformer-lm`` trained at L (the positions part's ``rope`` arm,
the same recipe), then:

* read at k·L as it is (no scaling, no fine-tune), k in ``--rope-factors``;
* the control: trained B = ``--finetune-steps`` more updates at L, read at L;
* for each k > 1 and each scaling in ``--scalings`` (linear = PI; ntk; yarn; none = plain
  RoPE, Chen's "direct fine-tuning"): the rotation stretched by s = k, fine-tuned B updates on
  windows of k·L (finetune.py), read at k·L before the fine-tune, after the small budget
  b = 0.4 B (Peng 2023's 400 steps to Chen 2023's 1,000) and after B.

Every reading is ``tasks.lm.window_bits`` on the seed's test text: windows of k·L read from
scratch, bits per block of k_max·L predicted characters, so every arm and length scores the
same characters. The checks are rope_checks.py's.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from .. import evidence as ev
from ..base import Say, Tally, begin
from ..pool import lm_data, run_each, train_lms
from .config import ExtrapolationConfig
from .finetune import WARMUP, Job, run_job, small_budget
from .jobs import fit_config

BASE = "rope"  # the base model's run: the positions part's RoPE arm


def fine_tune_jobs(cfg: ExtrapolationConfig, out: Path) -> list[Job]:
    """Every seed's control (plain RoPE at L) and each scaling at each k > 1."""
    steps = (0, small_budget(cfg.finetune_steps), cfg.finetune_steps)
    return [Job(cfg, seed, scaling, k, steps, out / f"{BASE}-s{seed}")
            for seed in cfg.seed_list
            for scaling, k in [("none", 1)] + [(m, k) for k in cfg.factor_list[1:]
                                               for m in cfg.scaling_list]]  # fmt: skip


def base_bits(cfg: ExtrapolationConfig, seed: int, out: Path) -> dict[str, Any]:
    """The base model read at each k·L as it is, and the unigram bpc of the seed's text."""
    from ...data.lm_text import lm_texts
    from ...tasks.lm import unigram_bits, window_bits
    from ...train import checkpoint

    train, _, test = lm_texts(lm_data(cfg, seed).spec())
    loaded = checkpoint.load(out / f"{BASE}-s{seed}")
    ids = torch.tensor(loaded.tgt_vocab.encode(list(test), eos=False))  # (N,)
    return {"bits": {str(k): window_bits(loaded.model, ids, k * cfg.segment, cfg.block)
                     for k in cfg.factor_list},
            "unigram": unigram_bits(train, test),
            "parameters": sum(p.numel() for p in loaded.model.parameters())}  # fmt: skip


def run_rope(cfg: ExtrapolationConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train the base models, fine-tune every scaling, read every arm, check; the result."""
    from .rope_checks import checks_of

    small = small_budget(cfg.finetune_steps)
    t0 = begin(
        out,
        say,
        f"extrapolation experiment, RoPE part: transformer-lm with RoPE, d {cfg.dim}, "
        f"{cfg.layers} layers, trained at L = {cfg.segment} ({cfg.epochs} epochs), stretched to "
        f"k·L, k = {cfg.rope_factors}, by {cfg.scalings} and fine-tuned {cfg.finetune_steps} "
        f"updates (read after 0, {small}, {cfg.finetune_steps}), seeds {cfg.seed_list}",
    )
    runs = {f"{BASE}-s{s}": fit_config(cfg, BASE, s, out) for s in cfg.seed_list}
    updates, seconds = train_lms(cfg, runs, out, say)
    jobs = fine_tune_jobs(cfg, out)
    say(f"fine-tuning: {len(jobs)} runs of {cfg.finetune_steps} updates")
    tally, tuned = Tally(len(jobs), say), {}

    def done(job: Job, got: dict[str, Any]) -> None:
        tuned[job.name] = got
        tally(f"{job.name} fine-tuned")

    run_each(run_job, jobs, cfg.jobs, done)
    say(f"measuring bpc on the test text at k·L, k = {cfg.rope_factors}")
    per_seed = [base_bits(cfg, s, out) for s in cfg.seed_list]
    numbers = numbers_of(cfg, per_seed, tuned)
    return {
        "config": asdict(cfg),
        "part": "rope",
        "seeds": cfg.seed_list,
        "parameters": per_seed[0]["parameters"],
        "updates": updates,
        "finetune": {"steps": numbers["steps"], "warmup": WARMUP,
                     "characters_per_update": cfg.batch_size * cfg.segment},  # fmt: skip
        "blocks": len(per_seed[0]["bits"]["1"]),
        "train_seconds": {n: round(s, 1) for n, s in seconds.items()},
        "finetune_seconds": {n: got["seconds"] for n, got in tuned.items()},
        "finetune_loss": {n: [got["loss"][0], got["loss"][-1]] for n, got in tuned.items()},
        "total_seconds": round(time.perf_counter() - t0, 1),
        "bpc": bpc_table(numbers),
        "numbers": numbers,
        **ev.judged(checks_of(numbers)),
    }


def numbers_of(cfg: ExtrapolationConfig, per_seed: list[dict[str, Any]],
               tuned: dict[str, dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """The per-seed, per-block bits rope_checks.checks_of reads (see there)."""
    seeds = cfg.seed_list
    steps = [0, small_budget(cfg.finetune_steps), cfg.finetune_steps]

    def each(scaling: str, k: int) -> dict[str, list[list[float]]]:
        return {str(t): [tuned[f"{scaling}-x{k}-s{s}"]["bits"][str(t)] for s in seeds]
                for t in steps}  # fmt: skip

    return {
        "unigram": [p["unigram"] for p in per_seed],
        "steps": steps,
        "base": {str(k): [p["bits"][str(k)] for p in per_seed] for k in cfg.factor_list},
        "continued": each("none", 1),
        "scaled": {m: {str(k): each(m, k) for k in cfg.factor_list[1:]}
                   for m in cfg.scaling_list},
    }  # fmt: skip


def mean_rows(rows: list[list[float]]) -> list[float]:
    """Each seed's mean over its blocks, rounded."""
    return [round(sum(r) / len(r), 4) for r in rows]


def bpc_table(n: dict[str, Any]) -> dict[str, Any]:
    """The numbers as each seed's mean bpc over the test blocks, in the same layout."""
    return {
        "base": {k: mean_rows(rows) for k, rows in n["base"].items()},
        "continued": {t: mean_rows(rows) for t, rows in n["continued"].items()},
        "scaled": {m: {k: {t: mean_rows(rows) for t, rows in by_t.items()}
                       for k, by_t in by_k.items()} for m, by_k in n["scaled"].items()},
    }  # fmt: skip


__all__ = ["BASE", "base_bits", "bpc_table", "fine_tune_jobs", "numbers_of", "run_rope"]
