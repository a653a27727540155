"""Extrapolation: Press, Smith & Lewis (2022), "Train Short, Test Long: Attention with
Linear Biases Enables Input Length Extrapolation" (ALiBi).

The claim (the paper's Fig. 1 and §4, WikiText-103, 247M-parameter models trained at L = 512
and 1,024 tokens): evaluated on inputs longer than L, the sinusoidal model's perplexity rises
at once and steeply, while ALiBi's stays flat or improves. Here: bits per character of
vanilla Transformer LMs (models/lm.py, ``transformer-lm`` with ``position=ARM``) trained at
L characters of the generated text of ``--task lm`` and evaluated at k·L, k = 1 .. 16.

Arms: ``sinusoidal`` (PE added to the embeddings), ``learned`` (learned absolute positions in
each attention, max_len = L: positions beyond L do not exist, so the arm is evaluated at L
only and reported as n/a beyond), ``rope``, ``t5`` (causal buckets), ``alibi``, ``xl``
(Transformer-XL's relative decomposition, no memory), the same sizes, text, batches and
rule: each to a validation plateau (early stopping after ``--patience`` epochs without a
lower valid loss, at most ``--cap`` epochs, scored from the lowest-valid-loss weights), trained
by ``attnkit.fit`` side by side.

Evaluation (``tasks.lm.window_bits``, the paper's non-overlapping evaluation): the test text
read as consecutive windows of k·L characters, each from scratch (no memory). The test text
is cut into blocks of k_max·L predicted characters, so every length scores the same
characters and differs only in the context they are predicted from; bpc per block.

Checks (thresholds fixed from the claim before any run; evidence.py's contract: a 95%
t-interval over the per-seed gaps, each seed's mean over the test blocks):
* (design) both claimed arms learned the text: the worse of sinusoidal's and ALiBi's bpc at
  L is at most 0.8 x the unigram bpc of the test text;
* (claim) ALiBi does not degrade: bpc(ALiBi, k_max·L) - bpc(ALiBi, L) < 0 (the paper's tables
  show its perplexity lower at the longer inputs);
* (claim) sinusoidal rises: bpc(sinusoidal, k_max·L) - bpc(sinusoidal, L) > 0.

``--part rope`` (rope.py, its checks rope_checks.py) is a second study on the same text: a
plain-RoPE model trained at L, stretched to k·L by position interpolation (Chen et al. 2023),
NTK-aware scaling or YaRN (Peng et al. 2023), read before and after a short fine-tune at k·L;
it writes OUT/extrapolation-rope.{csv,json,png}.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from .. import evidence as ev
from ..base import Experiment, Say, begin
from ..pool import lm_data, plateau_summary, train_lms_to_plateau
from .config import CLAIMED, ExtrapolationConfig
from .jobs import make_jobs

QUICK = dict(
    train_size=800, valid_size=200, test_size=130, segment=8, factors="1,2,4", dim=16,
    heads=2, layers=1, ff=16, epochs=1, cap=2, patience=1, batch_size=8, seeds=2,
    arms="sinusoidal,learned,alibi",
    jobs=1, rope_factors="1,2,4", scalings="linear,yarn", finetune_steps=5,
)  # fmt: skip


def measure_seed(cfg: ExtrapolationConfig, seed: int, out: Path) -> dict[str, Any]:
    """Bits per test block of each arm at each length k·L (None past L for learned
    positions), the unigram bpc, and each arm's parameters, for one seed's models."""
    from ...data.lm_text import lm_texts
    from ...tasks.lm import unigram_bits, window_bits
    from ...train import checkpoint

    train, _, test = lm_texts(lm_data(cfg, seed).spec())
    bits: dict[str, dict[str, list[float] | None]] = {}
    params = {}
    for arm in cfg.arm_list:
        loaded = checkpoint.load(out / f"{arm}-s{seed}")
        ids = torch.tensor(loaded.tgt_vocab.encode(list(test), eos=False))  # (N,)
        bits[arm] = {str(k): None if arm == "learned" and k > 1 else
                     window_bits(loaded.model, ids, k * cfg.segment, cfg.block)
                     for k in cfg.factor_list}  # fmt: skip
        params[arm] = sum(p.numel() for p in loaded.model.parameters())
    return {"bits": bits, "unigram": unigram_bits(train, test), "parameters": params}


def run_experiment(cfg: ExtrapolationConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train every arm for every seed at L, evaluate at k·L, check; the JSON-able result
    (``--part rope``: rope.run_rope's)."""
    from .checks import checks_of

    if cfg.part == "rope":
        from .rope import run_rope

        return run_rope(cfg, out, say)

    t0 = begin(
        out,
        say,
        f"extrapolation experiment: transformer-lm with positions {cfg.arms}, d {cfg.dim}, "
        f"{cfg.layers} layers, trained at L = {cfg.segment} to a plateau (patience "
        f"{cfg.patience}, cap {cfg.cap} epochs) in batches of {cfg.batch_size} segments over "
        f"{cfg.train_size:,} characters, evaluated at "
        f"k·L for k = {cfg.factors}, seeds {cfg.seed_list}",
    )
    capped = replace(cfg, epochs=cfg.cap)  # the runs' epochs: the cap of early stopping
    steps, seconds, stops = train_lms_to_plateau(capped, make_jobs(cfg, out), out, say,
                                                 cfg.patience)
    say(f"measuring bpc on the test text at k·L, k = {cfg.factors}")
    per_seed = [measure_seed(cfg, s, out) for s in cfg.seed_list]
    numbers = {
        "bits": {a: {k: (None if per_seed[0]["bits"][a][k] is None
                         else [p["bits"][a][k] for p in per_seed])
                     for k in per_seed[0]["bits"][a]} for a in cfg.arm_list},
        "unigram": [p["unigram"] for p in per_seed],
        "stops": {a: [stops[f"{a}-s{s}"][0] for s in cfg.seed_list] for a in CLAIMED},
        "censored": {a: [stops[f"{a}-s{s}"][1] for s in cfg.seed_list] for a in CLAIMED},
        "cap": cfg.cap,
    }  # fmt: skip
    checks = checks_of(numbers)
    return {
        "config": asdict(cfg),
        "seeds": cfg.seed_list,
        "parameters": per_seed[0]["parameters"],
        "updates": steps,
        "blocks": len(per_seed[0]["bits"]["alibi"]["1"]),
        **plateau_summary(cfg.cap, steps, seconds, stops, t0),
        "bpc": bpc_table(numbers),
        "numbers": numbers,
        **ev.judged(checks),
    }


def bpc_table(n: dict[str, Any]) -> dict[str, dict[str, list[float] | None]]:
    """Mean bits per character over the test blocks, per seed, by arm and length factor k
    (None: not applicable, learned positions past L)."""
    return {arm: {k: None if rows is None else [round(sum(r) / len(r), 4) for r in rows]
                  for k, rows in by_k.items()} for arm, by_k in n["bits"].items()}  # fmt: skip


def rejudge(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a run's JSON) with its checks and verdict recomputed by today's
    ``checks.checks_of`` from its stored per-seed, per-block bits; nothing retrained. The
    verdict the run printed stays as ``verdict_as_run``. A RoPE part's result (``"part":
    "rope"``) is judged by ``rope_checks.checks_of``."""
    from . import checks, rope_checks

    judge = rope_checks.checks_of if result.get("part") == "rope" else checks.checks_of
    as_run = result.get("verdict_as_run", result["verdict"])
    return {**result, **ev.judged(judge(result["numbers"])), "verdict_as_run": as_run}


EXPERIMENT = Experiment.of(
    __name__,
    name="extrapolation",
    help="train short, test long: bpc at k·L by position method, ALiBi vs sinusoidal "
    "(Press 2022, Fig. 1); --part rope: PI and YaRN with a short fine-tune (Chen 2023, "
    "Peng 2023)",
    typical="about 9 min with --jobs 2 on a 2-core CPU (5 seeds, each arm to its plateau); "
    "--part rope: 2.5 min (244 s of CPU)",
    description="Train vanilla Transformer LMs with sinusoidal, learned, RoPE, T5, ALiBi and "
    "Transformer-XL-style relative positions at length L on the generated text of --task lm "
    "for several seeds; evaluate bits per character on the test text read as windows of k·L "
    "characters (k = 1 .. 16, no memory); check ALiBi's bpc stays flat beyond L while the "
    "sinusoidal model's rises. Writes OUT/extrapolation.{csv,json,png} and the checkpoints. "
    "--part rope: a plain-RoPE model trained at L, stretched to k·L (k = 2, 4, 8) by position "
    "interpolation, NTK-aware scaling or YaRN, read before and after a short fine-tune at k·L; "
    "checks that plain RoPE degrades past L while PI after the fine-tune reads k·L better than "
    "the model reads L, that the fine-tune helps PI, and that at the same small budget YaRN "
    "beats PI. Writes OUT/extrapolation-rope.{csv,json,png}.",
    config=ExtrapolationConfig,
)

__all__ = ["EXPERIMENT", "QUICK", "ExtrapolationConfig", "bpc_table", "measure_seed",
           "rejudge", "run_experiment"]  # fmt: skip
