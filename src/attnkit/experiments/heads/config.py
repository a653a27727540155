"""The settings of the heads experiment (``attnkit experiment heads``): every field a flag;
apart so that the jobs (jobs.py) read them without a loop.

The defaults are the design fixed from calibration runs on seeds 900-905 (docs/experiments/
heads.md): d_model 128 with h = 1, 2, 4, 8 (d_k = 128 ... 16, inside the paper's range of
d_k), toy-ko, seeds from 10 (disjoint from the calibration seeds and from the earlier
design's seeds 0-2); 10 seeds since two 5-seed sets (10-14, 100-104) disagreed on (i) with
the per-seed gaps' spread about 6-9 BLEU."""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..._flags import int_list
from ..base import Pooled, Seeds, option


@dataclass
class HeadsConfig(Seeds, Pooled):
    heads: str = option("1,2,4,8", "head counts compared, comma-separated (d_k = dim / h)")
    dim: int = option(128, "d_model of every model, divisible by every head count")
    layers: int = option(2, "encoder layers, and as many decoder layers")
    ff: int = option(256, "feed-forward width d_ff")
    dropout: float = option(0.1, "dropout P_drop (the paper's base: 0.1)")
    label_smoothing: float = option(0.1, "label smoothing of the training loss (paper: 0.1)")
    batch_size: int = option(32, "sentences per update")
    lr: float = option(1e-3, "Adam learning rate")
    patience: int = option(3, "early stopping: epochs without a lower valid loss, every arm")
    max_epochs: int = option(150, "the cap, the same for every arm; a run stopped by it fails "
                             "the convergence check")  # fmt: skip
    tasks: str = option("toy-ko", "settings run, comma-separated: toy-ko, multi30k")
    toy_train: str = option(
        "500",
        "toy-ko training pairs, comma-separated: one checked setting per size (named "
        "toy-ko-N when toy-ko has more than one size)",
    )
    toy_report: str = option(
        "1000",
        "toy-ko training pairs run for the trend with data and reported, not checked "
        "(comma-separated; empty: none)",
    )
    multi30k: int = option(
        2000,
        "Multi30K: the first N En-De training pairs from ../shared/data/multi30k (skipped "
        "with a message when absent; 0: toy-ko only)",
    )
    spm_vocab: int = option(1000, "Multi30K: SentencePiece subwords per language")
    valid_size: int = option(200, "validation sentences (early stopping, choice of the best h)")
    test_size: int = option(300, "test sentences scored")
    seeds: int = option(10, "seeds seed, seed+1, ...: initialisation, batches (toy-ko: data); "
                        "10, since 5 left (i)'s interval holding 0 at the fresh seeds' spread")
    seed: int = option(10, "first seed (the earlier design ran 0-2, the calibration 900-905)")

    def __post_init__(self) -> None:
        counts = self.head_counts  # raises on a malformed list
        sizes, extra = self.toy_sizes, self.report_sizes
        if not sizes or min(sizes) < 1 or len(set(sizes)) != len(sizes):
            raise ValueError(
                f"--toy-train {self.toy_train!r}: list distinct positive sizes, e.g. 500,1000"
            )
        if (extra and min(extra) < 1) or len(set(extra)) != len(extra) or set(extra) & set(sizes):
            raise ValueError(
                f"--toy-report {self.toy_report!r}: list distinct positive sizes not in "
                f"--toy-train {self.toy_train!r}, e.g. 1000 (or '' for none)"
            )
        if 1 not in counts or len(counts) < 3 or len(set(counts)) != len(counts):
            raise ValueError(
                f"--heads {self.heads!r}: list distinct counts, 1 and at least two more "
                "(the best of the others is compared with h = 1 and with the largest h), "
                "e.g. 1,4,16"
            )
        if not self.task_list or not set(self.task_list) <= {"toy-ko", "multi30k"}:
            raise ValueError(f"--tasks {self.tasks!r}: name toy-ko, multi30k or both, e.g. toy-ko")
        bad = [h for h in counts if h < 1 or self.dim % h]
        if bad or self.dim % 2:
            raise ValueError(
                f"--dim {self.dim} must be even and divisible by every head "
                f"count (not by {bad}); e.g. --dim 64 for 1,2,4,8,16"
            )
        check_ranges(self, fractions=("dropout", "label_smoothing"), as_flags=True, positive=(
            "layers", "ff", "batch_size", "patience", "max_epochs", "spm_vocab",
            "valid_size", "test_size", "jobs", "threads"
        ), non_negative=("multi30k",))  # fmt: skip
        if self.seeds < 2:
            raise ValueError(
                f"--seeds {self.seeds}: an interval over seeds needs 2 at least; use 3"
            )
        if not self.lr > 0:
            raise ValueError(f"--lr {self.lr}: it must be positive")

    @property
    def head_counts(self) -> list[int]:
        return sorted(int_list(self.heads, "heads", "1,4,16"))

    @property
    def toy_sizes(self) -> list[int]:
        return sorted(int_list(str(self.toy_train), "toy-train", "500,1000"))

    @property
    def report_sizes(self) -> list[int]:
        return sorted(int_list(str(self.toy_report), "toy-report", "1000"))

    @property
    def task_list(self) -> list[str]:
        return [t for t in self.tasks.split(",") if t]


__all__ = ["HeadsConfig"]
