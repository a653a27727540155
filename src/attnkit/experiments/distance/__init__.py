"""Accuracy and gradient against dependency distance Δ: recurrent models vs self-attention.

The claim: in a recurrent network the signal from an input Δ steps back reaches the output
through Δ applications of the recurrence, so its gradient vanishes (roughly) geometrically in
Δ (Hochreiter 1991; Bengio, Simard & Frasconi 1994) and long dependencies are hard to learn;
self-attention connects any two positions by a path of length O(1) (Vaswani et al. 2017,
§4 and Table 1: "maximum path length" O(n) recurrent, O(log_k n) dilated convolutions, O(1)
self-attention), so its accuracy should not depend on the distance.

The run: the recall task of ``data.py`` (the answer is the marked symbol Δ back among
uniform distractors, K symbols, chance 1/K), sequences of T = Δ_max + 1 tokens. One model
of each kind is trained on a mix of distances: every training sequence draws its Δ uniformly
from the grid (``--mix grid``: each scored Δ is trained equally often; ``--mix range`` draws
from 1..Δ_max instead), and is then scored separately at each Δ of the grid. Four models
(``attnkit.models.sequence_classifiers``: LSTM, GRU, causal dilated CNN, causal
self-attention with sinusoidal positions) with the attention model's parameter count (the
others' widths fitted to it),
each trained by ``attnkit.train.classify.fit_classifier`` on the same batches, with the same
Adam learning rate, clipping and number of updates. Measured per Δ: test accuracy, and the
mean gradient norm ‖∂ℓ/∂e_{t−Δ}‖ with respect to the input embedding Δ back, at
initialisation and after training.

The verdict (thresholds fixed from the claim before any run):
  * attention learnt the task: accuracy ≥ 90% at the shortest Δ;
  * attention stays flat: it loses at most 5 points from the shortest to the longest Δ;
  * LSTM and GRU each lose at least 25 points from the shortest to the longest Δ;
  * at initialisation the recurrent gradient vanishes: ‖∂ℓ/∂e_{t−Δmax}‖ ≤ 1% of
    ‖∂ℓ/∂e_{t−Δmin}‖ for LSTM and GRU, while attention keeps ≥ 10% of it.
The CNN is measured and reported, not checked.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ..._checks import check_ranges
from ...models.sequence_classifiers import (
    MODELS,
    Sizes,
    budget_widths,
    build,
    input_gradient_norms,
    parameters,
)
from ...train.classify import accuracy, fit_classifier
from ..base import Experiment, Tally, option, report_of
from ..base import verdict as verdict_text
from ..pool import QuietPool, generator
from .data import recall_batch, vocab_size


@dataclass
class DistanceConfig:
    deltas: str = option(
        "1,5,10,25,50,100,200",
        "distances Δ scored, comma-separated; the "
        "largest sets the length T = Δmax + 1 and the training range 1..Δmax",
    )
    mix: str = option(
        "grid",
        "training distances: grid (each Δ of --deltas equally "
        "often) or range (Δ uniform in 1..Δmax)",
    )
    symbols: int = option(8, "symbols K to recall (chance 1/K)")
    dim: int = option(32, "embedding width of every model and the attention width")
    heads: int = option(2, "attention heads")
    layers: int = option(2, "attention layers; sets the shared parameter budget")
    steps: int = option(400, "updates per model, the shared budget")
    batch_size: int = option(32, "sequences per update")
    lr: float = option(3e-3, "Adam learning rate of every model")
    clip: float = option(1.0, "gradient-norm clipping of every model")
    eval_size: int = option(256, "test sequences per Δ")
    grad_size: int = option(64, "sequences per Δ for the gradient norms")
    seed: int = option(0, "data and initialisation seed")
    jobs: int = option(2, "models trained at once, in a process pool")
    threads: int = option(1, "torch threads per training process")

    def __post_init__(self) -> None:
        grid = self.grid  # raises on a malformed list
        if grid[0] < 1:
            raise ValueError(f"--deltas {self.deltas}: every Δ must be at least 1")
        if self.mix not in ("grid", "range"):
            raise ValueError(f"--mix {self.mix!r}; choose grid or range")
        if self.symbols < 2:
            raise ValueError(f"--symbols {self.symbols}: need at least 2")
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "dim", "heads", "layers", "steps", "batch_size", "eval_size", "jobs", "threads"
        ))  # fmt: skip
        if not 1 <= self.grad_size <= self.eval_size:
            raise ValueError(f"--grad-size {self.grad_size}: need 1 <= it <= --eval-size")
        if self.dim % self.heads or self.dim % 2:
            raise ValueError(f"--dim {self.dim} must be even and divisible by --heads {self.heads}")
        if not self.lr > 0 or self.clip < 0:
            raise ValueError(f"--lr {self.lr} must be positive and --clip {self.clip} >= 0")

    @property
    def grid(self) -> list[int]:
        try:
            grid = sorted({int(d) for d in self.deltas.split(",") if d.strip()})
        except ValueError:
            raise ValueError(
                f"--deltas {self.deltas!r}: pass comma-separated integers, e.g. 1,10,100"
            ) from None
        if len(grid) < 2:
            raise ValueError(f"--deltas {self.deltas!r}: need at least two distances")
        return grid

    @property
    def sizes(self) -> Sizes:
        return Sizes(vocab_size(self.symbols), self.symbols, self.dim, self.grid[-1] + 1)


TRAINING_MIX = {"grid": "uniform over the grid", "range": "uniform in 1..Δmax"}
QUICK = dict(deltas="1,4,8", dim=8, layers=1, steps=3, batch_size=8, eval_size=16,
             grad_size=4, jobs=1)  # fmt: skip


def train_batch(cfg: DistanceConfig, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Update ``step``'s batch, identical for every model: per sequence, Δ uniform over the
    grid (``mix="grid"``) or over 1..Δmax (``mix="range"``)."""
    gen = generator(cfg.seed, 0, step)
    if cfg.mix == "grid":
        grid = torch.tensor(cfg.grid)
        deltas = grid[torch.randint(0, len(grid), (cfg.batch_size,), generator=gen)]  # (B,)
    else:
        deltas = torch.randint(1, cfg.grid[-1] + 1, (cfg.batch_size,), generator=gen)  # (B,)
    return recall_batch(deltas, cfg.sizes.length, cfg.symbols, gen)


def eval_batch(cfg: DistanceConfig, delta: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``eval_size`` test sequences at distance ``delta`` (their own random stream)."""
    deltas = torch.full((cfg.eval_size,), delta)
    return recall_batch(deltas, cfg.sizes.length, cfg.symbols, generator(cfg.seed, 1, delta))


def gradient_by_delta(model: Any, cfg: DistanceConfig) -> list[float]:
    """Mean over ``grad_size`` test sequences of ‖∂ℓ/∂e_{t−Δ}‖, for each Δ of the grid,
    computed on a float64 copy of the model (a recurrent gradient 200 steps back underflows
    float32 to exactly 0; float64 keeps its value)."""
    probe = copy.deepcopy(model).double()
    out = []
    for d in cfg.grid:
        x, y = eval_batch(cfg, d)
        x, y = x[: cfg.grad_size], y[: cfg.grad_size]  # (G, T), (G,)
        at = torch.full((len(x),), cfg.sizes.length - 1 - d)  # (G,)
        out.append(float(input_gradient_norms(probe, x, y, at).mean()))
    return out


def train_one(cfg: DistanceConfig, name: str, width: int) -> dict[str, Any]:
    """Build ``name`` (seeded), probe its gradients, train it, score and probe again."""
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    model = build(name, cfg.sizes, width, cfg.heads, cfg.layers)
    grad_init = gradient_by_delta(model, cfg)
    hist = fit_classifier(model, lambda s: train_batch(cfg, s), cfg.steps, cfg.lr, cfg.seed,
                          clip=cfg.clip)  # fmt: skip
    tail = hist.loss[-max(1, cfg.steps // 10) :]
    return {
        "parameters": parameters(model),
        "width": width,
        "accuracy": [accuracy(model, *eval_batch(cfg, d)) for d in cfg.grid],
        "grad_init": grad_init,
        "grad_trained": gradient_by_delta(model, cfg),
        "final_train_loss": sum(tail) / len(tail),
        "train_seconds": round(hist.seconds, 1),
    }


MIN_ATTN_SHORT = 0.90  # attention has learnt the task at the shortest Δ
MAX_ATTN_DROP = 0.05  # and loses at most 5 points at the longest Δ
MIN_RNN_DROP = 0.25  # LSTM and GRU each lose at least 25 points there
MAX_RNN_GRAD_RATIO = 0.01  # at init, recurrent ‖∂ℓ/∂e_{t−Δmax}‖ / ‖∂ℓ/∂e_{t−Δmin}‖ <= 1%
MIN_ATTN_GRAD_RATIO = 0.10  # attention's ratio >= 10%


def verdict(acc: dict[str, list[float]], grad_init: dict[str, list[float]]
            ) -> tuple[list[str], dict[str, Any]]:  # fmt: skip
    """The checks of the module docstring on accuracies and initial gradient norms, each a
    list over the Δ grid (shortest first). Returns (failed checks, the checked numbers)."""
    drop = {m: a[0] - a[-1] for m, a in acc.items()}
    ratio = {m: g[-1] / g[0] if g[0] > 0 else float("nan") for m, g in grad_init.items()}
    reasons = []
    if not acc["attention"][0] >= MIN_ATTN_SHORT:
        reasons.append(
            f"attention scored {acc['attention'][0]:.0%} at the shortest Δ "
            f"(< {MIN_ATTN_SHORT:.0%}): it has not learnt the task"
        )
    if not drop["attention"] <= MAX_ATTN_DROP:
        reasons.append(f"attention lost {100 * drop['attention']:.1f} points from the shortest "
                       f"to the longest Δ (> {100 * MAX_ATTN_DROP:.0f})")  # fmt: skip
    for m in ("lstm", "gru"):
        if not drop[m] >= MIN_RNN_DROP:
            reasons.append(f"{m.upper()} lost only {100 * drop[m]:.1f} points from the shortest "
                           f"to the longest Δ (< {100 * MIN_RNN_DROP:.0f})")  # fmt: skip
        if not ratio[m] <= MAX_RNN_GRAD_RATIO:
            reasons.append(f"{m.upper()}'s initial gradient Δmax/Δmin ratio is {ratio[m]:.2g} "
                           f"(> {MAX_RNN_GRAD_RATIO:g}): it does not vanish")  # fmt: skip
    if not ratio["attention"] >= MIN_ATTN_GRAD_RATIO:
        reasons.append(f"attention's initial gradient Δmax/Δmin ratio is "
                       f"{ratio['attention']:.2g} (< {MIN_ATTN_GRAD_RATIO:g})")  # fmt: skip
    checks = {
        "accuracy_drop": drop,
        "initial_gradient_ratio": ratio,
        "attention_short_accuracy": acc["attention"][0],
        "thresholds": {
            "min_attention_short_accuracy": MIN_ATTN_SHORT,
            "max_attention_drop": MAX_ATTN_DROP,
            "min_recurrent_drop": MIN_RNN_DROP,
            "max_recurrent_gradient_ratio": MAX_RNN_GRAD_RATIO,
            "min_attention_gradient_ratio": MIN_ATTN_GRAD_RATIO,
        },
        "reproduced": not reasons,
        "reasons": reasons,
    }
    return reasons, checks


def train_all(cfg: DistanceConfig, widths: dict[str, int], say: Any) -> dict[str, dict]:
    """``train_one`` for every model, ``cfg.jobs`` at a time (spawned processes)."""
    tally = Tally(len(MODELS), say)
    out = {}
    if cfg.jobs == 1:
        for m in MODELS:
            tally.starting(f"{m}: training")
            out[m] = train_one(cfg, m, widths[m])
        return out
    with QuietPool(min(cfg.jobs, len(MODELS))) as pool:  # workers never see Ctrl-C
        futures = {m: pool.submit(train_one, cfg, m, widths[m]) for m in MODELS}
        for m, fut in futures.items():
            out[m] = fut.result()
            tally(f"{m}: trained in {out[m]['train_seconds']:.0f}s")
    return out


def run_experiment(cfg: DistanceConfig, out: Path, say: Any = print) -> dict[str, Any]:
    """Train the four models on the same batches, score and probe them by Δ."""
    sizes, grid = cfg.sizes, cfg.grid
    widths = budget_widths(sizes, cfg.heads, cfg.layers)
    say(
        f"distance experiment: recall the marked symbol Δ back (K={cfg.symbols}, T={sizes.length}"
        f", Δ in {grid}; training Δ: {TRAINING_MIX[cfg.mix]}), {cfg.steps} updates of "
        f"{cfg.batch_size} for each of "
        f"{', '.join(MODELS)} ({cfg.jobs} at a time); output in {out}/"
    )
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    res = train_all(cfg, widths, say)
    acc = {m: res[m]["accuracy"] for m in MODELS}
    grad_init = {m: res[m]["grad_init"] for m in MODELS}
    reasons, checks = verdict(acc, grad_init)
    return {
        "config": asdict(cfg),
        "deltas": grid,
        "length": sizes.length,
        "chance": 1 / cfg.symbols,
        "parameters": {m: res[m]["parameters"] for m in MODELS},
        "widths": {m: res[m]["width"] for m in MODELS},
        "updates": {
            "steps": cfg.steps,
            "batch_size": cfg.batch_size,
            "lr": cfg.lr,
            "clip": cfg.clip,
            "optimiser": "Adam",
            "same_batches": True,
        },  # fmt: skip
        "accuracy": acc,
        "grad_init": grad_init,
        "grad_trained": {m: res[m]["grad_trained"] for m in MODELS},
        "final_train_loss": {m: res[m]["final_train_loss"] for m in MODELS},
        "train_seconds": {m: res[m]["train_seconds"] for m in MODELS},
        "total_seconds": round(time.perf_counter() - t0, 1),
        "checks": checks,
        "verdict": verdict_text(reasons),
    }



EXPERIMENT = Experiment(
    name="distance",
    help="accuracy and gradient vs dependency distance: LSTM, GRU, CNN vs self-attention",
    typical="about 80 s on a 2-core CPU; 5.4 min when it is busy",
    description="Train an LSTM, a GRU, a causal dilated CNN and a causal self-attention model "
    "(same parameter budget, same batches, optimiser and number of updates) to recall the "
    "marked symbol Δ positions back among distractors, Δ = 1..200; score accuracy and the "
    "gradient norm w.r.t. the input Δ back (at initialisation and after training) at each Δ, "
    "and check that the recurrent models fall with Δ while attention stays flat. Writes "
    "OUT/distance.{csv,json,png}; exits 1 when the claim does not reproduce.",
    config=DistanceConfig,
    quick=QUICK,
    run=run_experiment,
    report=report_of(__name__),
)

__all__ = [
    "EXPERIMENT",
    "QUICK",
    "DistanceConfig",
    "gradient_by_delta",
    "run_experiment",
    "eval_batch",
    "train_batch",
    "train_one",
    "verdict",
]
