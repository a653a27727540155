"""The checks of ``attnkit experiment coref`` (thresholds fixed from the claim before any run;
evidence.py's contract: 95% t-intervals over the seeds, three outcomes).

The claim (Vaswani et al. 2017, Fig. 4): an encoder self-attention head looks from "it" at
the noun it means, and its choice moves with the adjective. Measured per seed on the held-out
minimal pairs: the test *follows* rate (measure.py) of the encoder head chosen on the
validation pairs (so that choosing the best of L·H heads does not inflate the test number).

  * claim: that rate's interval lies above FOLLOWS = 0.5. A coin per sentence scores 1/4, a
    head blind to the adjective 0; the figure's head is "very sharp" and resolves both
    sentences, so a head "involved in anaphora resolution" must do it in most pairs: a margin
    of 25 points over the coin (≈ 71% of sentences right if they were independent).
  * design, learned: the model's pronoun accuracy on the held-out sentences whose two nouns
    differ in gender (the only ones where il / elle needs the referent; there every rule
    blind to the referent scores exactly 1/2, each pair holding one of each) has a mean
    ≥ LEARNED = 0.9; else the model has not learnt the task and the heads cannot tell.
  * design, above chance: the interval of that accuracy lies above CHANCE = 0.5.
  * design, control: the same chosen-head rate measured on each seed's untrained model lies
    below FOLLOWS (its interval's top); else the measurement passes without training and
    cannot tell.
"""

from __future__ import annotations

import statistics
from typing import Any

from .. import evidence as ev

FOLLOWS = 0.5  # the claim's threshold on the chosen head's follows rate
COIN = 0.25  # follows rate of a coin per sentence
CHANCE = 0.5  # il / elle
LEARNED = 0.9  # mean held-out pronoun accuracy (different genders) of a model that learnt


def design_interval(name: str, gap: ev.Interval, threshold: float, *, above: bool = True
                    ) -> ev.Check:  # fmt: skip
    """A design check on an interval: wholly on the wanted side passes, else inconclusive."""
    c = ev.on_interval(name, gap, threshold, above=above)
    outcome = ev.PASS if c.outcome == ev.PASS else ev.INCONCLUSIVE
    reason = c.reason if outcome == ev.PASS else c.reason.split(": the interval")[0] + \
        ": the design cannot tell"  # fmt: skip
    return ev.Check(c.name, c.value, c.ci, c.threshold, outcome, "design", reason)


def checks_of(accuracy: list[float], follows: list[float], control: list[float]) -> list[ev.Check]:
    """The checks of the module docstring on per-seed numbers: held-out pronoun accuracy
    (different genders), the chosen encoder head's test follows rate, the same for the
    untrained control."""
    return [
        ev.learned("held-out pronoun accuracy (nouns of different gender), mean over seeds",
                   statistics.fmean(accuracy), LEARNED),
        design_interval("held-out pronoun accuracy above chance (il / elle)",
                        ev.t_interval(accuracy), CHANCE),
        design_interval("untrained control: chosen encoder head follows the referent",
                        ev.t_interval(control), FOLLOWS, above=False),
        ev.on_interval("chosen encoder head: top noun follows the referent in both sentences "
                       "of a held-out pair", ev.t_interval(follows), FOLLOWS),
    ]  # fmt: skip


def per_seed(seeds: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The checked numbers of each seed (``jobs.train_seed``'s results)."""
    return {
        "accuracy": [s["scores"]["pronoun_differ"] for s in seeds],
        "follows": [s["chosen"]["enc-self"]["follows"] for s in seeds],
        "control": [s["control"]["enc-self"]["follows"] for s in seeds],
    }


__all__ = ["CHANCE", "COIN", "FOLLOWS", "LEARNED", "checks_of", "design_interval", "per_seed"]
