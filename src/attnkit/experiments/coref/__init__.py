"""What attention learns: the "it" example. "The animal didn't cross the street because it was
too tired": it = the animal; "... too wide": it = the street. Vaswani et al. (2017, Fig. 4,
"apparently involved in anaphora resolution") and Uszkoreit (2017, Google AI blog, "Transformer:
A Novel Neural Network Architecture for Language Understanding") show an encoder head whose
attention from "it" goes to the noun it means, and moves when the adjective changes.

The run: the Winograd-style sentences of ``attnkit.data.coref`` (six frames, two noun slots,
an adjective that picks one of them; test = (frame, nouns, adjective) combinations never seen
in training, the two famous sentences among them). The label is the pronoun's noun (one class
per noun of the task), so a model must find the right noun and copy *which* noun it is.

  * a small bidirectional Transformer encoder (``models.PronounEncoder``: attnkit's
    EncoderLayer, pre-norm) reads the label off the pronoun's position;
  * an LSTM baseline (``attnkit.models.sequence_classifiers``, reads left to right, labels at
    the last word) with the Transformer's parameter count (its width fitted by ``closest_width``);

both trained by ``fit_classifier`` on the same batches (same sentences, same order), with the
same Adam learning rate, clipping and number of updates, for each of ``--seeds`` seeds.
Measured on the held-out sentences: accuracy of both models; for the Transformer, per layer
and head, the mean attention mass from "it" on the right noun and on the other noun. The best
head (largest mean margin right − wrong) is then read on the two famous sentences.

The verdict (thresholds fixed from the claim before any run), in EVERY seed:
  * the Transformer has learnt the task: held-out accuracy ≥ 90%;
  * its best head puts most of the pronoun's mass on the right noun: mean mass on the right
    noun > 0.5 over the held-out sentences, and more than on the wrong noun;
  * on both famous sentences that head puts > 0.5 of the pronoun's mass on the right noun and
    more than on the wrong one, so its choice flips with the adjective (animal for "tired",
    street for "wide").
The LSTM's accuracy is measured and reported, not checked.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ..._checks import check_ranges
from ...data.coref import famous, held_out, items
from ...models.sequence_classifiers import Sizes, build, closest_width, parameters
from ...train.classify import accuracy, fit_classifier
from ..base import Experiment, Tally, option, report_of
from ..base import verdict as verdict_text
from ..pool import QuietPool, generator
from .models import best_head, build_encoder, encode, mass_table

MODELS = ("transformer", "lstm")



@dataclass
class CorefConfig:
    seeds: int = option(3, "models trained per kind, seeds --seed, --seed + 1, ...")
    dim: int = option(64, "Transformer width = embedding width of both models")
    heads: int = option(4, "Transformer heads")
    layers: int = option(2, "Transformer layers; sets the shared parameter budget")
    ff: int = option(128, "Transformer feed-forward width")
    steps: int = option(1500, "updates per model, the shared budget")
    batch_size: int = option(64, "sentences per update")
    lr: float = option(2e-3, "Adam learning rate of every model")
    clip: float = option(1.0, "gradient-norm clipping of every model")
    test_fraction: float = option(0.2, "share of (frame, nouns, adjective) combinations held "
                                "out for the test")  # fmt: skip
    seed: int = option(0, "split seed and first model seed")
    jobs: int = option(2, "seeds trained at once, in a process pool")
    threads: int = option(1, "torch threads per training process")

    def __post_init__(self) -> None:
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "seeds", "dim", "heads", "layers", "ff", "steps", "batch_size", "jobs", "threads"
        ))  # fmt: skip
        if self.dim % self.heads or self.dim % 2:
            raise ValueError(f"--dim {self.dim} must be even and divisible by --heads {self.heads}")
        if not self.lr > 0 or self.clip < 0:
            raise ValueError(f"--lr {self.lr} must be positive and --clip {self.clip} >= 0")
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"--test-fraction {self.test_fraction}: pass a fraction in (0, 1)")


QUICK = dict(seeds=1, dim=8, heads=2, layers=2, ff=16, steps=3, batch_size=8, jobs=1)


def data(cfg: CorefConfig) -> tuple[list, list]:
    """(training sentences, held-out sentences) of the split seeded by ``cfg.seed``."""
    train_c, test_c = held_out(cfg.seed, cfg.test_fraction)
    return items(train_c), items(test_c)


def make_batches(train: list, batch_size: int, seed: int, left: bool) -> Any:
    """step -> (tokens, labels): update ``step``'s sentences, a pure function of (seed, step),
    so that both models see the same sentences in the same order (``left``: padding side)."""

    def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        pick = torch.randint(0, len(train), (batch_size,), generator=generator(seed, step))
        return encode([train[int(i)] for i in pick], left=left)

    return batch


def lstm_width(sizes: Sizes, budget: int) -> int:
    """The LSTM hidden size whose parameter count is closest to ``budget``."""
    return closest_width(lambda w: parameters(build("lstm", sizes, w)), budget)


def train_seed(cfg: CorefConfig, seed: int) -> dict[str, Any]:
    """Train both models with ``seed``; score them on the held-out sentences; measure the
    Transformer's attention mass from the pronoun, and its best head on the famous two."""
    torch.set_num_threads(cfg.threads)
    train, test = data(cfg)
    torch.manual_seed(seed)
    enc = build_encoder(cfg.dim, cfg.heads, cfg.layers, cfg.ff)
    sizes = Sizes(enc.embed.num_embeddings, enc.head.out_features, cfg.dim, 1)  # length unused
    width = lstm_width(sizes, parameters(enc))
    torch.manual_seed(seed)
    lstm = build("lstm", sizes, width)
    out: dict[str, Any] = {"seed": seed, "lstm_width": width}
    for name, model, left in (("transformer", enc, False), ("lstm", lstm, True)):
        hist = fit_classifier(model, make_batches(train, cfg.batch_size, seed, left), cfg.steps,
                              cfg.lr, seed, clip=cfg.clip)  # fmt: skip
        tail = hist.loss[-max(1, cfg.steps // 10) :]
        out[name] = {
            "parameters": parameters(model),
            "accuracy": accuracy(model, *encode(test, left=left)),
            "final_train_loss": sum(tail) / len(tail),
            "train_seconds": round(hist.seconds, 1),
        }
    table = mass_table(enc.attention(encode(test)[0]), test)  # (L, H) each
    layer, head = best_head(table["right"], table["wrong"])
    out["mass"] = {k: v.tolist() for k, v in table.items()}
    out["best_head"] = [layer, head]
    out["famous"] = [famous_map(enc, item, layer, head) for item in famous()]
    return out


def famous_map(enc: Any, item: Any, layer: int, head: int) -> dict[str, Any]:
    """One famous sentence: every head's map (L, H, S, S), and the best head's pronoun mass on
    the right and the wrong noun."""
    weights = enc.attention(encode([item])[0])[0]  # (L, H, S, S)
    row = weights[layer, head, item.pronoun]  # (S,)
    return {
        "tokens": list(item.tokens),
        "pronoun": item.pronoun,
        "referent": item.referent,
        "other": item.other,
        "right": float(row[item.referent]),
        "wrong": float(row[item.other]),
        "weights": weights.tolist(),
    }


MIN_ACCURACY = 0.90  # the Transformer has learnt the task on unseen combinations
MIN_MASS = 0.5  # "most of the pronoun's mass" on the right noun


def verdict(seeds: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """The checks of the module docstring, on each seed's result (``train_seed``'s keys
    "seed", "transformer"["accuracy"], "mass", "best_head", "famous"). Returns (failed
    checks, the checked numbers)."""
    reasons, per_seed = [], []
    for r in seeds:
        s, (l, h) = r["seed"], r["best_head"]
        acc = r["transformer"]["accuracy"]
        right, wrong = r["mass"]["right"][l][h], r["mass"]["wrong"][l][h]
        fam = [(f["right"], f["wrong"]) for f in r["famous"]]
        if not acc >= MIN_ACCURACY:
            reasons.append(f"seed {s}: Transformer held-out accuracy {acc:.1%} "
                           f"(< {MIN_ACCURACY:.0%})")  # fmt: skip
        if not (right > MIN_MASS and right > wrong):
            reasons.append(f"seed {s}: best head L{l}H{h} puts {right:.2f} of the pronoun's "
                           f"mass on the right noun, {wrong:.2f} on the wrong one "
                           f"(need > {MIN_MASS} and more than the wrong)")  # fmt: skip
        for name, (fr, fw) in zip(("tired", "wide"), fam, strict=True):
            if not (fr > MIN_MASS and fr > fw):
                reasons.append(f"seed {s}: on '... too {name}' head L{l}H{h} puts {fr:.2f} on "
                               f"the right noun, {fw:.2f} on the wrong one")  # fmt: skip
        per_seed.append({
            "seed": s, "accuracy": acc, "best_head": [l, h], "right": right, "wrong": wrong,
            "famous_right": [f[0] for f in fam], "famous_wrong": [f[1] for f in fam],
            "flips": all(fr > fw for fr, fw in fam),
        })  # fmt: skip
    checks = {
        "per_seed": per_seed,
        "thresholds": {"min_accuracy": MIN_ACCURACY, "min_mass": MIN_MASS},
        "reproduced": not reasons,
        "reasons": reasons,
    }
    return reasons, checks


def train_all(cfg: CorefConfig, say: Any) -> list[dict[str, Any]]:
    """``train_seed`` for each seed, ``cfg.jobs`` at a time (spawned processes)."""
    seeds = [cfg.seed + k for k in range(cfg.seeds)]
    tally = Tally(len(seeds), say)
    out = []
    if cfg.jobs == 1:
        for s in seeds:
            tally.starting(f"seed {s}: training")
            out.append(train_seed(cfg, s))
        return out
    with QuietPool(min(cfg.jobs, len(seeds))) as pool:  # workers never see Ctrl-C
        futures = [pool.submit(train_seed, cfg, s) for s in seeds]
        for s, fut in zip(seeds, futures, strict=True):
            out.append(fut.result())
            tally(f"seed {s}: trained")
    return out


def run_experiment(cfg: CorefConfig, out: Path, say: Any = print) -> dict[str, Any]:
    """Train, score and measure every seed; the verdict on all of them."""
    train, test = data(cfg)
    say(
        f"coref experiment: name the noun 'it' means; {len(train)} training sentences, "
        f"{len(test)} held-out ones (unseen combinations); {cfg.steps} updates of "
        f"{cfg.batch_size} for a Transformer encoder (d={cfg.dim}, {cfg.heads} heads, "
        f"{cfg.layers} layers) and an LSTM of the same size, {cfg.seeds} seed(s), "
        f"{cfg.jobs} at a time; output in {out}/"
    )
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    seeds = train_all(cfg, say)
    reasons, checks = verdict(seeds)
    first = seeds[0]
    return {
        "config": asdict(cfg),
        "train_sentences": len(train),
        "test_sentences": len(test),
        "chance": 0.5,  # a coin between the sentence's two nouns
        "parameters": {m: first[m]["parameters"] for m in MODELS},
        "lstm_width": first["lstm_width"],
        "updates": {
            "steps": cfg.steps,
            "batch_size": cfg.batch_size,
            "lr": cfg.lr,
            "clip": cfg.clip,
            "optimiser": "Adam",
            "same_batches": True,
        },  # fmt: skip
        "seeds": seeds,
        "total_seconds": round(time.perf_counter() - t0, 1),
        "checks": checks,
        "verdict": verdict_text(reasons),
    }


EXPERIMENT = Experiment(
    name="coref",
    help="the 'it' example: a head that resolves the pronoun (Vaswani 2017, Fig. 4)",
    typical="4.9 min on a busy 2-core CPU (not timed idle)",
    description="Train a small Transformer encoder and an LSTM (same parameters, batches and "
    "updates, several seeds) to name the noun 'it' means in Winograd-style sentences, score "
    "them on unseen (frame, nouns, adjective) combinations, measure the attention mass from "
    "'it' on the right vs the wrong noun per layer and head, and draw the best head on 'The "
    "animal didn't cross the street because it was too tired / wide'. Writes "
    "OUT/coref.{csv,json,png}, OUT/coref-famous.png and OUT/coref.html; exits 1 when no head "
    "resolves the pronoun.",
    config=CorefConfig,
    quick=QUICK,
    run=run_experiment,
    report=report_of(__name__),
)

__all__ = [
    "EXPERIMENT",
    "MODELS",
    "QUICK",
    "CorefConfig",
    "data",
    "famous_map",
    "make_batches",
    "run_experiment",
    "train_seed",
    "verdict",
]
