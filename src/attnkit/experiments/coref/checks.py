"""The checks of ``attnkit experiment coref`` (thresholds fixed from the claim before any run;
evidence.py's contract: 95% t-intervals over the seeds, three outcomes).

The claim (Vaswani et al. 2017, Fig. 4): an encoder self-attention head looks from "it" at
the noun it means, and its choice moves with the adjective. Measured per seed on the held-out
minimal pairs: the test *follows* rate (measure.py) of the encoder head chosen on the
validation pairs (so that choosing the best of L·H heads does not inflate the test number).

  * claim: that rate's interval lies above FOLLOWS = COIN = 0.25, chance: a coin per sentence
    scores 1/4, a head blind to the adjective 0. The paper's figure is an anecdote ("apparently
    involved in anaphora resolution"), an existence claim with no rate, so the check asks only
    that the best encoder head (chosen on validation) follows the referent above chance. (The
    threshold was 0.5, a margin of our own, until after the committed run; the run's outcome
    is the same under both.)
  * design, learned: the model's pronoun accuracy on the held-out sentences whose two nouns
    differ in gender (the only ones where il / elle needs the referent; there every rule
    blind to the referent scores exactly 1/2, each pair holding one of each) has a mean
    ≥ LEARNED = 0.9; else the model has not learnt the task and the heads cannot tell.
  * design, above chance: the interval of that accuracy lies above CHANCE = 0.5.
  * design, control: the same chosen-head rate measured on each seed's untrained model lies
    below FOLLOWS (its interval's top); else the measurement passes without training and
    cannot tell.
  * design, scope (``scope``): an existence claim from an anecdote needs a design in which
    the encoder must route the pronoun's referent, and an ablation that shows the head
    matters (the evidence checklist, §1). Here the decoder's cross-attention can read both
    nouns and the adjective itself, so nothing forces an encoder head to route, and no
    ablation is run: the check holds the verdict at INCONCLUSIVE whichever way the rate
    falls. Given per-seed drops in held-out pronoun accuracy when the chosen head is ablated,
    it passes when their t-interval lies above 0. (Added after the default run; the run's own
    verdict stays in its JSON as ``verdict_as_run``.)
"""

from __future__ import annotations

import statistics
from typing import Any

from .. import evidence as ev

COIN = 0.25  # follows rate of a coin per sentence
FOLLOWS = COIN  # the claim: the chosen head follows the referent above chance
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


SCOPE = "scope: the encoder must route the pronoun, and an ablation shows the head matters"


def scope(ablation: list[float] | None = None) -> ev.Check:
    """The scope check of the module docstring. ``ablation``: per seed, the held-out pronoun
    accuracy of the trained model minus that with the chosen encoder head ablated; ``None``
    where no ablation was run (this experiment's design)."""
    if ablation is None:
        return ev.Check(SCOPE, 0.0, (0.0, 0.0), 0.0, ev.INCONCLUSIVE, "design",
                        f"{SCOPE}: the design does not force the encoder to route the "
                        "pronoun, and no ablation was run")  # fmt: skip
    return design_interval(f"{SCOPE}: pronoun accuracy drop with the chosen head ablated",
                           ev.t_interval(ablation), 0.0)  # fmt: skip


def judge(numbers: dict[str, list[float]]) -> list[ev.Check]:
    """Every check of a run from its per-seed numbers (``per_seed``'s dict, with an optional
    ``"ablation"`` list): ``checks_of`` and ``scope``."""
    return [*checks_of(numbers["accuracy"], numbers["follows"], numbers["control"]),
            scope(numbers.get("ablation"))]  # fmt: skip


def per_seed(seeds: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The checked numbers of each seed (``jobs.train_seed``'s results)."""
    return {
        "accuracy": [s["scores"]["pronoun_differ"] for s in seeds],
        "follows": [s["chosen"]["enc-self"]["follows"] for s in seeds],
        "control": [s["control"]["enc-self"]["follows"] for s in seeds],
    }


__all__ = ["CHANCE", "COIN", "FOLLOWS", "LEARNED", "SCOPE", "checks_of", "design_interval", "judge",
           "per_seed", "scope"]
