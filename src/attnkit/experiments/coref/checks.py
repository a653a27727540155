"""The checks of ``attnkit experiment coref`` (thresholds fixed from the claim before any
verdict seed ran; evidence.py's contract: 95% t-intervals over the seeds, three outcomes).

The claim (Vaswani et al. 2017, appendix, Fig. 4: two encoder self-attention heads "apparently
involved in anaphora resolution") is an anecdote, so it is checked as an existence claim
(the evidence checklist, §1): *some* head does it above chance, and the model needs it.
Per seed, on the held-out minimal pairs of a tagger that must write il / elle at the
pronoun's own position:

  * claim, follows: the test *margin* (measure.py: follows − anti-follows, the share of
    pairs whose top noun from the pronoun is the referent in both sentences minus the share
    where it is the other noun in both) of the head chosen on the validation pairs by the
    same margin (so that the best of L·H heads is not chosen on the numbers it is judged
    by) lies above 0: every head whose choice does not depend on the referent (a coin, a
    head blind to the adjective, one that prefers a noun by its position) scores 0 in
    expectation, whatever its flip rate. (An earlier design read the follows rate against a
    coin's 25%: a line that also asks for a high flip rate, so stricter than "ignores the
    referent"; the follows rate is reported.)
  * claim, ablation: zeroing that head's output costs more test pronoun accuracy (nouns of
    different gender) than zeroing another head of the same layer: per seed the gap = mean
    accuracy with one of the layer's other heads zeroed − accuracy with the chosen head
    zeroed (the mean over the other heads is the expectation of a head drawn at random),
    paired by seed; its interval lies above 0.
  * design, learned: the tagger's mean test pronoun accuracy (nouns of different gender:
    one il and one elle in every such pair, so every rule blind to the referent scores
    exactly 1/2) ≥ LEARNED = 0.75, half-way from chance to perfect; else the heads of a
    model that has not learnt the task cannot tell.
  * design, above chance: that accuracy's interval lies above CHANCE = 0.5.
  * design, ceiling: the two ablated arms (chosen head zeroed, another head zeroed) are not
    both at 100% accuracy (``evidence.ceiling``, within 0.02): there no cost could show.
  * design, plateau: the cap of updates is at least 3× the median stopping point
    (``evidence.plateau_cap``; runs cut by the cap are named as censored).

The untrained model of each seed (the control: its chosen head's follows rate, its pronoun
accuracy) is reported beside these, not checked: it is no compared arm, and at its floor
(accuracy 1/2, follows near 0) it must not withhold the verdict.
"""

from __future__ import annotations

import statistics
from typing import Any

from .. import evidence as ev

COIN = 0.25  # follows rate of a coin per sentence (reported beside the margin)
CHANCE = 0.5  # il / elle on pairs whose nouns differ in gender
LEARNED = 0.75  # mean test pronoun accuracy (different genders) of a tagger that learnt
FOLLOWS_NAME = ("chosen head: pairs whose top noun from the pronoun is the referent in both "
                "sentences minus those where it is the other noun in both")
ABLATION_NAME = "zeroing the chosen head costs more accuracy than another head of its layer"


def design_interval(name: str, gap: ev.Interval, threshold: float, *, above: bool = True
                    ) -> ev.Check:  # fmt: skip
    """A design check on an interval: wholly on the wanted side passes, else inconclusive."""
    c = ev.on_interval(name, gap, threshold, above=above)
    outcome = ev.PASS if c.outcome == ev.PASS else ev.INCONCLUSIVE
    reason = c.reason if outcome == ev.PASS else c.reason.split(": the interval")[0] + \
        ": the design cannot tell"  # fmt: skip
    return ev.Check(c.name, c.value, c.ci, c.threshold, outcome, "design", reason)


def judge(numbers: dict[str, Any]) -> list[ev.Check]:
    """Every check of the module docstring from the per-seed numbers (``per_seed``'s dict):
    the trained tagger's test accuracy, the chosen head's margin, the accuracies with
    it and with another head of its layer zeroed, the stopping points and the cap. The
    control's numbers, if present, are not read."""
    acc, gap = numbers["accuracy"], [o - z for o, z in zip(numbers["others_zeroed"],
                                                           numbers["zeroed"], strict=True)]
    return [
        ev.learned("test pronoun accuracy (nouns of different gender), mean over seeds",
                   statistics.fmean(acc), LEARNED),
        design_interval("test pronoun accuracy above chance (il / elle)", ev.t_interval(acc),
                        CHANCE),
        ev.ceiling("ablated taggers below the ceiling",
                   {"chosen head zeroed": numbers["zeroed"],
                    "another head zeroed": numbers["others_zeroed"]}, 1.0),
        ev.plateau_cap("trained to a validation plateau", numbers["stops"], numbers["cap"],
                       sum(numbers["censored"])),
        ev.on_interval(FOLLOWS_NAME, ev.t_interval(numbers["margin"]), 0.0),
        ev.on_interval(ABLATION_NAME, ev.t_interval(gap), 0.0),
    ]  # fmt: skip


def per_seed(seeds: list[dict[str, Any]], cap: int) -> dict[str, Any]:
    """The numbers of each seed (``jobs.train_seed``'s results) that the checks read, and the
    control's, reported; ``cap`` the most updates a run may make."""
    return {
        "accuracy": [s["scores"]["pronoun_differ"] for s in seeds],
        "margin": [s["chosen"]["margin"] for s in seeds],
        "follows": [s["chosen"]["follows"] for s in seeds],
        "zeroed": [s["ablation"]["zeroed"] for s in seeds],
        "others_zeroed": [s["ablation"]["others_zeroed"] for s in seeds],
        "stops": [s["training"]["stop"] for s in seeds],
        "censored": [bool(s["training"]["censored"]) for s in seeds],
        "cap": cap,
        "control_accuracy": [s["control"]["scores"]["pronoun_differ"] for s in seeds],
        "control_follows": [s["control"]["follows"] for s in seeds],
    }


__all__ = ["ABLATION_NAME", "CHANCE", "COIN", "FOLLOWS_NAME", "LEARNED", "design_interval",
           "judge", "per_seed"]  # fmt: skip
