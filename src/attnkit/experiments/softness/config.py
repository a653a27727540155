"""The settings of the softness experiment (softness/__init__.py): its rows, each a softness
of the latent decoders (models/latent.py) and, for variational attention, its estimator; and
its config, every field a flag of ``attnkit experiment softness``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..._checks import check_ranges
from ..._flags import str_list
from ...train.config import LR_DECAYS
from ..base import Pooled, Seeds, option

ROWS: dict[str, dict[str, str]] = {
    "mean": {"softness": "mean"},
    "soft": {"softness": "soft"},
    "exact": {"softness": "exact"},
    "hard": {"softness": "hard"},
    "gumbel": {"softness": "gumbel"},
    "variational": {"softness": "variational", "estimator": "enumerate"},
    "variational-sample": {"softness": "variational", "estimator": "sample"},
}
VARIATIONAL = ("variational", "variational-sample")
# Deng 2018 Table 1's rows (variational = the enumerated estimator): toy-ko's default
DENG_ROWS = ("soft", "exact", "hard", "variational", "variational-sample")
# Multi30K's default: the rows a checked claim compares (soft, exact, hard) and variational
# (enumerated), reported; variational-sample with --rows (reported too; left out of the default
# to keep the run within 30 minutes)
MULTI30K_ROWS = ("soft", "exact", "hard", "variational")
# the captioner has the enumerated ELBO only (docs/captioning.md): no variational-sample row
CAPTION_ROWS = ("mean", "soft", "hard", "gumbel", "variational")
# the default: Xu 2015 Table 1's two rows and the no-attention baseline the claim needs
CAPTION_DEFAULT_ROWS = ("mean", "soft", "hard")
TASK_ROWS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "toy-ko": (tuple(ROWS), DENG_ROWS),
    "multi30k": (tuple(ROWS), MULTI30K_ROWS),
    "digit-captions": (CAPTION_ROWS, CAPTION_DEFAULT_ROWS),
}
"""Each task (the package's ``TASKS``, in this order): the rows it has and those it runs when
``--rows`` names none."""


@dataclass
class SoftnessConfig(Seeds, Pooled):
    """The flags of ``attnkit experiment softness`` (one per field)."""

    tasks: str = option("multi30k", "comma-separated tasks, of: toy-ko (the "
                      "seconds-long smoke setting), multi30k (De-En subset "
                      "from ../shared/data/multi30k; skipped with a message when absent; the "
                      "default run), digit-captions (the captioner; no variational-sample row; "
                      "its own run, --tasks digit-captions: both at 5 seeds exceed 30 minutes)")
    rows: str = option("", f"comma-separated rows, of {', '.join(ROWS)} (default: each "
                     f"task's own: toy-ko {','.join(DENG_ROWS)}, Deng 2018 Table 1 "
                     f"(variational = enumerated); multi30k {','.join(MULTI30K_ROWS)}; "
                     "digit-captions "
                     f"{','.join(CAPTION_ROWS)})")
    model: str = option("rnnsearch", "rnnsearch | luong: the decoder every row shares")
    decoder: str = option("deng", "toy-ko: deng (Deng 2018: no attention context in the "
                        "recurrence; Luong without input feeding) | context (it feeds the "
                        "recurrence)")
    seeds: int = option(8, "toy-ko: training seeds per row: --seed, --seed+1, ... (8: a t interval "
                      "over 8 paired gaps; 3 seeds gave intervals 0.1 PPL wide on toy-ko)")
    train_size: int = option(3200, "training pairs")
    epochs: int = option(4, "passes over them: the same updates for every row (4: 400 updates)")
    multi30k: int = option(100, "multi30k: updates per epoch, on the first updates x "
                         "batch-size training pairs within --multi30k-max-words (100: 3,200 "
                         "pairs)")
    multi30k_epochs: int = option(40, "multi30k: the cap of epochs, the same for every row "
                                "(40: over 3x the latest stop, 11 epochs, and 4.4x the median, "
                                "9, of the compared rows on seeds no verdict uses)")
    multi30k_patience: int = option(3, "multi30k: early stopping after this many epochs "
                                  "without a lower valid loss (the exact marginal's for the "
                                  "latent rows); every row is scored from its best epoch; 0 = "
                                  "train to the cap")
    multi30k_max_words: int = option(10, "multi30k: pairs with more words on a side are left "
                                   "out of every split (0: none left out)")
    multi30k_seeds: int = option(5, "multi30k: training seeds per row (--seed, --seed+1, ...; a "
                               "t interval over the paired gaps); --seeds is toy-ko's")
    multi30k_valid: int = option(300, "multi30k: validation pairs (early stopping reads them)")
    multi30k_test: int = option(350, "multi30k: test pairs scored (of test_2016_flickr's 389 "
                              "within 10 words)")
    multi30k_spm: int = option(2000, "multi30k: SentencePiece subwords a language, learnt from "
                             "the training subset")
    multi30k_dir: str = option("runs/softness-multi30k-data", "multi30k: where the subset's "
                             "text files are written")
    caption_seeds: int = option(5, "digit-captions: training seeds per row (--seed, "
                              "--seed+1, ...; the paired bootstrap resamples seeds and test "
                              "captions); --seeds is toy-ko's")
    caption_train_size: int = option(6000, "digit-captions: training canvases")
    caption_epochs: int = option(20, "digit-captions: passes over them, the cap of every row "
                               "(20: 3760 updates); the valid exact match after each is the "
                               "learning curve")
    caption_hidden: int = option(64, "digit-captions: patch feature, score and decoder widths "
                               "(the CNN's channels are --hidden)")
    caption_lr: float = option(2e-3, "digit-captions: Adam learning rate")
    caption_lr_decay: str = option("cosine", "digit-captions: the learning rate's decay to the "
                                 "end of the cap, the same for every row: cosine | linear | "
                                 "none (constant)")
    caption_dropout: float = option(0.0, "digit-captions: dropout of the captioner's word "
                                  "embeddings and deep output, every row")
    caption_valid_size: int = option(400, "digit-captions: validation canvases (the learning "
                                   "curve and the 'soft learns' check read them)")
    caption_patch: int = option(8, "digit-captions: pixels per side of a patch (8: one patch "
                              "per 8x8 cell, 9 patches)")
    caption_cnn_layers: int = option(3, "digit-captions: the CNN's convolutions, 2 or 3 (3: a "
                                   "feature sees 12x12 pixels, a whole digit)")
    caption_cnn: str = option("", "digit-captions: a file of CNN weights, frozen for every row; "
                            "empty: train one as a patch digit classifier on the training "
                            "canvases (OUT/digit-captions/cnn.pt); 'scratch': no frozen CNN, "
                            "each row trains its own")
    caption_cnn_epochs: int = option(10, "digit-captions: epochs of that classifier")
    caption_reward: str = option("mean", "hard: REINFORCE reward, mean (per-token mean log "
                               "p(y|z,x), Xu's code) | sum (the caption's log-likelihood)")
    caption_reward_scale: float = option(0.1, "hard: the reward times this (Xu's code: 0.1)")
    caption_entropy: float = option(0.002, "hard: entropy bonus (Xu's code: 0.002)")
    caption_hard_mix: float = option(0.5, "hard: chance of the expected context instead of a "
                                   "sample (Xu 2015 §4.1: 0.5)")
    caption_mix_per: str = option("batch", "hard: that chance drawn per minibatch (Xu's code) "
                                "| image")
    caption_baseline_on: str = option("sampled", "hard: the moving-average baseline fed the "
                                    "sampled captions' rewards (Xu 2015 §4.1) | all")
    caption_gate: str = option("soft", "the beta gate (Xu 2015 §4.2.1) on: soft (the "
                             "deterministic rows: mean, soft, variational) | all | none")
    batch_size: int = option(32, "pairs (canvases) per update")
    emb: int = option(32, "embedding width")
    hidden: int = option(32, "every hidden width: encoder, decoder, score, maxout")
    lr: float = option(5e-3, "Adam learning rate")
    tau_start: float = option(1.0, "gumbel: first temperature")
    tau_end: float = option(0.5, "gumbel: temperature reached at the last update")
    baseline: str = option("soft", "REINFORCE baseline of hard and variational-sample: soft "
                         "(log p(y_t | soft context), Deng 2018 §4) | average (moving "
                         "average, Xu 2015)")
    valid_size: int = option(100, "validation pairs")
    test_size: int = option(400, "test pairs scored")
    draws: int = option(8, "gradient draws for the gradient variance")
    timing_reps: int = option(5, "repetitions of each timing (the median counts)")
    seed: int = option(0, "data seed and first training seed")

    def __post_init__(self) -> None:
        for name, items, known in (("tasks", self.task_list, TASK_ROWS),
                                   ("rows", self.row_list, ROWS)):  # fmt: skip
            bad = [x for x in items if x not in known]
            if bad or (not items and name == "tasks") or len(set(items)) != len(items):
                raise ValueError(f"--{name} {getattr(self, name)!r}; name each of "
                                 f"{', '.join(known)} at most once")  # fmt: skip
        if self.baseline not in ("soft", "average"):
            raise ValueError(f"--baseline {self.baseline!r}; choose soft or average")
        if self.model not in ("rnnsearch", "luong"):
            raise ValueError(f"--model {self.model!r}; choose rnnsearch or luong")
        if self.decoder not in ("deng", "context"):
            raise ValueError(f"--decoder {self.decoder!r}; choose deng or context")
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "seeds", "caption_seeds", "train_size", "epochs", "multi30k", "multi30k_spm",
            "caption_train_size", "caption_valid_size", "caption_epochs", "caption_cnn_epochs",
            "caption_hidden",
            "batch_size", "emb",
            "hidden", "valid_size", "test_size", "timing_reps", "jobs", "threads"
        ))  # fmt: skip
        choices: tuple[tuple[str, tuple[Any, ...]], ...] = (("caption_reward", ("mean", "sum")),
                            ("caption_mix_per", ("batch", "image")),
                            ("caption_baseline_on", ("sampled", "all")),
                            ("caption_gate", ("soft", "all", "none")),
                            ("caption_lr_decay", LR_DECAYS),
                            ("caption_patch", (1, 2, 4, 8)), ("caption_cnn_layers", (2, 3)))
        for name, allowed in choices:
            if getattr(self, name) not in allowed:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)!r}; choose "
                                 f"one of {', '.join(map(str, allowed))}")
        if self.caption_cnn_layers == 3 and self.caption_patch < 2:
            raise ValueError("--caption-cnn-layers 3 needs --caption-patch 2 or more")
        if not 0 <= self.caption_dropout < 1:
            raise ValueError(f"--caption-dropout {self.caption_dropout}; it must be in [0, 1)")
        if not 0 <= self.caption_hard_mix <= 1:
            raise ValueError(f"--caption-hard-mix {self.caption_hard_mix}; a probability")
        if not (math.isfinite(self.caption_reward_scale) and self.caption_reward_scale > 0):
            raise ValueError(f"--caption-reward-scale {self.caption_reward_scale}; it must be "
                             "positive")  # fmt: skip
        if not (math.isfinite(self.caption_entropy) and self.caption_entropy >= 0):
            raise ValueError(f"--caption-entropy {self.caption_entropy}; it must be >= 0")
        if self.draws < 2:
            raise ValueError(f"--draws {self.draws}; the variance needs at least 2")
        for name in ("lr", "caption_lr", "tau_start", "tau_end"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"--{name.replace('_', '-')} {value}; it must be positive")

    @property
    def task_list(self) -> list[str]:
        return str_list(self.tasks)

    @property
    def row_list(self) -> list[str]:
        """The rows asked for; empty: each task's own (``rows_of``)."""
        return str_list(self.rows)

    def rows_of(self, task: str) -> list[str]:
        """The rows run on ``task``: those asked for that it has, else its default."""
        rows, default = TASK_ROWS[task]
        if not self.row_list:
            return list(default)
        return [r for r in self.row_list if r in rows]

    @property
    def updates(self) -> int:
        """toy-ko's updates per run."""
        return self.epochs * math.ceil(self.train_size / self.batch_size)

    @property
    def caption_updates(self) -> int:
        """digit-captions' updates per run."""
        return self.caption_epochs * math.ceil(self.caption_train_size / self.batch_size)


__all__ = ["CAPTION_DEFAULT_ROWS", "CAPTION_ROWS", "DENG_ROWS", "MULTI30K_ROWS", "ROWS",
           "SoftnessConfig",
           "TASK_ROWS", "VARIATIONAL"]
