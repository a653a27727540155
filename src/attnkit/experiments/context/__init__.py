"""Context in Transformer-XL: Dai et al. (2019), "Transformer-XL: Attentive Language Models
Beyond a Fixed-Length Context".

The claims (the paper, with its data and metric; ours beside it):

(a) Segment-level recurrence and relative positions beat a vanilla Transformer LM of
    similar size (enwik8: 1.06 vs 1.11 bpc, Table 2). Here: bpc of XL (memory carried) vs
    the vanilla LM evaluated with a sliding window of its full training context, equal
    parameters, generated text.
(b) Evaluation with the memory is faster than the vanilla model's recomputation of each
    position's context, by a factor that grows with the attention length (363x at 800 ...
    1,874x at 3,800, Table 9). Here: seconds per predicted character at context lengths
    C = 64 ... 512 on this CPU; checked: the speedup at the largest C is above 1 and grows
    with C (the exponent of speedup ∝ C^k above 0). The paper's magnitudes are GPU numbers
    at longer contexts and are not checked.
(c) Evaluated with an attention length longer than in training, XL does better ("Increasing
    the attention length during evaluation improves performance", Table 6: WikiText-103,
    PPL 27.02 at the training length, 26.77 at 500, about 4x the training length of 128).
    Here: XL trained with memory M = 64, its bpc at evaluation memory 4M (256) against M;
    2M (128) is reported beside it.

Task: the generated text of ``--task lm`` (data/lm_text.py: a name given at the start of a
record comes back 30-300 characters later), a new text and initialisation per seed. Models
(models/lm.py): ``transformer-xl`` (memory M = ``--memory``) and ``transformer-lm``
(absolute positions, no memory; its feed-forward widened to equal parameters), the same
sizes, text and batches, trained by ``attnkit.fit`` side by side (``pool.train_all``), each to
a validation plateau: stopped after ``--patience`` epochs without a lower validation loss, at
most ``--epochs``, scored from the checkpoint of its lowest validation loss.

Checks (fixed from the claims before the verdict's seeds ran; checks.py): t-intervals over
the per-seed paired gaps (5 seeds), over the timing repeats for (b), 95%:
* (design) each compared cell learnt: the unigram bpc − its bpc, wholly above 0 (the
  vanilla LM's sliding window, XL at its training memory, XL at the longest memory);
* (design) each model trained to a plateau: the cap is at least 3x the median stopping
  epoch of its runs (runs the cap cut are reported as censored);
* (claim a) bpc(vanilla, sliding window of L) - bpc(XL, training memory) > 0;
* (claim c) bpc(XL at the training memory) - bpc(XL at the longest evaluation memory) > 0;
* (claim b) the speedup at the largest C > 1, and the exponent k of speedup ∝ C^k > 0.
The relative effective context length (RECL, §4.3) is not computed.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from .. import evidence as ev
from ..base import Experiment, Say, begin
from ..pool import lm_data, plateau_summary, train_lms_to_plateau
from ..pool import stop_of_epochs as stop_of
from .config import ContextConfig
from .jobs import ARMS, make_jobs

QUICK = dict(
    train_size=800, valid_size=200, test_size=300, segment=8, memory=8, dim=16, heads=2,
    layers=1, ff=16, epochs=1, batch_size=8, seeds=2, eval_memories="0,8,16", patience=1,
    eval_streams=2, lengths="8,16", timing_chars=8, repeats=2, jobs=1,
)  # fmt: skip


def measure_seed(cfg: ContextConfig, seed: int, out: Path) -> dict[str, Any]:
    """The bits of each test segment, by model and evaluation, for one seed's models."""
    from ...data.lm_text import lm_texts, segments
    from ...train import checkpoint
    from .measure import sliding_segment_bits, unigram_bits, xl_segment_bits

    train, _, test = lm_texts(lm_data(cfg, seed).spec())
    segs = segments(test, cfg.segment)
    xl = checkpoint.load(out / f"transformer-xl-s{seed}")
    lm = checkpoint.load(out / f"transformer-lm-s{seed}")
    vocab = xl.tgt_vocab
    return {
        "xl": {str(m): xl_segment_bits(xl.model, segs, vocab, cfg.eval_streams, m)
               for m in cfg.memory_list},  # fmt: skip
        "vanilla": sliding_segment_bits(lm.model, test, lm.tgt_vocab, cfg.segment, cfg.segment),
        "vanilla_segments": xl_segment_bits(lm.model, segs, lm.tgt_vocab, cfg.eval_streams, 0),
        "unigram": unigram_bits(train, test),
        "parameters": {n: sum(p.numel() for p in x.model.parameters())
                       for n, x in (("transformer-xl", xl), ("transformer-lm", lm))},  # fmt: skip
    }


def measure_timing(cfg: ContextConfig, out: Path, say: Say) -> dict[str, list[list[float]]]:
    """Seconds per character, (vanilla, XL) per repeat, at each context length C, with the
    first seed's models."""
    from ...data.lm_text import lm_texts
    from ...train import checkpoint
    from .measure import time_per_char

    seed = cfg.seed_list[0]
    xl = checkpoint.load(out / f"transformer-xl-s{seed}").model
    loaded = checkpoint.load(out / f"transformer-lm-s{seed}")
    test = lm_texts(lm_data(cfg, seed).spec())[2]
    ids = torch.tensor(loaded.tgt_vocab.encode(list(test), eos=False))  # (N,)
    timing: dict[str, list[list[float]]] = {}
    for c in cfg.length_list:
        timing[str(c)] = [list(time_per_char(xl, loaded.model, ids, c, cfg.timing_chars))
                          for _ in range(cfg.repeats)]  # fmt: skip
        v, x = (sorted(t[i] for t in timing[str(c)])[cfg.repeats // 2] for i in (0, 1))
        say(f"  C = {c}: vanilla {1e3 * v:.2f} ms/char, XL {1e3 * x:.3f} ms/char "
            f"(speedup {v / x:.0f}x, median of {cfg.repeats})")  # fmt: skip
    return timing


def run_experiment(cfg: ContextConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train both models for every seed, measure, check; returns the JSON-able result."""
    from .checks import ARM_RUNS, checks_of, reported_of

    t0 = begin(
        out,
        say,
        f"context experiment: transformer-xl (memory {cfg.memory}) vs transformer-lm, "
        f"d {cfg.dim}, {cfg.layers} layers, segment {cfg.segment}, early stopping (patience "
        f"{cfg.patience}, cap {cfg.epochs} epochs) in batches of {cfg.batch_size} streams over "
        f"{cfg.train_size:,} characters, seeds {cfg.seed_list}",
    )
    jobs = make_jobs(cfg, out)
    steps, seconds, stops = train_lms_to_plateau(cfg, jobs, out, say, cfg.patience)
    say("measuring bpc on the test text")
    per_seed = [measure_seed(cfg, s, out) for s in cfg.seed_list]
    say(f"timing evaluation at C = {cfg.lengths}")
    timing = measure_timing(cfg, out, say)
    numbers = {
        "xl": {m: [p["xl"][m] for p in per_seed] for m in per_seed[0]["xl"]},
        "vanilla": [p["vanilla"] for p in per_seed],
        "vanilla_segments": [p["vanilla_segments"] for p in per_seed],
        "unigram": [p["unigram"] for p in per_seed],
        "train_memory": cfg.memory,
        "timing": timing,
        "stops": {key: [stops[f"{arm}-s{s}"][0] for s in cfg.seed_list]
                  for arm, key in ARM_RUNS.items()},
        "censored": {key: [stops[f"{arm}-s{s}"][1] for s in cfg.seed_list]
                     for arm, key in ARM_RUNS.items()},
        "cap": cfg.epochs,
    }  # fmt: skip
    checks = checks_of(numbers)
    return {
        "config": asdict(cfg),
        "seeds": cfg.seed_list,
        "parameters": per_seed[0]["parameters"],
        **plateau_summary(cfg.epochs, steps, seconds, stops, t0),
        "bpc": bpc_table(numbers),
        "numbers": numbers,
        "reported": reported_of(numbers),
        **ev.judged(checks),
    }


def bpc_table(n: dict[str, Any]) -> dict[str, list[float]]:
    """Mean bits per character over the test segments, per seed, by model and evaluation."""
    def per_seed(rows: list[list[float]]) -> list[float]:
        return [round(sum(r) / len(r), 4) for r in rows]

    table = {f"transformer-xl, memory {m}": per_seed(v) for m, v in n["xl"].items()}
    table["transformer-lm, sliding window"] = per_seed(n["vanilla"])
    table["transformer-lm, segments"] = per_seed(n["vanilla_segments"])
    table["unigram"] = [round(u, 4) for u in n["unigram"]]
    return table


EXPERIMENT = Experiment.of(
    __name__,
    name="context",
    help="Transformer-XL's memory: bpc vs the vanilla LM, by evaluation memory (2-4x the "
    "training memory), and evaluation speed vs recomputation (Dai 2019, Tables 2, 6, 9)",
    typical="2.5 min with --jobs 2 on a 2-core CPU (204 s of CPU)",
    description="Train Transformer-XL and a vanilla Transformer LM (absolute positions, no "
    "memory, equal parameters) on the generated text of --task lm for 5 seeds, each to a "
    "validation plateau; measure "
    "bits per character on the test text (XL with its memory at several lengths, the vanilla "
    "LM with a sliding window) and the time per character of evaluating with the memory vs "
    "recomputing each character's context; check XL beats the vanilla LM, gains from a "
    "memory longer than in training, and evaluates faster by a factor growing with the "
    "context. Writes OUT/context.{csv,json,png} and the checkpoints.",
    config=ContextConfig,
)

__all__ = ["ARMS", "EXPERIMENT", "QUICK", "ContextConfig", "bpc_table", "measure_seed",
           "measure_timing", "run_experiment", "stop_of"]  # fmt: skip
