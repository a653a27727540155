"""The experiments' shared training summary: the part of a result whose runs stopped early
(``pool.plateau_summary``) and the sentence its report says (``base.plateau_text``), pinned by
hand."""

import time

from attnkit.experiments.base import plateau_text
from attnkit.experiments.pool import plateau_summary


def test_plateau_summary_counts_updates_stops_and_censored_runs():
    stops = {"a-s0": (7, False), "b-s0": (30, True), "a-s1": (5, False)}
    got = plateau_summary(30, 3540, {"a-s0": 12.34, "b-s0": 50.06, "a-s1": 9.0}, stops,
                          time.perf_counter() - 2.0)  # fmt: skip
    total = got.pop("total_seconds")
    assert 2.0 <= total < 60.0
    assert got == {
        "cap_updates": 3540,
        "updates_per_epoch": 118,
        "stopping_epochs": {"a-s0": 7, "b-s0": 30, "a-s1": 5},
        "censored_runs": ["b-s0"],
        "train_seconds": {"a-s0": 12.3, "b-s0": 50.1, "a-s1": 9.0},
    }


def test_plateau_text_names_each_stop_the_cap_and_the_censored_runs():
    result = {"stopping_epochs": {"a-s0": 7, "b-s0": 30}, "censored_runs": ["b-s0"],
              "updates_per_epoch": 118, "config": {"epochs": 30}}  # fmt: skip
    assert plateau_text(result) == ("stopped after a-s0 7, b-s0 30 epochs of 118 updates "
                                    "(cap 30); censored at the cap: b-s0")  # fmt: skip
    result["censored_runs"] = []
    assert plateau_text(result).endswith("censored at the cap: none")
