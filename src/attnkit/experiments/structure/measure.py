"""What one docs arm of the structure experiment measures: a HAN variant (``pool``) trained on
generated documents, its learning curve on a fixed validation split, and its per-document
correctness on a fixed test split. Two recipes:

* **Curves** (``train_docs`` 0, the default): fresh documents in every batch for a fixed
  ``cap`` of updates; the curve's area (below) is reported.
* **Converged** (``train_docs`` N > 0): a fixed training set of N documents per seed (drawn
  from the seed, never the validation or test documents' seeds), batches drawn from it by
  (seed, step), early stopping on the validation accuracy (scored every ``every`` updates, a
  stop after ``patience`` scores without a better one, at most ``cap`` updates), and the
  best-validation weights tested. With ``fit`` F > 0 the patience waits until the run has
  fitted its training set (the mean accuracy of its last ``every`` training batches at least
  F) and counts from the later of that score and the best one: a run whose validation
  accuracy sits at chance while it has not yet fitted its documents has stalled, it has not
  converged. With unlimited fresh documents every pooling reaches 100%
  here, so the ceiling, not the pooling, decides; a finite training set is the difficulty
  dial of the papers' own regime (a data set of fixed size, trained to convergence).

Learning curve and its area. The model is scored on the validation documents after every
``every`` updates (and at 0); with a_k the validation accuracy after k·every updates,
k = 0..K (K·every = the cap),

    AUC = (1/K) Σ_{k=1..K} a_k                        (mean accuracy over the curve, in [0, 1])

so a model that learns sooner has the larger AUC, whatever both reach at the cap (the
trapezoid's a_0 is chance for every arm and is left out). Every arm of one seed sees the same
batches (a pure function of seed and step), the same optimiser (Adam), learning rate, clipping
and number of updates (``attnkit.train.classify.fit_classifier``).
Legend: B documents, S sentences, T words, C classes (target vocabulary).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ...data.docs import LABELS, Doc
from ...data.vocab import SPECIALS, Vocab
from ...models.han import HAN, HANConfig
from ...tasks.docs import encode
from ...train.classify import History, fit_classifier
from .data import ASPECT_LABELS, WORDS, Shape, aspect_docs, decoy_docs

GENERATORS: dict[str, tuple[Callable[..., Sequence[Doc]], tuple[str, ...]]] = {
    "decoy": (decoy_docs, LABELS),
    "aspect": (aspect_docs, ASPECT_LABELS),
}
VALID_SEED, TEST_SEED = 10_001, 10_002  # the fixed held-out documents (every seed, every arm)
TRAIN_SEED = 20_011  # a converged run's training documents: seed TRAIN_SEED * (seed + 1)


@dataclass(frozen=True)
class DocsSetting:
    """What every docs arm shares."""

    shape: Shape
    emb: int
    hidden: int
    attn: int
    batch_size: int
    lr: float
    clip: float
    cap: int  # updates
    every: int  # updates between two validation scores
    valid: int  # validation documents
    test: int  # test documents
    threads: int
    train_docs: int = 0  # 0: fresh documents in every batch (curves); N: a fixed training set
    patience: int = 0  # scores without a better one before a converged run stops
    fit: float = 0.0  # training-batch accuracy the patience waits for (0: counts at once)


@dataclass(frozen=True)
class DocsArm:
    """One run: HAN with ``pool`` on the ``task`` documents, ``seed``."""

    task: str  # decoy | aspect
    pool: str  # attention | mean | max | multidim
    seed: int


def vocabularies(task: str) -> tuple[Vocab, Vocab]:
    """The fixed source vocabulary (every word the generators use) and the task's labels."""
    return Vocab([*SPECIALS, *WORDS]), Vocab([*SPECIALS, *GENERATORS[task][1]])


def documents(task: str, n: int, seed: int, shape: Shape) -> Sequence[Doc]:
    return GENERATORS[task][0](n, seed, shape)


def encoded(task: str, docs: Sequence[Doc]) -> tuple[Tensor, Tensor]:
    """docs -> word ids (B, S, T), class ids (B,) in 0..C-1 (the label's index after the
    target vocabulary's specials)."""
    src, tgt = vocabularies(task)
    b = encode(docs, src, tgt, list(range(len(docs))))
    return b.words, b.labels - len(SPECIALS)


class Logits(nn.Module):
    """HAN's logits only, for ``fit_classifier`` (inputs -> logits): words (B, S, T) ->
    (B, C)."""

    def __init__(self, han: HAN) -> None:
        super().__init__()
        self.han = han

    def forward(self, words: Tensor) -> Tensor:
        return self.han(words).logits  # (B, C)


def build(arm: DocsArm, s: DocsSetting) -> Logits:
    src, tgt = vocabularies(arm.task)
    torch.manual_seed(arm.seed)
    classes = len(tgt) - len(SPECIALS)
    return Logits(HAN(HANConfig(src_vocab=len(src), tgt_vocab=classes, emb=s.emb,
                                hidden=s.hidden, attn=s.attn, pool=arm.pool)))  # fmt: skip


@torch.no_grad()
def correct(model: nn.Module, x: Tensor, y: Tensor, chunk: int = 128) -> list[int]:
    """1 for each document of ``x`` (N, S, T) whose arg-max logit is its label ``y`` (N,)."""
    was = model.training
    model.eval()
    hits = [(model(x[i : i + chunk]).argmax(-1) == y[i : i + chunk]).int()  # (chunk,)
            for i in range(0, len(x), chunk)]  # fmt: skip
    model.train(was)
    return [int(h) for h in torch.cat(hits)]


def share_correct(model: nn.Module, x: Tensor, y: Tensor) -> float:
    """The share of the documents of ``x`` (N, S, T) that ``model`` classifies right."""
    hits = correct(model, x, y)
    return sum(hits) / len(hits)


def auc(curve: Sequence[float]) -> float:
    """The module docstring's AUC of a curve [a_0, a_1, ..., a_K] (a_0 left out)."""
    if len(curve) < 2:
        raise ValueError(f"a curve of {len(curve)} point(s): needs a_0 and at least a_1")
    return sum(curve[1:]) / (len(curve) - 1)


def train_docs_arm(arm: DocsArm, s: DocsSetting) -> dict[str, Any]:
    """Train ``arm`` by ``s``'s recipe (``train_curve`` or ``train_converged``)."""
    return (train_converged if s.train_docs else train_curve)(arm, s)


def training_documents(arm: DocsArm, s: DocsSetting) -> tuple[Tensor, Tensor]:
    """A converged run's fixed training set: ``s.train_docs`` documents of ``arm.seed``, the
    same for every arm of that seed: words (N, S, T), classes (N,)."""
    return encoded(arm.task, documents(arm.task, s.train_docs, TRAIN_SEED * (arm.seed + 1),
                                       s.shape))  # fmt: skip


def train_converged(arm: DocsArm, s: DocsSetting) -> dict[str, Any]:
    """Train ``arm`` on its fixed training set (the module docstring's converged recipe);
    its validation curve (a score every ``s.every`` updates), best validation accuracy,
    updates run, whether early stopping ended it, per-document test correctness of the
    best-validation weights, training accuracy, parameters and seconds."""
    torch.set_num_threads(s.threads)
    model = build(arm, s)
    xs, ys = training_documents(arm, s)
    xv, yv = encoded(arm.task, documents(arm.task, s.valid, VALID_SEED, s.shape))
    xt, yt = encoded(arm.task, documents(arm.task, s.test, TEST_SEED, s.shape))

    def batch(step: int) -> tuple[Tensor, Tensor]:
        g = torch.Generator().manual_seed(arm.seed * 1_000_003 + step)
        idx = torch.randint(0, len(xs), (s.batch_size,), generator=g)  # (B,)
        return xs[idx], ys[idx]

    curve: list[float] = []
    best: dict[str, Tensor] = {}
    fitted: list[int] = []  # the index of the first score at which the run had fitted

    def waited() -> int:
        """Scores since the best one, or since the run fitted if that came later."""
        return len(curve) - 1 - max(curve.index(max(curve)), *fitted[:1])

    def stop(h: History) -> bool:
        if h.steps % s.every:
            return False
        curve.append(share_correct(model, xv, yv))
        if curve[-1] > max(curve[:-1], default=-1.0):
            best.update({k: v.detach().clone() for k, v in model.state_dict().items()})
        if not fitted and statistics.fmean(h.accuracy[-s.every:]) >= s.fit:
            fitted.append(len(curve) - 1)
        return bool(fitted) and waited() >= s.patience

    t0 = time.process_time()
    hist = fit_classifier(model, batch, s.cap, s.lr, arm.seed, clip=s.clip, until=stop)
    stopped = bool(fitted) and waited() >= s.patience
    if best:
        model.load_state_dict(best)
    test = correct(model, xt, yt)
    return {
        "curve": [round(a, 4) for a in curve],
        "valid_best": round(max(curve, default=0.0), 4),
        "steps_run": hist.steps,
        "stopped_early": stopped,
        "fitted_at": (fitted[0] + 1) * s.every if fitted else None,  # updates
        "train_accuracy": round(share_correct(model, xs, ys), 4),
        "test_correct": test,
        "test_accuracy": round(sum(test) / len(test), 4),
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": round(hist.seconds, 2),
        "cpu_seconds": round(time.process_time() - t0, 2),
    }


def train_curve(arm: DocsArm, s: DocsSetting) -> dict[str, Any]:
    """Train ``arm`` for ``s.cap`` updates on fresh documents; its validation curve, AUC,
    final validation accuracy, per-document test correctness, parameters and seconds."""
    torch.set_num_threads(s.threads)
    model = build(arm, s)
    xv, yv = encoded(arm.task, documents(arm.task, s.valid, VALID_SEED, s.shape))
    xt, yt = encoded(arm.task, documents(arm.task, s.test, TEST_SEED, s.shape))

    def batch(step: int) -> tuple[Tensor, Tensor]:
        return encoded(arm.task, documents(arm.task, s.batch_size,
                                           arm.seed * 1_000_003 + step, s.shape))  # fmt: skip

    curve = [share_correct(model, xv, yv)]

    def checkpoint(h: History) -> bool:
        if h.steps % s.every == 0:
            curve.append(share_correct(model, xv, yv))
        return False

    t0 = time.process_time()
    hist = fit_classifier(model, batch, s.cap, s.lr, arm.seed, clip=s.clip, until=checkpoint)
    test = correct(model, xt, yt)
    return {
        "curve": [round(a, 4) for a in curve],
        "auc": round(auc(curve), 4),
        "valid_final": round(curve[-1], 4),
        "test_correct": test,
        "test_accuracy": round(sum(test) / len(test), 4),
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": round(hist.seconds, 2),
        "cpu_seconds": round(time.process_time() - t0, 2),
    }


__all__ = ["DocsArm", "DocsSetting", "GENERATORS", "Logits", "TRAIN_SEED", "auc", "build",
           "correct", "documents", "encoded", "share_correct", "train_converged", "train_curve",
           "train_docs_arm", "training_documents", "vocabularies"]  # fmt: skip
