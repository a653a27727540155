"""One job of ``attnkit experiment explanation``: one task and one seed. It trains, on the
task's fixed training examples, each to a validation plateau (``fit_classifier``: Adam, the
same batches for every arm of the seed; validation loss every ``every`` updates, stop after
``patience`` scores without a lower one, the best weights kept, at most ``cap`` updates):

    attention     the BiRNN with additive attention (Jain & Wallace's model)
    uniform       the same with α frozen to uniform (Wiegreffe & Pinter §3.1)
    again         the attention model from another initialisation (W&P §3.2: how far two
                  equally trained models' attention lie apart)
    mlp-uniform, mlp-transplanted, mlp-attention
                  the token MLP without context, pooled uniformly, by the attention model's
                  weights imposed, and by its own trained attention (W&P §3.3)

then measures the attention model on the test examples (``measure.py``), the same τ on the
attention model as initialised (a control: how far the measures agree before any training),
and scores every model's test accuracy.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...train.classify import History, fit_classifier
from ..pool import generator
from .data import Encoded, splits, vocabulary
from .measure import (
    Adversary,
    adversarial_jsd,
    agreement,
    chance_hits,
    importance,
    jsd,
    top_hits,
)
from .models import BiRNNAttention, Sizes, TokenMLP

AGAIN = 7_919  # offset of the second initialisation's seed
MIN_DELTA = 1e-3  # a validation loss counts as lower when it is lower by more than this (nats)
MODELS = ("attention", "uniform", "again", "mlp-uniform", "mlp-transplanted", "mlp-attention")


@dataclass(frozen=True)
class Setting:
    """What every job of a run shares."""

    train: tuple[tuple[str, int], ...]  # (task, training examples) of each task
    held_out: tuple[int, int]  # validation and test examples
    data_seed: int
    emb: int
    hidden: int
    attn: int
    cell: str
    batch_size: int
    lr: float
    clip: float
    every: int
    patience: int
    cap: int
    adversary: Adversary
    threads: int


@torch.no_grad()
def evaluate(model: nn.Module, data: Encoded, chunk: int = 512) -> tuple[float, list[int]]:
    """(mean cross-entropy, per-example correctness) of ``model`` on ``data``, eval mode."""
    was = model.training
    model.eval()
    loss, hits = 0.0, []
    for s in range(0, len(data), chunk):
        ids, y = data.ids[s : s + chunk], data.labels[s : s + chunk]
        ids = ids[:, : max(int((ids != 0).sum(-1).max()), 1)]
        logits = model(ids)  # (chunk, 2)
        loss += float(F.cross_entropy(logits, y, reduction="sum"))
        hits += (logits.argmax(-1) == y).int().tolist()
    model.train(was)
    return loss / len(data), hits


def train(model: nn.Module, train_set: Encoded, valid: Encoded, s: Setting, seed: int
          ) -> dict[str, Any]:  # fmt: skip
    """Train ``model`` to a validation plateau (module docstring); the best weights are left
    in it. Returns the validation curve, the update of the best score, the updates run and
    whether the cap cut the run before its plateau (censored)."""
    n = len(train_set)

    def batch(step: int) -> tuple[Tensor, Tensor]:
        idx = torch.randint(n, (s.batch_size,), generator=generator(seed, step))  # (B,)
        ids = train_set.ids[idx]  # (B, T)
        return ids[:, : int((ids != 0).sum(-1).max())], train_set.labels[idx]

    curve: list[float] = []
    best: dict[str, Any] = {"loss": math.inf, "state": None, "step": 0}

    def stop(h: History) -> bool:
        if h.steps % s.every:
            return False
        curve.append(evaluate(model, valid)[0])
        if curve[-1] < best["loss"] - MIN_DELTA:
            best.update(loss=curve[-1], state=copy.deepcopy(model.state_dict()), step=h.steps)
        return since_best(curve) >= s.patience

    hist = fit_classifier(model, batch, s.cap, s.lr, seed, clip=s.clip, until=stop)
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    model.eval()
    plateau = bool(curve) and since_best(curve) >= s.patience
    return {"valid_curve": [round(x, 4) for x in curve], "best_step": best["step"],
            "steps_run": hist.steps, "censored": not plateau}  # fmt: skip


def since_best(curve: list[float]) -> int:
    """Validation scores since the best one: the last score lower than every earlier one by
    more than ``MIN_DELTA`` (the first score counts as lower)."""
    best, at = curve[0], 0
    for i, x in enumerate(curve[1:], 1):
        if x < best - MIN_DELTA:
            best, at = x, i
    return len(curve) - 1 - at


def seed_job(task: str, seed: int, s: Setting) -> dict[str, Any]:
    """Train and measure one (task, seed): the module docstring."""
    torch.set_num_threads(s.threads)
    t0 = time.process_time()
    data = splits(task, (dict(s.train)[task], *s.held_out), s.data_seed)
    sizes = Sizes(len(vocabulary(task)) + 1, s.emb, s.hidden, s.attn)
    runs: dict[str, dict[str, Any]] = {}
    models: dict[str, nn.Module] = {}

    def fit(name: str, model: nn.Module) -> None:
        runs[name] = train(model, data.train, data.valid, s, seed)
        runs[name]["test_accuracy"] = statistics.fmean(evaluate(model, data.test)[1])
        models[name] = model

    for name, pool, init in (("attention", "attention", seed), ("uniform", "uniform", seed),
                             ("again", "attention", seed + AGAIN)):  # fmt: skip
        torch.manual_seed(init)
        fit(name, BiRNNAttention(sizes, pool, s.cell))
    teacher = models["attention"]
    assert isinstance(teacher, BiRNNAttention)
    for pool in ("uniform", "transplanted", "attention"):
        torch.manual_seed(seed)
        fit(f"mlp-{pool}", TokenMLP(sizes, pool, teacher if pool == "transplanted" else None))

    ids = data.test.ids
    imp = importance(teacher, ids)
    taus = agreement(imp)
    hits = top_hits(imp, data.test.deciding)
    adv, found = adversarial_jsd(teacher, ids, s.adversary, seed)
    again = models["again"]
    assert isinstance(again, BiRNNAttention)
    with torch.no_grad():
        other = again.run(again.embed(ids), ids != 0).weights  # (N, T)
    between = jsd(imp.attention, other)  # (N,)
    torch.manual_seed(seed)  # the attention model as initialised, before any update
    untrained = agreement(importance(BiRNNAttention(sizes, "attention", s.cell), ids))
    return {
        "task": task,
        "seed": seed,
        "runs": runs,
        "tau": {k: _nanmean(v) for k, v in taus.items()},
        "tau_defined": {k: sum(not math.isnan(x) for x in v) for k, v in taus.items()},
        "tau_untrained": {k: _nanmean(v) for k, v in untrained.items()},
        "adversarial_jsd": float(adv.mean()),
        "adversary_found": float(found.float().mean()),
        "seed_jsd": float(between.mean()),
        "max_attention": float(imp.attention.max(-1).values.mean()),
        "top_hits": {k: statistics.fmean(map(float, v)) for k, v in hits.items()},
        "chance_hits": statistics.fmean(chance_hits(data.test.deciding, imp.mask)),
        "test_examples": len(data.test),
        "cpu_seconds": round(time.process_time() - t0, 1),
    }


def _nanmean(xs: list[float]) -> float:
    kept = [x for x in xs if not math.isnan(x)]
    return statistics.fmean(kept) if kept else math.nan


__all__ = ["AGAIN", "MIN_DELTA", "MODELS", "Setting", "evaluate", "seed_job", "since_best", "train"]
