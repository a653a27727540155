"""Attention vs convolution vs data: a small CNN against a small ViT-style self-attention
model on 1% .. 100% of a training set.

The claim: convolution builds in locality and translation equivariance; self-attention over
patches must learn them from data, so with little data a CNN generalises better, and
attention catches up (or overtakes) only as data grows (Dosovitskiy et al. 2021, "An Image is
Worth 16x16 Words", §4.2 and Fig. 3–4: ViT "overfit[s] more than ResNets with comparable
computational cost" on smaller datasets; "the convolutional inductive bias is useful for
smaller datasets, but for larger ones, learning the relevant patterns directly from data is
sufficient"; d'Ascoli et al. 2021, ConViT, make the same point at small data fractions).

The run (``data.py``, ``models.py``): two tasks on scikit-learn's bundled 8×8
digits, ``digits`` (one digit) and ``canvas`` (one digit in a random cell of a 3×3 canvas,
24×24; the label does not depend on where the digit is). A CNN (three bias-free 3×3
convolutions, global average pooling) and a ViT-style model (patches, class token, learned
position embeddings, pre-norm attnkit self-attention layers; one patch side ``--patch`` on
both tasks) at equal parameter counts (the CNN's width fitted to the attention model's count,
per task). Each is trained on nested,
class-balanced subsets of the training images (``--fractions``) with *the same number of
updates* whatever the subset (``attnkit.train.classify.fit_classifier``: same steps, batch
size, Adam learning rate, clipping; the same batches for both models at one fraction and
seed), for ``--seeds`` seeds (the subset drawn, the initialisation and the batches change with
the seed; the image split is fixed by ``--seed``). Test accuracy on held-out images (canvas:
each held-out image in every cell). The attention model's class-token attention (last layer,
averaged over heads) is mapped back onto a few test images; on the canvas task the share of it
on the digit's cell is measured at every fraction.

The checks (thresholds fixed from the claim before any run; evidence.py's contract: 95%
t-intervals over the seeds, >= 5 by default, three outcomes), per task, gap = CNN −
attention accuracy of one seed (the same subset and batches for both models):
  * (claim) the CNN leads at small data: the seed's mean gap over the fractions <= 10% > 0;
  * (claim) the lead shrinks as data grows: the seed's least-squares slope of the gap
    against log10(fraction), over all fractions, < 0 (the learning-curve statistic);
  * (design, per arm and per fraction) every compared cell is off the ceiling (its mean
    accuracy over the seeds more than 2 points below 100%) and off the floor (more than 2
    points above chance, 10%): one cell at a bound makes the verdict INCONCLUSIVE, whatever
    the other cells; and the better arm learnt the task at the largest fraction (>= 80%).
The default fractions start at 5%: at 1% (13 images, about one per class) the CNN sat 5
points above chance on the canvas, too near the floor for a gap there to say anything.
Where attention catches up is reported, not checked (the paper makes no claim at our scale):
per task, the smallest fraction from which on the mean gap stays below 2 points.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from ...train.classify import accuracy, fit_classifier
from .. import evidence as ev
from ..base import Experiment, Say, Tally, begin
from ..pool import run_each
from .config import SMALL, InductiveConfig
from .data import (
    CANVAS_CELLS,
    ImageTask,
    balanced_order,
    load_task,
    subset_size,
)
from .models import MODELS, PatchAttention, build, mass_on_cell, parameters

CATCH_UP_GAP = 0.02  # reported: "caught up" when the gap stays below 2 points from there on
CHANCE = 0.1  # ten classes
EDGE = 0.02  # the ceiling / floor margin of the design check
LEARNED = 0.80  # the better arm at the largest fraction


QUICK = dict(
    fractions="0.1,1", seeds=2, steps=3, batch_size=8, dim=8, layers=1, test_cells=1, maps=2, jobs=1
)


@dataclass(frozen=True)
class Job:
    """One training run: ``model`` on ``fraction`` of ``task``'s training images, ``seed``."""

    task: str
    model: str
    fraction: float
    seed: int


def training_subset(task: ImageTask, fraction: float, seed: int) -> torch.Tensor:
    """Indices of the training images used at ``fraction`` with ``seed``: a prefix of one
    class-balanced order, so the subsets of one seed are nested (see data.py)."""
    order = balanced_order(task.train_y, seed)
    return torch.tensor(order[: subset_size(len(order), fraction)])


def train_batch(
    task: ImageTask, subset: torch.Tensor, batch_size: int, seed: int, step: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Update ``step``'s batch: ``batch_size`` images drawn uniformly (with replacement) from
    ``subset``, a pure function of (seed, step), identical for both models."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    pick = subset[torch.randint(0, len(subset), (batch_size,), generator=gen)]  # (B,)
    return task.train_x[pick], task.train_y[pick]  # (B, S, S), (B,)


def score_accuracy(model: torch.nn.Module, task: ImageTask, chunk: int = 1024) -> float:
    """Accuracy over all of ``task``'s test images, scored ``chunk`` at a time."""
    hits = 0.0
    for i in range(0, len(task.test_y), chunk):
        x, y = task.test_x[i : i + chunk], task.test_y[i : i + chunk]
        hits += accuracy(model, x, y) * len(y)
    return hits / len(task.test_y)


def shown_examples(task: ImageTask, k: int) -> torch.Tensor:
    """Test examples whose maps are drawn: the first k (canvas: k distinct images, the i-th
    in cell i mod 9, so that the maps show different digits in different places)."""
    if task.test_cell is None:
        return torch.arange(min(k, len(task.test_y)))
    picked: list[int] = []
    used: set[int] = set()
    for j, (image, cell) in enumerate(zip(task.test_image.tolist(), task.test_cell.tolist(),
                                          strict=True)):  # fmt: skip
        if len(picked) < k and cell == len(picked) % CANVAS_CELLS**2 and image not in used:
            picked.append(j)
            used.add(image)
    return torch.tensor(picked)


def attention_maps(model: PatchAttention, task: ImageTask, k: int) -> dict[str, Any]:
    """Pixels, labels, predictions and class-token maps (patch grid) of ``k`` test images."""
    pick = shown_examples(task, k)
    x = task.test_x[pick]  # (k, S, S)
    with torch.no_grad():
        predicted = model(x).argmax(-1)  # (k,)
    return {
        "patch": model.patch,
        "images": x.numpy().round(3).tolist(),
        "labels": task.test_y[pick].tolist(),
        "predicted": predicted.tolist(),
        "maps": model.class_attention(x).numpy().round(4).tolist(),  # (k, g, g)
    }


def train_one(cfg: InductiveConfig, job: Job) -> dict[str, Any]:
    """Train one model on one subset; score it (and, for attention, look at its maps)."""
    torch.set_num_threads(cfg.threads)
    task = load_task(job.task, cfg.seed, cfg.test_cells)
    subset = training_subset(task, job.fraction, job.seed)
    torch.manual_seed(job.seed)
    model = build(job.model, task.side, cfg.patch, cfg.dim, cfg.heads, cfg.layers)
    hist = fit_classifier(
        model,
        lambda s: train_batch(task, subset, cfg.batch_size, job.seed, s),
        cfg.steps,
        cfg.lr,
        job.seed,
        clip=cfg.clip,
    )
    tail = hist.loss[-max(1, cfg.steps // 10) :]
    out: dict[str, Any] = {
        "accuracy": score_accuracy(model, task),
        "parameters": parameters(model),
        "train_images": len(subset),
        "final_train_loss": sum(tail) / len(tail),
        "train_seconds": round(hist.seconds, 2),
    }
    if isinstance(model, PatchAttention):
        if task.test_cell is not None:
            maps = torch.cat(
                [
                    model.class_attention(task.test_x[i : i + 1024])
                    for i in range(0, len(task.test_y), 1024)
                ]
            )
            on_cell = mass_on_cell(maps, task.test_cell, CANVAS_CELLS)  # (N,)
            out["attention_on_digit_cell"] = float(on_cell.mean())
        if job.fraction == cfg.fraction_list[-1] and job.seed == cfg.seed:
            out["maps"] = attention_maps(model, task, cfg.maps)
    return out


def run_jobs(cfg: InductiveConfig, jobs: list[Job], say: Say) -> list[dict[str, Any]]:
    """``train_one`` for every job, ``cfg.jobs`` at a time (spawned processes)."""
    tally = Tally(len(jobs), say)
    results: list[dict[str, Any]] = []

    def collect(result: dict[str, Any]) -> None:  # a progress line every 12 models
        results.append(result)
        if len(results) % 12 == 0 or len(results) == len(jobs):
            tally("models trained", runs=len(results) - tally.done)

    run_each(partial(train_one, cfg), jobs, cfg.jobs, lambda _, result: collect(result))
    return results


def catch_up(fractions: list[float], gaps: list[float]) -> float | None:
    """The smallest fraction from which on every gap (CNN − attention) is below 2 points;
    None when even the largest fraction's gap is not."""
    found = None
    for f, g in reversed(list(zip(fractions, gaps, strict=True))):
        if not g < CATCH_UP_GAP:
            break
        found = f
    return found


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of ys against xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)  # fmt: skip


def at_bound(task: str, fractions: list[float], acc: dict[str, list[list[float]]],
             bound: float, *, floor: bool = False) -> ev.Check:
    """A design check per compared arm and per fraction: every cell's mean accuracy over the
    seeds more than ``EDGE`` from ``bound`` (1.0, the ceiling; ``floor=True``: chance);
    value = the cells at the bound. One such cell makes the verdict INCONCLUSIVE: a gap
    there cannot show, and no other cell averages it away. Reads ``MODELS`` only."""
    where = "floor" if floor else "ceiling"
    means = {(k, f): sum(acc[k][i]) / len(acc[k][i])
             for k in MODELS for i, f in enumerate(fractions)}  # fmt: skip
    near = [f"{k} at {f:.0%} ({m:.3f})" for (k, f), m in means.items()
            if abs(m - bound) <= EDGE]  # fmt: skip
    closest = min(means.values(), key=lambda m: abs(m - bound))
    name = f"{task}: cells at the {where} (each arm, each fraction)"
    reason = (f"{name}: {len(near)} of {len(means)} cells within {EDGE:g} of {bound:g}; the "
              f"closest {closest:.3f}")  # fmt: skip
    if near:
        reason += f": {', '.join(near)}, where no gap can show"
    n = float(len(near))
    return ev.Check(name, n, (n, n), 0.0, ev.INCONCLUSIVE if near else ev.PASS, "design",
                    reason)  # fmt: skip


def checks_of(
    fractions: list[float], acc: dict[str, dict[str, list[list[float]]]]
) -> list[ev.Check]:
    """The checks of the module docstring on accuracies ``acc[task][model][fraction][seed]``
    (fractions smallest first). Only the compared models (``MODELS``) are read."""
    small = [i for i, f in enumerate(fractions) if f <= SMALL]
    logf = [math.log10(f) for f in fractions]
    checks = []
    for t, m in acc.items():
        seeds = range(len(m["cnn"][0]))
        gap = [[m["cnn"][i][s] - m["attention"][i][s] for i in range(len(fractions))]
               for s in seeds]  # [seed][fraction]  # fmt: skip
        checks += [
            at_bound(t, fractions, m, 1.0),
            at_bound(t, fractions, m, CHANCE, floor=True),
            ev.learned(f"{t}: better arm at {fractions[-1]:.0%} of the data",
                       max(sum(m[k][-1]) / len(m[k][-1]) for k in MODELS), LEARNED),
            ev.on_interval(f"{t}: CNN lead at <= {SMALL:.0%} of the data",
                           ev.t_interval([sum(g[i] for i in small) / len(small) for g in gap]),
                           0.0),
            ev.on_interval(f"{t}: slope of the CNN lead per decade of data",
                           ev.t_interval([slope(logf, g) for g in gap]), 0.0, above=False),
        ]  # fmt: skip
    return checks


def run_experiment(cfg: InductiveConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """Train every (task, model, fraction, seed), then average over seeds and check."""
    tasks, fractions, seeds = cfg.task_list, cfg.fraction_list, cfg.seed_list
    jobs = [
        Job(t, m, f, s)
        for t in reversed(tasks)
        for m in MODELS
        for f in reversed(fractions)
        for s in seeds
    ]  # the slowest (canvas CNNs) first
    t0 = begin(
        out,
        say,
        f"inductive-bias experiment: {', '.join(MODELS)} on {', '.join(tasks)}; fractions "
        f"{fractions}, seeds {seeds}; {cfg.steps} updates of {cfg.batch_size} each; "
        f"{len(jobs)} models, {cfg.jobs} at a time",
    )
    res = dict(zip(jobs, run_jobs(cfg, jobs, say), strict=True))

    def grid(t: str, m: str, key: str) -> list[list[Any]]:  # [fraction][seed]
        return [[res[Job(t, m, f, s)][key] for s in seeds] for f in fractions]

    acc = {t: {m: grid(t, m, "accuracy") for m in MODELS} for t in tasks}
    mean = {t: {m: [sum(a) / len(a) for a in acc[t][m]] for m in MODELS} for t in tasks}
    std = {
        t: {m: [float(torch.tensor(a).std(unbiased=False)) for a in acc[t][m]] for m in MODELS}
        for t in tasks
    }
    checks = checks_of(fractions, acc)
    gaps = {t: [c - a for c, a in zip(m["cnn"], m["attention"], strict=True)]
            for t, m in mean.items()}  # fmt: skip
    last = {t: {m: res[Job(t, m, fractions[-1], seeds[0])] for m in MODELS} for t in tasks}
    return {
        "config": asdict(cfg),
        "tasks": tasks,
        "fractions": fractions,
        "seeds": seeds,
        "train_images": {
            t: [res[Job(t, "cnn", f, seeds[0])]["train_images"] for f in fractions] for t in tasks
        },
        "test_images": {t: len(load_task(t, cfg.seed, cfg.test_cells).test_y) for t in tasks},
        "parameters": {t: {m: last[t][m]["parameters"] for m in MODELS} for t in tasks},
        "updates": {
            "steps": cfg.steps,
            "batch_size": cfg.batch_size,
            "lr": cfg.lr,
            "clip": cfg.clip,
            "optimiser": "Adam",
            "same_batches": True,
            "same_steps_at_every_fraction": True,
        },
        "accuracy": acc,
        "mean": mean,
        "std": std,
        "final_train_loss": {t: {m: grid(t, m, "final_train_loss") for m in MODELS} for t in tasks},
        "attention_on_digit_cell": {
            t: [sum(a) / len(a) for a in grid(t, "attention", "attention_on_digit_cell")]
            for t in tasks
            if t == "canvas"
        },
        "maps": {t: last[t]["attention"]["maps"] for t in tasks},
        "train_seconds": sum(r["train_seconds"] for r in res.values()),
        "total_seconds": round(time.perf_counter() - t0, 1),
        "gap": gaps,
        "catch_up": {t: catch_up(fractions, g) for t, g in gaps.items()},
        **ev.judged(checks),
    }


EXPERIMENT = Experiment.of(
    __name__,
    name="inductive-bias",
    help="attention vs convolution vs data: a CNN and a ViT-style model on 5%..100% of digits",
    typical="9 min with --jobs 2 on a 2-core CPU at load about 2 (1,001 s of CPU)",
    description="Train a small CNN and a small ViT-style self-attention model (patches, "
    "learned position embeddings; equal parameter counts, the same batches and number of "
    "updates at every data fraction) on 5%, 10%, 25%, 50% and 100% of scikit-learn's 8x8 "
    "digits, and of one digit placed in a random cell of a 3x3 canvas, over several seeds; "
    "check that the CNN wins at small data and that its lead shrinks with data, each arm "
    "and fraction off the floor and the ceiling. Writes "
    "OUT/inductive-bias.{csv,json,png} (learning curves) and OUT/inductive-bias-maps.png "
    "(class-token attention on test digits); checks on 95% intervals over seeds, exits 0 "
    "REPRODUCED, 1 NOT REPRODUCED, 2 INCONCLUSIVE.",
    config=InductiveConfig,
)

__all__ = [
    "EXPERIMENT",
    "QUICK",
    "InductiveConfig",
    "Job",
    "at_bound",
    "catch_up",
    "checks_of",
    "run_experiment",
    "score_accuracy",
    "train_batch",
    "train_one",
    "training_subset",
]
