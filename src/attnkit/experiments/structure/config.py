"""The settings of the structure experiment (structure/__init__.py); every field is a flag of
``attnkit experiment structure``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..._checks import check_ranges
from ..base import Pooled, names_of, option
from .data import Shape
from .measure import DocsSetting
from .qa import BASELINE, COATTENTION, LEARNING_RATES, QA_ARMS, QASetting

PARTS = ("han", "multidim", "qa")


# (docs: sentences per document, updates between validation scores (curves; converged
# runs: fit_every, and fit_patience scores without a better one), HAN width, validation and
# test documents; digit-qa: preset, updates between validation scores, patience, sizes)
SETTINGS = {
    False: dict(sentences=(10, 30), every=25, fit_every=50, fit_patience=8, width=32,
                valid=200, test=500,
                qa_preset="small", qa_every=200, patience=4, qa_sizes=(6000, 500, 1000)),
    True: dict(sentences=(3, 4), every=1, fit_every=1, fit_patience=1, width=8, valid=8,
               test=8,
               qa_preset="tiny", qa_every=1, patience=1, qa_sizes=(192, 64, 64)),
}  # fmt: skip


@dataclass
class StructureConfig(Pooled):
    seeds: int = option(5, "seeds of the docs parts: --seed, --seed+1, ...")
    qa_seeds: int = option(5, "seeds of the digit-qa part (--full 1: as many as --seeds)")
    full: int = option(0, "1 = digit-qa with as many seeds as --seeds, if that is more")
    seed: int = option(0, "first seed")
    cap: int = option(0, "updates per docs run: the curve's end (0: 500; validation every "
                      "25), or with --train-docs the most a run may take (0: 6000; validation "
                      "every 50)")
    train_docs: int = option(0, "0: the docs parts train on fresh documents for --cap updates "
                             "(learning curves); N: on a fixed set of N training documents "
                             "per seed, early-stopped on validation (patience 8 scores), "
                             "judged on the converged test accuracy")
    fit: float = option(0.0, "with --train-docs: the patience waits until a run's last 50 "
                        "training batches average this accuracy (e.g. 0.9), then counts from "
                        "the later of that score and the best; 0: it counts from the first "
                        "score")
    qa_cap: int = option(15000, "updates at most per digit-qa run (early-stopped before; at "
                         "least 3x every compared arm's median stop, checked)")
    qa_arms: str = option("parallel,stacked", "digit-qa arms: parallel, alternating "
                          "(co-attention, each compared with stacked), stacked (SAN, the "
                          "baseline), none (mean pooling, reported only)")
    tiny: int = option(0, "1 = tiny models and data (what --quick sets: a smoke run)")
    parts: str = option("han,multidim,qa", "parts, comma-separated: han, multidim, qa")
    sentences: str = option("", "sentences per document of the docs parts, MIN-MAX; empty: "
                            "10-30 (--tiny: 3-4). Longer documents hold more decoys: the "
                            "difficulty sweep's harder settings (e.g. 30-60)")

    def __post_init__(self) -> None:
        _ = self.part_list  # raises on a malformed list
        _ = self.qa_arm_list  # raises on a malformed list
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "qa_seeds", "qa_cap", "jobs", "threads"))  # fmt: skip
        if self.cap < 0:
            raise ValueError(f"--cap {self.cap}; give 0 (the recipe's) or a number of updates")
        if not 0.0 <= self.fit <= 1.0:
            raise ValueError(f"--fit {self.fit}; give a training accuracy in [0, 1]")
        if self.train_docs < 0:
            raise ValueError(f"--train-docs {self.train_docs}; give 0 (fresh documents) or a "
                             "number of training documents")  # fmt: skip
        if self.seeds < 2 or (self.qa_seeds < 2 and "qa" in self.part_list):
            raise ValueError(f"--seeds {self.seeds}, --qa-seeds {self.qa_seeds}: an interval "
                             "needs at least 2 seeds")  # fmt: skip
        for flag in ("full", "tiny"):
            if getattr(self, flag) not in (0, 1):
                raise ValueError(f"--{flag} {getattr(self, flag)}; use 0 or 1")
        if self.seed < 0:
            raise ValueError(f"--seed {self.seed}; it must not be negative")
        _ = Shape(*self.sentence_range)  # raises on a range no document can have
        s = self.settings
        if self.docs_every > self.docs_cap or s["qa_every"] > self.qa_cap:
            raise ValueError(f"--cap {self.docs_cap} or --qa-cap {self.qa_cap} below one "
                             f"validation interval ({self.docs_every}, {s['qa_every']}): a curve "
                             "needs one score at least")  # fmt: skip

    @property
    def settings(self) -> dict[str, Any]:
        return SETTINGS[bool(self.tiny)]

    @property
    def sentence_range(self) -> tuple[int, int]:
        """(fewest, most) sentences per document: ``--sentences``, else the setting's."""
        if not self.sentences.strip():
            lo, hi = self.settings["sentences"]
            return lo, hi
        parts = self.sentences.split("-")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"--sentences {self.sentences!r}: give MIN-MAX, e.g. 30-60")
        return int(parts[0]), int(parts[1])

    @property
    def part_list(self) -> list[str]:
        return names_of("--parts", self.parts, PARTS)

    @property
    def qa_arm_list(self) -> list[str]:
        """The digit-qa arms: the baseline and at least one co-attention arm among them."""
        arms = names_of("--qa-arms", self.qa_arms, QA_ARMS)
        if BASELINE not in arms or not set(arms) & set(COATTENTION):
            raise ValueError(f"--qa-arms {self.qa_arms}: the claim compares co-attention "
                             f"({' or '.join(COATTENTION)}) with {BASELINE}; give both")
        return arms

    @property
    def docs_cap(self) -> int:
        """Updates at most per docs run: ``--cap``, else the recipe's (500 for curves, 6,000
        for a converged run: at least 3x the stops seen on calibration seeds)."""
        return self.cap or (6000 if self.train_docs else 500)

    @property
    def docs_every(self) -> int:
        """Updates between two validation scores of a docs run (its recipe's)."""
        return self.settings["fit_every" if self.train_docs else "every"]

    @property
    def docs_setting(self) -> DocsSetting:
        s = self.settings
        w = s["width"]
        return DocsSetting(Shape(*self.sentence_range), w, w, w, 32, 3e-3, 1.0, self.docs_cap,
                           self.docs_every, s["valid"], s["test"], self.threads,
                           self.train_docs, s["fit_patience"], self.fit)  # fmt: skip

    def qa_setting_of(self, arm: str) -> QASetting:
        """``qa_setting`` at ``arm``'s calibrated learning rate (``qa.LEARNING_RATES``)."""
        return replace(self.qa_setting, lr=LEARNING_RATES.get(arm, self.qa_setting.lr))

    @property
    def qa_setting(self) -> QASetting:
        s = self.settings
        return QASetting(s["qa_preset"], s["qa_sizes"], 64, 2e-3, 1.0, self.qa_cap,
                         s["qa_every"], s["patience"], self.threads)  # fmt: skip
