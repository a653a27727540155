"""Soft, hard, Gumbel and variational attention side by side, in the manner of Deng, Kim, Chiu,
Guo & Rush (2018), "Latent Alignment and Variational Attention", Table 1, and Xu et al. (2015),
"Show, Attend and Tell", Table 1.

The same decoder (RNNsearch by default; ``--model luong``), Deng's decoder by default
(``--decoder deng``: no attention context in the recurrence, models/latent.py), is trained with
each softness of ``attnkit.models.latent``. On the translation tasks (Multi30K, toy-ko) the rows
are by default those of Deng 2018's Table 1: soft, exact (the exact marginal likelihood, trained
by enumeration), hard (REINFORCE), variational with the enumerated and with the sampled
estimator; mean pooling (the no-attention baseline) and gumbel (straight-through, annealed τ)
are there with ``--rows``. REINFORCE with Deng's soft-attention baseline by default
(``--baseline average``: Xu's moving average). Every row: the same data, batches, optimiser and
budget (Multi30K: the same cap and early-stopping rule), for each task's seeds, through
``attnkit.fit`` (``jobs`` at a time, pool.py). On the test set: BLEU and exact match of greedy
decoding (hard, gumbel: argmax alignment; variational: the prior p, marginalised), perplexity of
the exact likelihood (the marginal over the alignment for the latent models) and variational's
bound under q, the attention's entropy and AER (toy-ko's gold links), seconds per training
update and per decoded sentence, and the relative variance of the attention parameters'
gradient. A micro-benchmark (measure.reduction_cost) times what hard attention saves (the
reduction) and what it does not (the scores).

Checks on Multi30K and toy-ko (checks.py, the experiment contract of evidence.py): the t
intervals over seeds of the per-seed paired perplexity gaps, exact ≤ soft and soft ≤ hard
(Deng 2018, Table 1: the orders this size can test at equal parameters); variational ≤ soft
is reported (q adds 36% parameters in training); a design check that the compared perplexities
are not at their floor of 1, and on Multi30K that every compared run (soft, exact, hard) ended
on its validation plateau with a cap at least 3× its median stop (any failing: INCONCLUSIVE).
The entropy order is reported, not checked.

Checks on digit-captions (checks.py, Xu 2015 Table 1 on the contract): on the paired
bootstrap over seeds x test captions of the caption exact match, hard within 5 points of
soft, soft and hard each more than 20 points above mean pooling; design checks that soft
learned (final valid exact match >= 90%, else INCONCLUSIVE) and that soft and hard are not
both at the ceiling.

Tasks are a dict (``TASKS``): each knows how to train and score its rows; ``--tasks`` picks,
``multi30k`` by default; ``digit-captions`` is its own run (both halves at 5 seeds exceed the
30 minutes a default run may take).
``multi30k`` trains the translation
decoder above on Deng's direction, De→En, on the first ``multi30k`` x ``batch_size`` pairs of
Multi30K with at most ``multi30k_max_words`` words a side (multi30k.py: read from
../shared/data/multi30k, skipped with a message when absent; SentencePiece subwords; no gold
links, so no AER), every row to a validation plateau (early stopping after
``multi30k_patience`` epochs without a lower valid loss, the same cap of ``multi30k_epochs``
for every row; scored from its best epoch), ``multi30k_seeds`` seeds, judged by the same
checks and a design check that every compared run converged. ``toy-ko``, the seconds-long
smoke setting, trains it on the generated toy-ko pairs for a fixed budget (with gold links:
AER).
``digit-captions`` (captions.py) trains the captioner of Xu 2015 (models/captioner.py) in
Xu's setting: a CNN trained once as a patch digit classifier on the training canvases, then
frozen for every row (``--caption-cnn``), one patch per digit cell, and Xu's recipe for hard
attention (``--caption-reward`` mean x ``--caption-reward-scale`` 0.1, ``--caption-entropy``
0.002, the expected context per minibatch with probability 0.5, the moving-average baseline
on the sampled captions, the β gate on the deterministic rows only). Rows mean, soft, hard
by default (gumbel, variational with ``--rows``), ``caption_seeds`` seeds, the same widths,
batches and ``caption_epochs`` epochs for every row, Adam's learning rate decaying to the cap
along ``caption_lr_decay`` (cosine by default: at a constant rate the valid curve swung by
up to 12 points between epochs; chosen on seeds 10 and 11, which no comparison uses), the
validation exact match on the ``caption_valid_size`` valid canvases after each epoch kept as
the learning curve; quality is the caption exact match (%) on the test canvases, with BLEU,
perplexity where it is exact (not hard, gumbel), the entropy of the attention over the
patches and the attention mass on the digit being named. The frozen CNN's canvas accuracy on
the valid canvases (every patch labelled right) is printed beside it: the features' ceiling
of exact match."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from ...train.runtime import torch_threads
from ..base import Experiment, Say, begin
from ..pool import history, steps_done, train_all
from .captions import (
    caption_data,
    caption_options,
    pretrain_features,
    score_caption,
)
from .checks import (
    caption_checks,
    combined_verdict,
    entropy_order,
    paired_gaps,
    scoped,
    task_verdicts,
    translation_checks,
)
from .config import DENG_ROWS, ROWS, TASK_ROWS, SoftnessConfig
from .multi30k import multi30k_data, write_subset

QUICK = dict(tasks="multi30k,digit-captions",  # both halves, small (captions alone without data)
             seeds=1, caption_seeds=1, train_size=16, epochs=1, multi30k=2, multi30k_spm=200,
             multi30k_epochs=2, multi30k_patience=1, multi30k_seeds=1, multi30k_valid=4,
             multi30k_test=8,
             caption_train_size=16, caption_valid_size=4, caption_epochs=1, caption_cnn_epochs=1,
             caption_hidden=8,
             batch_size=8, emb=8, hidden=8, valid_size=4, test_size=8, draws=2, timing_reps=1,
             jobs=1)  # fmt: skip


def model_options(cfg: SoftnessConfig, row: str) -> dict[str, Any]:
    """The model config of ``row``: the same widths for every row; only the softness differs
    (the Gumbel temperature reaches tau_end at the last update)."""
    if cfg.model == "luong":
        widths: dict[str, Any] = dict(emb=cfg.emb, hidden=cfg.hidden, layers=1, cell="gru")
    else:
        widths = dict(emb=cfg.emb, enc_hidden=cfg.hidden, dec_hidden=cfg.hidden,
                      attn_hidden=cfg.hidden, maxout=cfg.hidden)  # fmt: skip
    if cfg.model == "luong" and cfg.decoder == "deng":
        widths["input_feeding"] = False  # Deng's decoder: no context in the recurrence
    return {**widths, **ROWS[row], "dropout": 0.0, "tau_start": cfg.tau_start,
            "tau_end": cfg.tau_end, "tau_steps": cfg.updates, "q_hidden": cfg.hidden,
            "reward_baseline": cfg.baseline, "decoder": cfg.decoder}  # fmt: skip


# -- tasks ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """How to train and score the rows on one task: its data, the model of a row, the epochs
    and updates of every row, the rows it has, and ``score(cfg, run_dir)`` -> the row's
    numbers (``quality`` in the task's own metric, see ``metric``)."""

    metric: str
    data: Callable[[SoftnessConfig], DataConfig]
    score: Callable[[SoftnessConfig, Path], dict[str, Any]]
    model: Callable[[SoftnessConfig, str], ModelConfig]
    epochs: Callable[[SoftnessConfig], int]
    updates: Callable[[SoftnessConfig], int]
    rows: tuple[str, ...] = tuple(ROWS)
    default_rows: tuple[str, ...] = DENG_ROWS
    patience: Callable[[SoftnessConfig], int] = lambda cfg: 0  # early stopping's, 0 = none


def toy_ko_data(cfg: SoftnessConfig) -> DataConfig:
    return DataConfig(task="toy-ko", task_seed=cfg.seed, train_size=cfg.train_size,
                      valid_size=cfg.valid_size, test_size=cfg.test_size)  # fmt: skip


def score_translation(cfg: SoftnessConfig, out: Path, which: str = "last") -> dict[str, Any]:
    """Every number of one translation run (checkpoint ``out/which``: ``last``, or ``best``,
    the lowest valid loss, under early stopping) on its task's test set (rebuilt from the data
    spec in the checkpoint; BLEU on detokenised subwords for spm; AER only where the test set
    has gold links), and its learning curve (``valid_curve``: the valid loss after each
    epoch, the exact marginal's for the latent rows), the epochs run and the best epoch."""
    from ...data.batching import batches
    from ...data.source import load_spec, tokenisers_for
    from ...decode import translate
    from ...eval.alignment import attention_entropy, evaluate_alignments
    from ...eval.forced import forced_attention, gold_from_examples
    from ...eval.text import score
    from ...train import checkpoint
    from . import measure as sm

    ck = checkpoint.load(out / which)
    test = load_spec(ck.meta, quiet=True).test
    tgt_tok = tokenisers_for(ck.meta)[1]
    m, sv, tv = ck.model, ck.src_vocab, ck.tgt_vocab
    t0 = time.perf_counter()
    hyps = translate(m, test, sv, tv, batch_size=128).hyps
    decode_s = (time.perf_counter() - t0) / len(test)
    s = score(hyps, test, detok=tgt_tok.decode if tgt_tok.name == "spm" else None)
    weights = forced_attention(m, test, sv, tv)  # (T_i, S_i) each
    if all(e.links for e in test):
        align = evaluate_alignments(weights, gold_from_examples(test))
        entropy, aer = align.entropy, align.aer_argmax
    else:  # no gold links (Multi30K): the entropy alone
        entropy, aer = sum(attention_entropy(w) for w in weights) / len(weights), None
    fixed = batches(list(test)[: cfg.batch_size], sv, tv, cfg.batch_size)[0]
    return {
        "quality": s.bleu,
        "exact": 100 * s.exact_match,
        "bleu": s.bleu,
        **sm.exact_scores(m, test, sv, tv),
        "entropy": entropy,
        "aer": aer,
        "in_cell": None,
        "step_seconds": sm.step_seconds(m, fixed, cfg.timing_reps),
        "decode_seconds": decode_s,
        "grad_variance": sm.gradient_variance(m, fixed, cfg.draws),
        "parameters": sum(p.numel() for p in m.parameters()),
        "updates": steps_done(out),
        **learning_curve(out, ck.meta),
    }


def learning_curve(out: Path, meta: Mapping[str, Any]) -> dict[str, Any]:
    """From ``out/history.json`` and the scored checkpoint's meta: the valid loss after each
    epoch (``valid_curve``), the epochs run and the epoch scored (``best_epoch``; for
    ``last`` the final one)."""
    rows = history(out)
    return {"valid_curve": [h["valid_loss"] for h in rows], "epochs": len(rows),
            "best_epoch": int(meta.get("epoch", len(rows)))}  # fmt: skip


def caption_model(cfg: SoftnessConfig, row: str) -> ModelConfig:
    return ModelConfig("captioner", "small", caption_options(cfg, row, cfg.caption_updates))


def translation_model(cfg: SoftnessConfig, row: str) -> ModelConfig:
    return ModelConfig(cfg.model, "small", model_options(cfg, row))


TASKS: dict[str, Task] = {
    "toy-ko": Task("BLEU", toy_ko_data, score_translation, translation_model,
                   lambda cfg: cfg.epochs, lambda cfg: cfg.updates),  # fmt: skip
    "multi30k": Task("BLEU", multi30k_data, partial(score_translation, which="best"),
                     translation_model, lambda cfg: cfg.multi30k_epochs,
                     lambda cfg: cfg.multi30k * cfg.multi30k_epochs,
                     *TASK_ROWS["multi30k"],
                     patience=lambda cfg: cfg.multi30k_patience),  # fmt: skip
    "digit-captions": Task("exact %", caption_data, score_caption, caption_model,
                           lambda cfg: cfg.caption_epochs, lambda cfg: cfg.caption_updates,
                           *TASK_ROWS["digit-captions"]),  # fmt: skip
}


def fit_config(cfg: SoftnessConfig, task: str, row: str, seed: int, out: Path) -> FitConfig:
    """The ``attnkit.fit`` config of ``row`` on ``task`` with ``seed``: the same data, batches,
    optimiser and updates for every row."""
    t = TASKS[task]
    caption = task == "digit-captions"
    return FitConfig(
        data=t.data(cfg),
        model=t.model(cfg, row),
        train=TrainConfig(epochs=t.epochs(cfg), batch_size=cfg.batch_size,
                          lr=cfg.caption_lr if caption else cfg.lr,
                          lr_decay=cfg.caption_lr_decay if caption else "none",
                          patience=t.patience(cfg), save_every=max(t.updates(cfg) // 4, 10),
                          seed=seed,
                          # captions: greedy exact match on every valid canvas after each
                          # epoch, the learning curve (history.json)
                          valid_decode=-1 if caption else 0,
                          progress=False),  # fmt: skip
        out=out,
        overwrite=True,  # the experiment's own folder: a re-run replaces its models
        threads=cfg.threads,
    )


TRANSLATION = ("toy-ko", "multi30k")  # judged on the contract (checks.py)

# -- numbers and verdict ----------------------------------------------------------------------

MEASURES = ("quality", "exact", "bleu", "ppl", "ppl_bound", "entropy", "aer", "in_cell",
            "step_seconds", "decode_seconds", "grad_variance", "valid_exact")  # fmt: skip


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and not math.isnan(x)]
    return sum(vals) / len(vals) if vals else None


def _std(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and not math.isnan(x)]
    if len(vals) < 2:
        return 0.0 if vals else None
    mu = sum(vals) / len(vals)
    return math.sqrt(sum((x - mu) ** 2 for x in vals) / (len(vals) - 1))


def summarise(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """task -> row -> {measure: mean, measure_std: sample std over seeds, parameters, ...}."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        out.setdefault(r["task"], {}).setdefault(r["row"], {})
    for task, rows in out.items():
        for row in rows:
            mine = [r for r in records if r["task"] == task and r["row"] == row]
            s: dict[str, Any] = {"seeds": len(mine), "parameters": mine[0]["parameters"],
                                 "updates": sorted({r["updates"] for r in mine})}  # fmt: skip
            for k in MEASURES:
                s[k] = _mean([r.get(k) for r in mine])
                s[f"{k}_std"] = _std([r.get(k) for r in mine])
            rows[row] = s
    return out


def run_experiment(cfg: SoftnessConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train every row on every task with every seed, score, summarise, time the reduction,
    judge."""
    from .measure import reduction_cost

    seeds = cfg.seed_list
    n_seeds = {"toy-ko": cfg.seeds, "multi30k": cfg.multi30k_seeds,
               "digit-captions": cfg.caption_seeds}  # fmt: skip
    task_seeds = {t: [cfg.seed + i for i in range(n_seeds[t])] for t in TASKS}
    tasks = list(cfg.task_list)
    if "multi30k" in tasks:
        try:
            write_subset(cfg)
        except FileNotFoundError as e:
            say(f"multi30k skipped: {e}")
            tasks.remove("multi30k")
    if not tasks:
        raise FileNotFoundError("no task left to run: multi30k was the only one, and its "
                                "data is absent (see above)")  # fmt: skip
    rows = {t: cfg.rows_of(t) for t in tasks}
    cnn_report = None
    if "digit-captions" in tasks and cfg.caption_cnn in ("", "scratch"):
        if cfg.caption_cnn == "":  # Xu's fixed features: one CNN, trained once, for every row
            path = out / "digit-captions" / "cnn.pt"
            say(f"digit-captions: training the CNN as a patch digit classifier "
                f"({cfg.caption_cnn_epochs} epochs) -> {path}")  # fmt: skip
            cnn_report = pretrain_features(cfg, cfg.caption_cnn_epochs, path)
            say(f"  patch accuracy: train {cnn_report['train_accuracy']:.4f}, valid "
                f"{cnn_report['valid_accuracy']:.4f}; canvases with every patch right (the "
                f"features' ceiling of exact match): train "
                f"{100 * cnn_report['train_canvas_accuracy']:.2f}%, valid "
                f"{100 * cnn_report['valid_canvas_accuracy']:.2f}%")  # fmt: skip
            cfg = replace(cfg, caption_cnn=str(path))
        else:
            cfg = replace(cfg, caption_cnn="")  # each row trains its CNN from scratch
    for t in tasks:
        model = "captioner" if t == "digit-captions" else f"{cfg.model} ({cfg.decoder} decoder)"
        say(f"softness experiment, {t}: {model} with {', '.join(rows[t])} x seeds "
            f"{task_seeds[t]}; "
            f"{TASKS[t].updates(cfg)} updates of {cfg.batch_size} each"
            + "".join(f"; no {r} row here" for r in cfg.row_list if r not in rows[t]))  # fmt: skip
    t0 = begin(out, say, f"{cfg.jobs} at a time")
    runs = {(t, r, s): out / t / r / f"seed{s}"
            for t in tasks for s in task_seeds[t] for r in rows[t]}  # fmt: skip
    configs = {f"{t}/{r}/seed{s}": fit_config(cfg, t, r, s, d) for (t, r, s), d in runs.items()}
    steps = {f"{t}/{r}/seed{s}": TASKS[t].updates(cfg) for t, r, s in runs}
    seconds = train_all(configs, jobs=cfg.jobs, steps=steps, log_dir=out, say=say)
    say("scoring (test set, timings, gradient variance) ...")
    with torch_threads(cfg.threads):
        records = [
            {"task": t, "row": r, "seed": s, **TASKS[t].score(cfg, d),
             "train_seconds": seconds[f"{t}/{r}/seed{s}"]}
            for (t, r, s), d in runs.items()
        ]  # fmt: skip
        small = cfg.updates < 50  # --quick: a token measurement
        cost = reduction_cost(8 if small else 32, 16 if small else 512, 8 if small else 256,
                              8 if small else 128, 2 if small else 30)  # fmt: skip
    summary = summarise(records)
    checks, reported = [], {}
    for t in tasks:
        if t in TRANSLATION:  # the contract: intervals over seeds, three outcomes
            checks += translation_checks(records, t, TASKS[t].patience(cfg),
                                         bleu=t == "multi30k",
                                         cap=TASKS[t].epochs(cfg))  # fmt: skip
            reported[t] = {"entropy_order": entropy_order(summary[t]),
                           "bleu_gaps_vs_soft": paired_gaps(records, t, "bleu"),
                           "ppl_gaps_vs_soft": paired_gaps(records, t, "ppl")}  # fmt: skip
    if "digit-captions" in tasks:  # Xu 2015 Table 1 on the contract
        checks += caption_checks(records, "digit-captions")
    checks = scoped_of(checks, {t: task_seeds[t] for t in tasks}, records,
                       budget_tasks(cfg, tasks))  # fmt: skip
    parts = task_verdicts(checks, tasks)
    return {
        "config": asdict(cfg),
        "seeds": seeds,
        "task_seeds": {t: task_seeds[t] for t in tasks},
        "updates": cfg.updates,
        "task_updates": {t: TASKS[t].updates(cfg) for t in tasks},
        "metrics": {t: TASKS[t].metric for t in tasks},
        "summary": summary,
        "runs": records,
        "reduction_cost": cost,
        "total_seconds": round(time.perf_counter() - t0, 1),
        "checks": [c.as_json() for c in checks],
        "caption_cnn": cnn_report,
        "reported": reported,
        "verdicts": parts,
        "verdict": combined_verdict(parts),
    }


def budget_tasks(cfg: SoftnessConfig, tasks: Sequence[str]) -> list[str]:
    """The translation tasks of ``tasks`` that train every row for a fixed budget (no early
    stopping: toy-ko), from which the checklist takes no verdict."""
    return [t for t in tasks if t in TRANSLATION and TASKS[t].patience(cfg) == 0]


def parameters_trained(records: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """task -> row -> the parameters the row trains. The variational rows count their
    inference network q as well (used in training only, Deng 2018 §3, but trained, and so
    part of what the row is given): their comparison with soft is not at equal parameters,
    which is why it is reported (checks.PPL_REPORTED), not checked."""
    params: dict[str, dict[str, int]] = {}
    for r in records:
        params.setdefault(r["task"], {})[r["row"]] = r["parameters"]
    return params


def scoped_of(checks: list[Any], task_seeds: dict[str, list[int]],
              records: list[dict[str, Any]], budget: Sequence[str] = ()) -> list[Any]:  # fmt: skip
    """``checks.scoped`` with each task's seed count, each row's trained parameters
    (``parameters_trained``) and the tasks trained for a fixed budget."""
    seeds = {t: len(s) for t, s in task_seeds.items()}
    return scoped(checks, seeds, parameters_trained(records), budget)


def rejudge(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a run's JSON) judged again by today's checks; nothing retrained. The
    translation tasks' checks are recomputed from the stored per-run records (perplexities,
    epochs, best epochs) with the run's own patience and cap; the captions' checks keep the
    intervals the run computed (its bootstrap), scoped again by ``checks.scoped``."""
    from ..evidence import Check

    cfg = result["config"]
    runs = result["runs"]
    task_seeds = result.get("task_seeds") or {
        t: sorted({r["seed"] for r in runs if r["task"] == t})
        for t in dict.fromkeys(r["task"] for r in runs)}  # fmt: skip
    tasks = list(task_seeds)
    patience = {"multi30k": cfg.get("multi30k_patience", 0)}
    cap = {"multi30k": cfg.get("multi30k_epochs")}
    checks: list[Any] = []
    for t in tasks:
        if t in TRANSLATION:
            checks += translation_checks(runs, t, patience.get(t, 0), bleu=t == "multi30k",
                                         cap=cap.get(t))  # fmt: skip
        else:
            checks += [Check(c["name"], c["value"], tuple(c["ci"]), c["threshold"],
                             c["outcome"], "claim" if c["kind"] == "report" else c["kind"],
                             c["reason"].split(" (reported: ")[0])
                       for c in result["checks"] if c["name"].startswith(f"{t}:")
                       and ": seeds for a check" not in c["name"]
                       and ": claim checks the paper sets" not in c["name"]]  # fmt: skip
    budget = [t for t in tasks if t in TRANSLATION and patience.get(t, 0) == 0]
    checks = scoped_of(checks, task_seeds, runs, budget)
    parts = task_verdicts(checks, tasks)
    return {**result, "task_seeds": task_seeds, "checks": [c.as_json() for c in checks],
            "verdicts": parts, "verdict": combined_verdict(parts)}


EXPERIMENT = Experiment.of(
    __name__,
    name="softness",
    help="soft vs exact vs hard vs variational attention (Deng 2018 Table 1; Xu 2015 captions)",
    typical="20 min measured with --jobs 2 on an idle 2-core CPU (Multi30K, 4 rows x 5 "
    "seeds)",
    description="Train one decoder (RNNsearch, Deng's decoder: no context in the recurrence) "
    "with Deng 2018 Table 1's rows: soft, exact marginal likelihood (enumeration), hard "
    "(REINFORCE, soft-attention baseline), variational enumerated and sampled, on a Multi30K "
    "De-En subset (3,200 pairs of at most 10 words, 2,000 subwords; read from "
    "../shared/data/multi30k, skipped with a message when absent), each row trained to a "
    "validation plateau (early stopping, patience 3, the same cap of 40 epochs), 5 seeds "
    "(variational-sample with --rows); "
    "report BLEU, exact perplexity (the marginal for the latent rows; variational's bound), "
    "attention entropy, seconds per update and per sentence, the attention gradient's "
    "variance and the learning curves; time the hard vs soft reduction. Check on t intervals "
    "over seeds of the paired perplexity gaps that exact <= soft and soft <= hard "
    "(INCONCLUSIVE when a compared run hit the cap still improving, a cap is under 3x its "
    "row's median stop, or a compared pair sits at its floor of 1); variational <= soft and "
    "the entropy order are reported. digit-captions (--tasks digit-captions, its own run) runs "
    "Xu 2015's captioner in Xu's setting (a CNN trained once as a patch digit classifier, "
    "then frozen; Xu's hard recipe) with rows mean, soft, hard, 5 seeds, and checks Xu's "
    "Table 1 on a paired bootstrap: hard within 5 points of soft in exact match, both more "
    "than 20 above mean pooling, both reported (a margin the paper does not set; true by "
    "construction), so captions give no verdict. A check needs 5 seeds, each compared row a "
    "cap 3x its median stop, and a fixed budget (toy-ko) gives no verdict. "
    "--tasks toy-ko is the seconds-long smoke setting (8 seeds, 400 updates, with AER). "
    "Writes OUT/softness.{csv,json,png}; exits 0/1/2 for REPRODUCED / NOT REPRODUCED / "
    "INCONCLUSIVE.",
    config=SoftnessConfig,
)

__all__ = [
    "EXPERIMENT",
    "QUICK",
    "rejudge",
    "ROWS",
    "TASKS",
    "SoftnessConfig",
    "Task",
    "model_options",
    "run_experiment",
    "score_translation",
    "summarise",
    "fit_config",
]
