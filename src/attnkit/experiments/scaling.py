"""Why qᵀk/√d_k: Vaswani et al. (2017), Sec. 3.2.1 and footnote 4. "We suspect that for large
values of d_k, the dot products grow large in magnitude, pushing the softmax function into
regions where it has extremely small gradients. To counteract this effect, we scale the dot
products by 1/√d_k." (If q and k have independent unit-variance components, qᵀk has variance
d_k.)

(a) Random q, k with N(0, 1) components at d_k = 4 … 1024: the softmax entropy (mean over
rows, and as a fraction of log Tk) and the gradient norm through the softmax (of L = Σ p_j g_j
with a fixed g ~ N(0, 1), w.r.t. the scores and the queries; see scaling_measure.py) of the
unscaled ``dot_score`` and the ``scaled_dot_score``, on the same q, k and g.
(b) The same on trained q, k: the per-head queries and keys of the encoder self-attention and
decoder cross-attention of the scaled Transformers of (c), scored both ways (and, reported
beside, each unscaled-trained model's own qᵀk).
(c) attnkit's Transformer (``TransformerConfig.score`` = "scaled_dot" | "dot") trained both ways
by ``attnkit.fit`` with the same data, batches, initialisation (the scores have no
parameters), seed and number of updates, at each width heads × d_k: final valid loss and exact
match, and greedy test BLEU / exact match.

Checks (set before the default run, from the claim):
  A1 unscaled entropy fraction falls at every step of d_k and is <= 0.1 at the largest d_k;
  A2 unscaled median gradient norm (w.r.t. the scores) falls at every step of d_k and at the
     largest d_k is <= 0.1 x the scaled one there;
  A3 scaled stays roughly constant: max/min over d_k <= 1.25 for its entropy fraction and for
     its median gradient norm;
  B  trained q, k: unscaled entropy fraction and median gradient are lower at the largest d_k
     than at the smallest;
  C  trained models (a separate check): at the largest d_k, final valid loss scaled <= unscaled.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .base import Experiment, Say, report_of
from .base import verdict as verdict_text
from .scaling_measure import random_stats

SCORES = ("dot", "scaled_dot")  # unscaled, scaled
ENTROPY_MAX = 0.1  # A1
GRAD_RATIO_MAX = 0.1  # A2
FLAT_MAX = 1.25  # A3


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


def parse_ints(text: str, name: str) -> list[int]:
    """ "4,16,64" -> [4, 16, 64] (each >= 1, increasing)."""
    try:
        xs = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(
            f"--{name} {text!r}: give comma-separated integers, e.g. 4,16,64"
        ) from None
    if len(xs) < 2 or min(xs) < 1 or xs != sorted(set(xs)):
        raise ValueError(f"--{name} {text!r}: give two or more increasing integers >= 1")
    return xs


def parse_widths(text: str) -> list[tuple[int, int]]:
    """ "2x16,2x64" -> [(heads 2, d_k 16), (2, 64)], d_k increasing."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        h, sep, d = part.partition("x")
        if not (sep and h.isdigit() and d.isdigit() and int(h) >= 1 and int(d) >= 1):
            raise ValueError(f"--widths {text!r}: give HEADSxD_K pairs, e.g. 2x16,2x64")
        if int(h) * int(d) % 2:
            raise ValueError(f"--widths {part}: heads x d_k must be even (sinusoid widths)")
        out.append((int(h), int(d)))
    if len(out) < 2 or [d for _, d in out] != sorted({d for _, d in out}):
        raise ValueError(f"--widths {text!r}: give two or more widths with increasing d_k")
    return out


@dataclass
class ScalingConfig:
    """The settings of (a) random q, k, (c) the Transformers and their shared budget; every
    field is a flag of ``attnkit experiment scaling``."""

    dims: str = _opt("4,16,64,256,1024", "d_k values of the random q, k")
    rows: int = _opt(2048, "query rows measured per d_k")
    keys: int = _opt(64, "keys per row, Tk")
    queries: int = _opt(32, "queries sharing one set of keys")
    widths: str = _opt(
        "2x16,2x32,2x64",
        "Transformer widths HEADSxD_K, d_model = heads x d_k",
    )
    layers: int = _opt(1, "encoder and decoder layers; d_ff = 2 d_model, no dropout")
    task: str = _opt("reverse", "copy | reverse | sort")
    min_len: int = _opt(4, "shortest source")
    max_len: int = _opt(12, "longest source")
    steps: int = _opt(400, "updates per model, the shared budget")
    batch_size: int = _opt(32, "pairs per update")
    lr: float = _opt(1e-3, "Adam learning rate, constant")
    valid_size: int = _opt(200, "validation pairs")
    test_size: int = _opt(200, "test pairs")
    seed: int = _opt(0, "seed of the random q, k, g, the data and the initialisation")
    jobs: int = _opt(2, "models trained at once, in a process pool")
    threads: int = _opt(1, "torch threads per training process")

    def __post_init__(self) -> None:
        parse_ints(self.dims, "dims")
        parse_widths(self.widths)
        if self.task not in ("copy", "reverse", "sort"):
            raise ValueError(f"--task {self.task!r}; choose copy, reverse or sort")
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(f"lengths {self.min_len}..{self.max_len}: need 1 <= min <= max")
        if self.keys < 2:
            raise ValueError(f"--keys {self.keys}: a softmax over one key is always one-hot")
        for name in ("rows", "queries", "layers", "steps", "batch_size", "valid_size",
                     "test_size", "jobs", "threads"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"--lr {self.lr}; it must be positive")


QUICK = dict(dims="4,64", rows=64, keys=16, queries=8, widths="1x4,1x8", steps=3, batch_size=8,
             valid_size=8, test_size=8, jobs=1)  # fmt: skip


def run_name(heads: int, d_k: int, score: str) -> str:
    """The folder of one trained model, e.g. ``2x64-dot``."""
    return f"{heads}x{d_k}-{score}"


def _falls(xs: list[float]) -> bool:
    return all(b < a for a, b in zip(xs, xs[1:], strict=False))


def _spread(xs: list[float]) -> float:
    return max(xs) / min(xs) if min(xs) > 0 else math.inf


def verdict(
    random: dict[int, dict[str, dict[str, float]]], trained: list[dict[str, Any]]
) -> tuple[list[str], dict[str, Any]]:
    """The checks A1-A3, B, C of the module docstring on the measured numbers: random
    {d_k: {"dot": summary, "scaled_dot": summary}} (scaling_measure.summarise), trained the
    rows of ``evaluate``. -> (failed checks, each with its numbers; the checks' numbers)."""
    dims = sorted(random)
    top = dims[-1]
    ent = [random[d]["dot"]["entropy_frac"] for d in dims]
    grad = [random[d]["dot"]["grad_scores_median"] for d in dims]
    s_ent = [random[d]["scaled_dot"]["entropy_frac"] for d in dims]
    s_grad = [random[d]["scaled_dot"]["grad_scores_median"] for d in dims]
    ratio = grad[-1] / s_grad[-1] if s_grad[-1] > 0 else math.inf
    widths = sorted({r["d_k"] for r in trained})
    at = {(r["d_k"], r["score"]): r for r in trained}
    lo, hi = widths[0], widths[-1]
    b_ent = [at[(d, "scaled_dot")]["qk"]["dot"]["entropy_frac"] for d in (lo, hi)]
    b_grad = [at[(d, "scaled_dot")]["qk"]["dot"]["grad_scores_median"] for d in (lo, hi)]
    loss = {s: at[(hi, s)]["valid_loss"] for s in SCORES}
    checks: dict[str, Any] = {
        "dims": dims,
        "A1_unscaled_entropy_frac": ent,
        "A1_ok": _falls(ent) and ent[-1] <= ENTROPY_MAX,
        "A2_unscaled_grad_median": grad,
        "A2_ratio_to_scaled_at_largest": ratio,
        "A2_ok": _falls(grad) and ratio <= GRAD_RATIO_MAX,
        "A3_scaled_entropy_frac_spread": _spread(s_ent),
        "A3_scaled_grad_median_spread": _spread(s_grad),
        "A3_ok": _spread(s_ent) <= FLAT_MAX and _spread(s_grad) <= FLAT_MAX,
        "B_d_k": [lo, hi],
        "B_unscaled_entropy_frac": b_ent,
        "B_unscaled_grad_median": b_grad,
        "B_ok": b_ent[1] < b_ent[0] and b_grad[1] < b_grad[0],
        "C_d_k": hi,
        "C_valid_loss": loss,
        "C_ok": loss["scaled_dot"] <= loss["dot"],
    }
    reasons = []
    nums = ", ".join
    if not _falls(ent):
        reasons.append(
            "A1 unscaled entropy/log Tk does not fall at every d_k "
            f"({nums(f'{x:.3f}' for x in ent)})"
        )
    if not ent[-1] <= ENTROPY_MAX:
        reasons.append(
            f"A1 unscaled entropy/log Tk at d_k={top} is {ent[-1]:.3f} (> {ENTROPY_MAX})"
        )
    if not _falls(grad):
        reasons.append(
            "A2 unscaled median gradient does not fall at every d_k "
            f"({nums(f'{x:.3g}' for x in grad)} at d_k {nums(map(str, dims))})"
        )
    if not ratio <= GRAD_RATIO_MAX:
        reasons.append(
            f"A2 unscaled/scaled median gradient at d_k={top} is {ratio:.3g} (> {GRAD_RATIO_MAX})"
        )
    if not checks["A3_ok"]:
        reasons.append(
            f"A3 scaled varies over d_k: entropy max/min {_spread(s_ent):.2f}, median gradient "
            f"max/min {_spread(s_grad):.2f} (> {FLAT_MAX})"
        )
    if not checks["B_ok"]:
        reasons.append(
            f"B trained q, k, d_k {lo} -> {hi}: unscaled entropy/log Tk {b_ent[0]:.3f} -> "
            f"{b_ent[1]:.3f}, median gradient {b_grad[0]:.3g} -> {b_grad[1]:.3g} (both should fall)"
        )
    if not checks["C_ok"]:
        reasons.append(
            f"C at d_k={hi} the scaled Transformer's valid loss {loss['scaled_dot']:.3f} > "
            f"unscaled {loss['dot']:.3f}"
        )
    return reasons, checks


def run_experiment(cfg: ScalingConfig, out: Path, say: Say = print) -> dict[str, Any]:
    """(a) random q, k; (c) train both ways at each width; (b) their q, k. JSON-able result."""
    from .scaling_models import evaluate, train_all

    t0 = time.perf_counter()
    dims = parse_ints(cfg.dims, "dims")
    say(f"scaling experiment: (a) random q, k at d_k {cfg.dims}, {cfg.rows} rows x {cfg.keys} "
        f"keys; (c) Transformers {cfg.widths} (heads x d_k), {cfg.layers}+{cfg.layers} layers, "
        f"scaled and unscaled, {cfg.steps} updates of {cfg.batch_size} on {cfg.task} "
        f"{cfg.min_len}-{cfg.max_len}; output in {out}/")  # fmt: skip
    random = {d: random_stats(d, cfg.rows, cfg.keys, cfg.queries, cfg.seed) for d in dims}
    t_random = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    seconds = train_all(cfg, out, say)
    trained = evaluate(cfg, out, cfg.seed)
    reasons, checks = verdict(random, trained)
    return {
        "config": asdict(cfg),
        "random": {str(d): v for d, v in random.items()},
        "trained": trained,
        "budget": {
            "updates": cfg.steps,
            "batch_size": cfg.batch_size,
            "pairs": cfg.steps * cfg.batch_size,
            "lr": cfg.lr,
            "seed": cfg.seed,
        },  # fmt: skip
        "seconds": {
            "random": round(t_random, 1),
            "train": {n: round(s, 1) for n, s in seconds.items()},
            "total": round(time.perf_counter() - t0, 1),
        },  # fmt: skip
        "checks": checks,
        "verdict": verdict_text(reasons),
    }



EXPERIMENT = Experiment(
    name="scaling",
    help="why qᵀk/√d_k: softmax saturation of unscaled dot products (Vaswani 2017, 3.2.1)",
    typical="1.4 min of CPU; 4.7 min on a busy 2-core CPU",
    description="Softmax entropy and gradient norm of unscaled vs scaled dot-product scores "
    "on random unit-variance q, k for growing d_k and on trained q, k, and a small Transformer "
    "trained both ways at two or more widths with the same data, seed and updates. Writes "
    "OUT/scaling.{csv,json,png} and the checkpoints; exits 1 when a check fails.",
    config=ScalingConfig,
    quick=QUICK,
    run=run_experiment,
    report=report_of("scaling_report"),
)

__all__ = [
    "EXPERIMENT",
    "QUICK",
    "SCORES",
    "ScalingConfig",
    "parse_ints",
    "parse_widths",
    "run_experiment",
    "run_name",
    "verdict",
]
