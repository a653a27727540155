"""The checks of ``attnkit experiment explanation``, per task, each from its paper's own claim
(fixed before the verdict's seeds ran; evidence.py's contract: 95% t-intervals over seeds of
per-seed paired numbers, three outcomes). Every claim check's threshold is 0: a direction.

Jain & Wallace 2019 ("J&W"), on the attention model:
  * agreement: attention's rank agreement with the gradient, and with leave-one-out, is weak
    next to theirs with each other: τ(g, Δ) − τ(α, g) > 0 and τ(g, Δ) − τ(α, Δ) > 0 (their
    §4.1 compares exactly these, per data set).
  * counterfactual: attention very different from the learned one leaves the prediction
    within ε. "Very different" is measured against how far the attention of the same model
    trained from another initialisation lies (Wiegreffe & Pinter §3.2's calibration, the only
    yardstick either paper gives): ε-max JSD − JSD(α, α_again) > 0.

Wiegreffe & Pinter 2019 ("W&P"):
  * attention is needed: the attention model's test accuracy − the uniform model's > 0 (§3.1).
  * the weights carry information: in the token MLP without context, the attention model's
    weights transplanted beat uniform weights: accuracy gap > 0 (§3.3). W&P read it only on
    tasks where attention is needed (§3.1 is their gate: "if attention is not needed, it
    cannot be an explanation"), so on a task where §3.1 did not pass the §3.3 check is not
    read (INCONCLUSIVE, whatever its interval says).

Design checks, per task and per compared arm only: accuracy off the floor (chance, 0.5: a
t-interval of accuracy − 0.5 wholly above 0); the baseline of each W&P accuracy comparison
(``uniform``, ``mlp-uniform``), on its own, below the ceiling (mean accuracy not within
0.02 of 1.0). A ceiling can only shrink a gap: a baseline at 100% leaves "A beats the
baseline" no room to pass, while the better arm at 100% with the baseline below it still
shows the claim's direction, so the check reads the arm the claim says should lose (an
earlier version read each pair, off the ceiling when either arm was, which let a baseline
at 100% through). Each compared arm trained to a plateau (the cap ≥ 3× its median stop).
J&W compare no accuracies, so their arms have no ceiling check. The arms reported for
context (the MLP with its own trained attention; top-token hit rates; τ values themselves)
are checked by nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .. import evidence as ev

PAPERS = {"J&W": "Jain & Wallace 2019", "W&P": "Wiegreffe & Pinter 2019"}
CHANCE = 0.5
# paper -> the arms its checks compare (their design checks belong to its verdict)
ARMS = {"J&W": ("attention", "again"), "W&P": ("attention", "uniform", "mlp-uniform",
                                                 "mlp-transplanted")}  # fmt: skip
CEILING_ARMS = ("uniform", "mlp-uniform")  # the baselines of W&P's accuracy comparisons
CONTEXT = ("mlp-attention",)


def numbers(seeds: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """The per-seed numbers the checks read, from the jobs' results of one task."""
    acc = {arm: [s["runs"][arm]["test_accuracy"] for s in seeds]
           for arm in seeds[0]["runs"]}  # fmt: skip
    out = {f"acc:{arm}": v for arm, v in acc.items()}
    for arm in seeds[0]["runs"]:
        out[f"stop:{arm}"] = [s["runs"][arm]["steps_run"] for s in seeds]
        out[f"censored:{arm}"] = [float(s["runs"][arm]["censored"]) for s in seeds]
    for k in ("attn_grad", "attn_loo", "grad_loo"):
        out[f"tau:{k}"] = [s["tau"][k] for s in seeds]
    out["adversarial_jsd"] = [s["adversarial_jsd"] for s in seeds]
    out["seed_jsd"] = [s["seed_jsd"] for s in seeds]
    return out


def _gap(a: Sequence[float], b: Sequence[float]) -> ev.Interval:
    return ev.t_interval([x - y for x, y in zip(a, b, strict=True)])


def task_checks(task: str, n: Mapping[str, Sequence[float]], cap: int) -> list[ev.Check]:
    """Every check of one task; each name starts with "TASK · PAPER" or "TASK · design"."""
    checks: list[ev.Check] = []
    for paper, arms in ARMS.items():
        for arm in arms:
            acc = n[f"acc:{arm}"]
            checks.append(ev.off_floor(f"{task} · {paper} design: {arm} accuracy above chance",
                                       ev.t_interval([a - CHANCE for a in acc])))  # fmt: skip
            stops = n[f"stop:{arm}"]
            checks.append(ev.plateau_cap(f"{task} · {paper} design: {arm} trained to a plateau",
                                         stops, cap, int(sum(n[f"censored:{arm}"]))))
    for arm in CEILING_ARMS:
        checks.append(ev.ceiling(f"{task} · W&P design: {arm} accuracy below the ceiling",
                                 {arm: n[f"acc:{arm}"]}, 1.0))  # fmt: skip
    gl = n["tau:grad_loo"]
    needed = ev.on_interval(f"{task} · W&P: accuracy attention − uniform",
                            _gap(n["acc:attention"], n["acc:uniform"]), 0.0)
    checks += [
        ev.on_interval(f"{task} · J&W: τ(gradient, LOO) − τ(attention, gradient)",
                       _gap(gl, n["tau:attn_grad"]), 0.0),
        ev.on_interval(f"{task} · J&W: τ(gradient, LOO) − τ(attention, LOO)",
                       _gap(gl, n["tau:attn_loo"]), 0.0),
        ev.on_interval(f"{task} · J&W: ε-max adversarial JSD − JSD between two initialisations",
                       _gap(n["adversarial_jsd"], n["seed_jsd"]), 0.0),
        needed,
        gated(ev.on_interval(f"{task} · W&P: MLP accuracy transplanted weights − uniform",
                             _gap(n["acc:mlp-transplanted"], n["acc:mlp-uniform"]), 0.0),
              needed),
    ]  # fmt: skip
    return checks


def gated(transplant: ev.Check, needed: ev.Check) -> ev.Check:
    """W&P §3.3 (``transplant``) as they read it: only where §3.1 (``needed``, attention
    beats uniform) passed; otherwise INCONCLUSIVE, its interval kept, with the reason."""
    if needed.outcome == ev.PASS:
        return transplant
    return replace(transplant, outcome=ev.INCONCLUSIVE,
                   reason=f"{transplant.reason}; not read: W&P read §3.3 only where attention "
                          f"is needed (§3.1), and here attention − uniform is "
                          f"{needed.outcome}")  # fmt: skip


def claim_verdicts(checks: Sequence[ev.Check], tasks: Sequence[str]) -> dict[str, dict[str, str]]:
    """task -> paper -> the verdict of that paper's checks (its claims and the design checks of
    the arms it compares) on that task."""
    return {t: {p: ev.verdict_of([c for c in checks if c.name.startswith(f"{t} · {p}")])
                for p in PAPERS} for t in tasks}  # fmt: skip


def reported(seeds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What is reported and checked by nothing: means with t-intervals over seeds."""
    def ci(xs: Sequence[float]) -> dict[str, float]:
        i = ev.t_interval(xs)
        return {"mean": i.value, "lo": i.lo, "hi": i.hi}

    out: dict[str, Any] = {
        "accuracy": {arm: ci([s["runs"][arm]["test_accuracy"] for s in seeds])
                     for arm in seeds[0]["runs"]},
        "tau": {k: ci([s["tau"][k] for s in seeds]) for k in seeds[0]["tau"]},
        "tau_untrained": {k: ci([s["tau_untrained"][k] for s in seeds])
                          for k in seeds[0]["tau_untrained"]},
        "adversarial_jsd": ci([s["adversarial_jsd"] for s in seeds]),
        "adversary_found": ci([s["adversary_found"] for s in seeds]),
        "seed_jsd": ci([s["seed_jsd"] for s in seeds]),
        "max_attention": ci([s["max_attention"] for s in seeds]),
        "top_hits": {k: ci([s["top_hits"][k] for s in seeds]) for k in seeds[0]["top_hits"]},
        "chance_hits": statistics.fmean(s["chance_hits"] for s in seeds),
        "median_stop": {arm: statistics.median(s["runs"][arm]["steps_run"] for s in seeds)
                        for arm in seeds[0]["runs"]},
        "censored": {arm: sum(s["runs"][arm]["censored"] for s in seeds)
                     for arm in seeds[0]["runs"]},
    }  # fmt: skip
    return out


__all__ = ["ARMS", "CEILING_ARMS", "CHANCE", "CONTEXT", "PAPERS", "claim_verdicts", "gated",
           "numbers", "reported", "task_checks"]  # fmt: skip
