"""The experiment contract's statistics: checks on intervals, never on point means, and three
outcomes: reproduced, not reproduced, inconclusive.

    gap = t_interval([a - b for a, b in zip(acc_attn, acc_rnn)])     # over seeds
    checks = [
        ceiling("arms below the ceiling", {"attention": acc_attn, "lstm": acc_rnn}, 1.0),
        on_interval("attention leads the LSTM", gap, threshold=0.0),
    ]
    verdict_of(checks)    # "REPRODUCED" | "NOT REPRODUCED: ..." | "INCONCLUSIVE: ..."

A *claim* check compares an interval with the claim's threshold: the whole interval on the
claim's side passes, the whole interval on the other side fails, an interval that holds both
the threshold and its negation is inconclusive. A *design* check says whether the numbers can
tell at all: arms at a ceiling or a floor (every arm's mean within ``eps`` of the metric's
bound), or the best arm short of learning the task. A design check that cannot tell makes the
verdict INCONCLUSIVE whatever the claim checks say: an arm at the ceiling never yields NOT
REPRODUCED.

The JSON form of a check (``Check.as_json``) is the one every experiment writes under
``"checks"``: ``{"name", "value", "ci": [lo, hi], "threshold", "outcome", "kind"}``.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..train.outputs import write_output
from .base import Say, markdown_table, no_nan, power_exponent, write_outputs

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
REPRODUCED = "REPRODUCED"
EXIT_CODES = {REPRODUCED: 0, "NOT REPRODUCED": 1, "INCONCLUSIVE": 2}


@dataclass(frozen=True)
class Interval:
    """A statistic with its 95% (or ``level``) interval, and how many samples made it."""

    value: float
    lo: float
    hi: float
    n: int
    level: float = 0.95

    def __post_init__(self) -> None:
        if not self.lo <= self.value <= self.hi and not math.isnan(self.value):
            raise ValueError(f"interval [{self.lo}, {self.hi}] does not hold {self.value}")


def t_interval(samples: Sequence[float], level: float = 0.95) -> Interval:
    """The mean of ``samples`` (e.g. one gap per seed) with Student's t interval,
    mean ± t_{n-1, (1+level)/2} · s / √n. Needs two samples at least."""
    from scipy.stats import t

    xs = [float(x) for x in samples]
    if len(xs) < 2:
        raise ValueError(f"{len(xs)} sample(s): an interval needs 2 at least (use more seeds)")
    if not all(math.isfinite(x) for x in xs):
        raise ValueError(f"samples {xs} are not all finite")
    mean, sd = statistics.fmean(xs), statistics.stdev(xs)
    half = float(t.ppf((1 + level) / 2, len(xs) - 1)) * sd / math.sqrt(len(xs))
    return Interval(mean, mean - half, mean + half, len(xs), level)


def paired_bootstrap(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """The mean gap ``a - b`` of two arms scored on the same examples, with a percentile
    interval from resampling seeds and, within each, test examples (the same draw for both
    arms: paired). ``a[s][i]``: arm a's score of example i under seed s (S × N each)."""
    if len(a) != len(b) or any(len(x) != len(y) for x, y in zip(a, b, strict=True)):
        raise ValueError("the two arms must be scored on the same seeds and examples")
    if not a or not all(a):
        raise ValueError("no seeds or no examples to resample")
    diffs = [[x - y for x, y in zip(ra, rb, strict=True)] for ra, rb in zip(a, b, strict=True)]
    mean = statistics.fmean(statistics.fmean(d) for d in diffs)
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples):
        seeds = [diffs[rng.randrange(len(diffs))] for _ in diffs]
        stats.append(statistics.fmean(
            statistics.fmean(d[rng.randrange(len(d))] for _ in d) for d in seeds
        ))  # fmt: skip
    return _percentile_interval(mean, stats, len(diffs), level)


def _percentile_interval(value: float, stats: list[float], n: int, level: float) -> Interval:
    """``value`` with the percentile interval of its bootstrap ``stats`` (widened to hold
    ``value``), made from ``n`` samples."""
    stats = sorted(stats)
    lo = stats[int(math.floor((1 - level) / 2 * (len(stats) - 1)))]
    hi = stats[int(math.ceil((1 + level) / 2 * (len(stats) - 1)))]
    return Interval(value, min(lo, value), max(hi, value), n, level)


def point(value: float) -> Interval:
    """An exact count (FLOPs, layers, graph depth, cell calls) as an interval: it has no
    sampling error, so its interval is the point [value, value]."""
    return Interval(value, value, value, 1, 1.0)


def bootstrap_medians(
    repeats: Sequence[Sequence[float]],
    statistic: Callable[[list[float]], float],
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """``statistic`` of the medians of ``repeats`` (e.g. the timed repeats at each n), with a
    percentile interval from resampling each group's repeats with replacement and taking
    ``statistic`` of the resampled medians."""
    if not repeats or not all(repeats):
        raise ValueError("no repeats to resample: time each point once at least")
    value = statistic([statistics.median(r) for r in repeats])
    rng = random.Random(seed)
    stats = [statistic([statistics.median(rng.choices(r, k=len(r))) for r in repeats])
             for _ in range(resamples)]  # fmt: skip
    return _percentile_interval(value, stats, sum(len(r) for r in repeats), level)


def exponent_interval(
    xs: Sequence[float], repeats: Sequence[Sequence[float]], **kwargs: Any
) -> Interval:
    """k of y ≈ c·x^k (``base.power_exponent``) fitted to the median of the repeats at each
    x, with the interval of ``bootstrap_medians``: ``repeats[i]`` are the timings at xs[i]."""
    if len(xs) != len(repeats):
        raise ValueError(f"{len(xs)} xs but {len(repeats)} groups of repeats")
    return bootstrap_medians(repeats, lambda m: power_exponent(xs, m), **kwargs)


@dataclass(frozen=True)
class Check:
    """One check of an experiment: what was compared, its interval, the threshold, the
    outcome (pass / fail / inconclusive), whether it judges the claim or the design, and a
    sentence saying what was measured."""

    name: str
    value: float
    ci: tuple[float, float]
    threshold: float
    outcome: str
    kind: str  # "claim" or "design"
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "ci": list(self.ci),
                "threshold": self.threshold, "outcome": self.outcome, "kind": self.kind,
                "reason": self.reason}  # fmt: skip


def on_interval(name: str, gap: Interval, threshold: float, *, above: bool = True) -> Check:
    """The claim "the statistic is above ``threshold``" (``above=False``: below) judged on
    ``gap``'s interval: wholly on the claim's side passes, wholly on the other side fails,
    holding both is inconclusive."""
    if above:
        outcome = PASS if gap.lo > threshold else FAIL if gap.hi <= threshold else INCONCLUSIVE
    else:
        outcome = PASS if gap.hi < threshold else FAIL if gap.lo >= threshold else INCONCLUSIVE
    side = ">" if above else "<"
    reason = (
        f"{name}: {gap.value:.4g}, {gap.level:.0%} interval [{gap.lo:.4g}, {gap.hi:.4g}] over "
        f"{gap.n}, claim {side} {threshold:.4g}"
    )
    if outcome == INCONCLUSIVE:
        reason += ": the interval holds both the claim and its negation"
    return Check(name, gap.value, (gap.lo, gap.hi), threshold, outcome, "claim", reason)


def ceiling(
    name: str,
    arms: Mapping[str, Sequence[float]],
    bound: float,
    *,
    eps: float = 0.02,
    floor: bool = False,
) -> Check:
    """A design check: can the arms tell? Inconclusive when every arm's mean sits within
    ``eps`` of ``bound`` (the metric's best, e.g. accuracy 1.0; ``floor=True``: its worst,
    e.g. chance), since then no gap between them can show."""
    means = {k: statistics.fmean(v) for k, v in arms.items()}
    if not means:
        raise ValueError("no arms to check")
    near = all(abs(m - bound) <= eps for m in means.values())
    where = "floor" if floor else "ceiling"
    shown = ", ".join(f"{k} {m:.3g}" for k, m in means.items())
    reason = f"{name}: {shown}; {where} {bound:.3g} ± {eps:.3g}"
    if near:
        reason += (f": every arm at the {where}, no gap can show" if len(means) > 1 else
                   f": the arm at the {where}, no gap beyond it can show")
    closest = min(means.values(), key=lambda m: abs(m - bound))
    lo, hi = min(means.values()), max(means.values())
    outcome = INCONCLUSIVE if near else PASS
    return Check(name, closest, (lo, hi), bound, outcome, "design", reason)


def _design(name: str, value: float, threshold: float, above: bool, shown: str,
            why: str) -> Check:  # fmt: skip
    """A design check: ``value`` on the threshold's side passes, otherwise INCONCLUSIVE
    with ``why``."""
    ok = value >= threshold if above else value <= threshold
    reason = f"{name}: {shown}{value:.4g}, needs {'>=' if above else '<='} {threshold:.4g}"
    if not ok:
        reason += f": {why}"
    return Check(name, value, (value, value), threshold, PASS if ok else INCONCLUSIVE,
                 "design", reason)  # fmt: skip


def learned(name: str, best: float, criterion: float, *, above: bool = True) -> Check:
    """A design check: the best arm reached ``criterion`` (e.g. valid BLEU ≥ 95) at the
    budget; otherwise the verdict cannot come from this budget."""
    return _design(name, best, criterion, above, "best arm ", "not learned at this budget")


def can_tell(name: str, value: float, threshold: float, *, above: bool = True) -> Check:
    """A design check on an exact number that says whether the measurement can test the
    claim (e.g. the grid holds a point with n < d, a layer took the kernel it names): on the
    threshold's side (``>=``; ``above=False``: ``<=``) passes, otherwise INCONCLUSIVE."""
    return _design(name, value, threshold, above, "", "the measurement cannot test the claim")


def off_floor(name: str, margin: Interval) -> Check:
    """A design check on one compared arm in one setting: ``margin`` is its lead over the
    floor (e.g. the window-mean forecast's error − the arm's, one per seed). Its interval
    wholly above 0 passes; otherwise INCONCLUSIVE, since at the floor no gap between arms can
    show. Arms reported for context get no such check: they must not withhold a verdict."""
    return above_zero(name, margin, "not clear of the floor, no gap can show")


def above_zero(name: str, gap: Interval, why: str) -> Check:
    """A design check on an interval: wholly above 0 passes; otherwise INCONCLUSIVE, its
    reason ending in ``why`` (what the measurement cannot show then)."""
    c = on_interval(name, gap, 0.0)
    if c.outcome == PASS:
        return Check(c.name, c.value, c.ci, c.threshold, PASS, "design", c.reason)
    return Check(c.name, c.value, c.ci, c.threshold, INCONCLUSIVE, "design",
                 f"{c.reason}: {why}")  # fmt: skip


def none_short(name: str, short: Sequence[str], reason: str, why: str) -> Check:
    """A design check that no run (seed, arm) fell short of a condition: value = the runs in
    ``short`` (their names), threshold 0. None passes; any makes it INCONCLUSIVE, the reason
    ending in ``why`` and their names (e.g. "; at the cap, still improving: fixed seed #2")."""
    if short:
        reason += f"; {why}: {', '.join(short)}"
    n = float(len(short))
    return Check(name, n, (n, n), 0.0, INCONCLUSIVE if short else PASS, "design", reason)


PLATEAU_CAP = 3.0
"""A cap at least this many times an arm's median stopping point (``plateau_cap``)."""


def plateau_cap(name: str, stops: Sequence[float], cap: float, censored: int, *,
                ratio: float = PLATEAU_CAP) -> Check:  # fmt: skip
    """A design check that one compared arm trained to a plateau under early stopping: the
    cap is at least ``ratio``× the median of its runs' stopping points ``stops`` (updates or
    epochs; a run cut by the cap counts as the cap, which only raises the median); otherwise
    INCONCLUSIVE, since the cap may then set the result. ``censored``, the runs the cap cut
    before their plateau, is named in the reason (report them as censored)."""
    median = statistics.median(stops)
    value = cap / median
    reason = (f"{name}: cap {cap:g} / median stop {median:g} = {value:.3g}, needs >= {ratio:g}; "
              f"{censored} of {len(stops)} runs censored at the cap")  # fmt: skip
    ok = value >= ratio
    if not ok:
        reason += ": the cap, not the plateau, may set the result"
    return Check(name, value, (value, value), ratio, PASS if ok else INCONCLUSIVE, "design",
                 reason)  # fmt: skip


def verdict_of(checks: Sequence[Check]) -> str:
    """The experiment's verdict from its checks: INCONCLUSIVE when a design check cannot tell;
    else NOT REPRODUCED when a claim check fails; else INCONCLUSIVE when a claim check's
    interval straddles its threshold; else REPRODUCED. The reasons follow the colon."""
    if not checks:
        raise ValueError("no checks: a verdict needs at least one")
    design = [c for c in checks if c.kind == "design" and c.outcome == INCONCLUSIVE]
    failed = [c for c in checks if c.kind == "claim" and c.outcome == FAIL]
    open_ = [c for c in checks if c.kind == "claim" and c.outcome == INCONCLUSIVE]
    if design:
        return "INCONCLUSIVE: " + "; ".join(c.reason for c in design)
    if failed:
        return "NOT REPRODUCED: " + "; ".join(c.reason for c in failed)
    if open_:
        return "INCONCLUSIVE: " + "; ".join(c.reason for c in open_)
    return REPRODUCED


def judged(checks: Sequence[Check]) -> dict[str, Any]:
    """The last two fields of an experiment's JSON: ``"checks"`` (each ``Check.as_json``)
    and ``"verdict"`` (``verdict_of``)."""
    return {"checks": [c.as_json() for c in checks], "verdict": verdict_of(checks)}


def checks_table(checks: Sequence[dict[str, Any]], digits: int = 4) -> str:
    """The checks of an experiment's JSON (``Check.as_json``) as a Markdown table: one row per
    check, its value, 95% interval, threshold and outcome, to ``digits`` significant digits."""
    g = f"{{:.{digits}g}}".format
    return markdown_table(
        ["check", "kind", "value", "95% interval", "threshold", "outcome"],
        [[c["name"], c["kind"], g(c["value"]), f"[{g(c['ci'][0])}, {g(c['ci'][1])}]",
          g(c["threshold"]), c["outcome"]] for c in checks],
    )  # fmt: skip


def conclude(
    name: str,
    result: dict[str, Any],
    rows: Callable[[dict[str, Any]], Sequence[dict[str, Any]]],
    plot: Callable[[dict[str, Any], Path], Path],
    out: Path,
    say: Say,
    work: str,
    extra: Sequence[Callable[[Path], Path]] = (),
    digits: int = 4,
) -> list[Path]:
    """The end of an experiment's report (its ``rows`` and ``plot`` functions): the checks as
    a table (to ``digits`` significant digits), the contract's files (``write_outputs``), the
    run's total seconds (spent on ``work``; "" names nothing) and the verdict."""
    say(checks_table(result["checks"], digits))
    paths = write_outputs(name, rows(result), result, plot, out, say, extra)
    say(f"total {result['total_seconds']:.0f}s" + (f" ({work})" if work else ""))
    say(f"verdict: {result['verdict']}")
    return paths


def keep_measured(result: dict[str, Any], path: Path) -> Path:
    """``result`` as JSON at ``path`` (a value JSON cannot hold written as its text), so that
    a report that fails after hours of training loses none of what was measured."""
    return write_output(path, json.dumps(no_nan(result), indent=1, default=str))


_JOURNALS: list[Path] = []


@contextmanager
def journal(path: Path) -> Iterator[Path]:
    """While the block runs, every run that finishes in ``pool.run_each`` is appended to
    ``path``, one JSON line each (the run's item and its result), so that a failure after
    the runs (in the checks, a report, a Ctrl-C) loses none of what they measured. The file
    is removed when the block ends without an error: the result then holds every run. A
    journal already at ``path`` (kept by an earlier failure) stays as it is: this one takes
    the first free name ``NAME-2.jsonl``, ``NAME-3.jsonl``, ..., and the block gets it."""
    first, k = path, 1
    while path.exists():
        k += 1
        path = first.with_name(f"{first.stem}-{k}{first.suffix}")
    _JOURNALS.append(path)
    try:
        yield path
        path.unlink(missing_ok=True)
    finally:
        _JOURNALS.pop()


def journal_run(item: Any, result: Any) -> None:
    """``item`` and its ``result`` as one line of the open journal (none open: nothing)."""
    if _JOURNALS:
        line = json.dumps({"item": item, "result": no_nan(result)}, default=str)
        with _JOURNALS[-1].open("a") as f:
            f.write(line + "\n")


def exit_code(verdict: str) -> int:
    """0 REPRODUCED, 1 NOT REPRODUCED, 2 INCONCLUSIVE."""
    for head, code in EXIT_CODES.items():
        if verdict == head or verdict.startswith(head + ":"):
            return code
    raise ValueError(f"verdict {verdict[:60]!r} is none of {', '.join(EXIT_CODES)}")


__all__ = [
    "EXIT_CODES",
    "PLATEAU_CAP",
    "FAIL",
    "INCONCLUSIVE",
    "PASS",
    "REPRODUCED",
    "Check",
    "Interval",
    "above_zero",
    "bootstrap_medians",
    "can_tell",
    "ceiling",
    "checks_table",
    "conclude",
    "exit_code",
    "journal",
    "journal_run",
    "exponent_interval",
    "judged",
    "keep_measured",
    "learned",
    "none_short",
    "off_floor",
    "on_interval",
    "paired_bootstrap",
    "plateau_cap",
    "point",
    "t_interval",
    "verdict_of",
]
