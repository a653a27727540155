"""The settings of the alignment experiment (alignment/__init__.py); every field is a flag of
``attnkit experiment alignment``.

The design of the default run (fixed before its seeds ran; the page, "The design"):

  * one order, ``swap``, the claim's: the only order where local-m's centre p_t = t is not
    the gold alignment for every word (it is for 66% of them; on ``monotone`` for all: an
    oracle centre) and yet every gold word lies inside its window (moves of at most 3 words,
    D = 5; on ``sov`` 4% of the words lie outside it). ``--orderings monotone,swap,sov``
    adds the other two, reported only;
  * the cap, CAP, at least CAP_FACTOR times each compared row's median stopping point on
    the calibration seeds CALIBRATION_SEEDS (data seed and training seeds, disjoint from
    every seed the experiment had run before and from the verdict's);
  * the verdict's seeds: --seed SEED, SEED+1, ... (data seed SEED), none of them in
    EARLIER_SEEDS.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..._checks import check_ranges
from ..base import Pooled, option
from .checks import CLAIM_ORDERING, CRITERION, GLOBAL, LOCALS
from .data import ORDERINGS
from .measure import ROWS, Arm, Setting

DEFAULT_ROWS = "global-location,local-m,local-p"
FULL = dict(orderings=",".join(ORDERINGS), models=",".join(ROWS), windows="5,10",
            forward=",".join(ORDERINGS))  # fmt: skip
CALIBRATION_SEEDS = range(900, 906)  # the cap's calibration run: --seed 900 --seeds 6
# every seed an alignment run used before this design: the earlier design's default run
# (0-7), its fresh-seed run (100-107), the lost 3,000-cap run (200-207), the calibration
EARLIER_SEEDS = frozenset([*range(0, 8), *range(100, 108), *range(200, 208),
                           *CALIBRATION_SEEDS])  # fmt: skip
CAP = 4000  # >= CAP_FACTOR x each compared row's median stop on CALIBRATION_SEEDS
SEED = 300  # the verdict's data seed and first training seed: never run before


@dataclass
class AlignmentConfig(Pooled):
    """The flags of ``attnkit experiment alignment`` (one per field)."""

    orderings: str = option(CLAIM_ORDERING, "target word orders, comma-separated, of "
                            f"{', '.join(ORDERINGS)} (the claim is checked on "
                            f"{CLAIM_ORDERING}, which must be among them; the others are "
                            "reported)")  # fmt: skip
    models: str = option(DEFAULT_ROWS, f"comma-separated rows, of {', '.join(ROWS)} "
                         f"({GLOBAL} and a local row are needed for the claim)")
    windows: str = option("5", "D, half-width of the local-m/local-p window, comma-separated")
    forward: str = option("none", "orderings whose Luong rows are also trained with the "
                          "source read forwards, comma-separated, or 'none' (every Luong arm "
                          "reads it reversed, as the paper; the forward arms are reported, not "
                          "checked; each order named adds 24 arms)")
    full: bool = option(False, f"the full sweep: --orderings {','.join(ORDERINGS)}, --models "
                        f"all five rows, --windows 5,10, --forward {','.join(ORDERINGS)} "
                        "(many times the default's time)")  # fmt: skip
    seeds: int = option(8, "training seeds per arm: --seed, --seed+1, ... (an interval needs 2)")
    train_size: int = option(3000, "training sentences per ordering")
    valid_size: int = option(200, "validation sentences (greedy BLEU for the criterion)")
    test_size: int = option(300, "test sentences scored for AER and BLEU")
    emb: int = option(32, "embedding width of every model")
    hidden: int = option(64, "hidden width of every model (RNNsearch: per direction, attention "
                         "and maxout too)")
    batch_size: int = option(32, "sentences per update")
    lr: float = option(5e-3, "Adam learning rate of every model")
    warmup: int = option(300, "updates of linear lr warm-up to --lr, then "
                         "lr·sqrt(warmup/update) (Vaswani 2017's schedule, attnkit train "
                         "--warmup), for every arm alike; 0: a constant --lr (the first "
                         "default run's)")  # fmt: skip
    cap: int = option(CAP, "updates at most per arm; an arm below the criterion there does "
                      f"not count (the verdict is INCONCLUSIVE); {CAP}: at least 3x each "
                      "compared row's median stop on the calibration seeds "
                      f"{CALIBRATION_SEEDS.start}-{CALIBRATION_SEEDS.stop - 1}")  # fmt: skip
    eval_every: int = option(100, f"updates between greedy valid BLEU checks (stop at "
                             f">= {CRITERION:g})")
    seed: int = option(SEED, "data seed and first training seed (training seeds --seed, "
                       f"--seed+1, ...); {SEED}: seeds no alignment run had used before")

    def __post_init__(self) -> None:
        if self.full:
            changed = [k for k, v in FULL.items() if getattr(self, k) != DEFAULTS[k]]
            if changed:
                raise ValueError(f"--full sets --{', --'.join(changed)} itself; drop them or "
                                 "drop --full")  # fmt: skip
            for k, v in FULL.items():
                setattr(self, k, v)
        _ = self.ordering_list, self.rows, self.window_list, self.forward_list  # raise if bad
        if self.seeds < 2:
            raise ValueError(f"--seeds {self.seeds}: an interval needs at least 2 (8 advised)")
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "train_size", "valid_size", "test_size", "emb", "hidden", "batch_size", "cap",
            "eval_every", "jobs", "threads"))  # fmt: skip
        if not self.lr > 0:
            raise ValueError(f"--lr {self.lr}; it must be positive")
        if self.warmup < 0:
            raise ValueError(f"--warmup {self.warmup}; pass 0 (constant lr) or a number of "
                             "updates")  # fmt: skip

    @property
    def ordering_list(self) -> list[str]:
        got = [o.strip() for o in self.orderings.split(",") if o.strip()]
        if not got or len(set(got)) != len(got) or not set(got) <= set(ORDERINGS):
            raise ValueError(f"--orderings {self.orderings!r}: name each of "
                             f"{', '.join(ORDERINGS)} at most once")  # fmt: skip
        if CLAIM_ORDERING not in got:
            raise ValueError(f"--orderings {self.orderings!r}: the claim is checked on "
                             f"{CLAIM_ORDERING}; include it")  # fmt: skip
        return [o for o in ORDERINGS if o in got]

    @property
    def rows(self) -> list[str]:
        got = [m.strip() for m in self.models.split(",") if m.strip()]
        if not got or len(set(got)) != len(got) or not set(got) <= set(ROWS):
            raise ValueError(f"--models {self.models!r}: name each of {', '.join(ROWS)} at "
                             "most once")  # fmt: skip
        if GLOBAL not in got or not set(got) & set(LOCALS):
            raise ValueError(f"--models {self.models!r}: the claim needs {GLOBAL} and "
                             f"{' or '.join(LOCALS)}")  # fmt: skip
        return [m for m in ROWS if m in got]

    @property
    def forward_list(self) -> list[str]:
        if self.forward.strip() == "none":
            return []
        got = [o.strip() for o in self.forward.split(",") if o.strip()]
        if not set(got) <= set(self.ordering_list):
            raise ValueError(f"--forward {self.forward!r}: name orderings of --orderings "
                             f"({self.orderings}), or none")  # fmt: skip
        return got

    def readings(self, ordering: str) -> tuple[bool, ...]:
        """Source reversed (True) for every Luong arm; also forwards on ``forward_list``."""
        return (True, False) if ordering in self.forward_list else (True,)

    @property
    def window_list(self) -> list[int]:
        try:
            got = sorted({int(d) for d in self.windows.split(",") if d.strip()})
        except ValueError:
            raise ValueError(f"--windows {self.windows!r}: pass comma-separated integers, "
                             "e.g. 5,10") from None  # fmt: skip
        if not got or got[0] < 1:
            raise ValueError(f"--windows {self.windows!r}: every D must be at least 1")
        return got

    @property
    def setting(self) -> Setting:
        return Setting(self.seed, self.train_size, self.valid_size, self.test_size, self.emb,
                       self.hidden, self.batch_size, self.lr, self.cap, self.eval_every,
                       self.threads, self.warmup)  # fmt: skip

    def arms(self) -> list[Arm]:
        """Every (ordering, row, D, reading, seed) to train; a row without a window is
        trained once for all D; RNNsearch (bidirectional) once, unreversed."""
        out = []
        for o in self.ordering_list:
            for m in self.rows:
                windows = self.window_list if ROWS[m].windowed else [0]
                readings = self.readings(o) if ROWS[m].model == "luong" else (False,)
                out += [Arm(o, m, d, r, self.seed + i) for d in windows for r in readings
                        for i in range(self.seeds)]  # fmt: skip
        return out


DEFAULTS = {k: getattr(AlignmentConfig, k) for k in FULL}
