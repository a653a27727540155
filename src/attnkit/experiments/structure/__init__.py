"""Structured attention, each structure on its task, at equal updates (issue 16):

* co-attention (Lu et al. 2016, parallel and alternating) against no co-attention on digit-qa
  (``qa.measure``);
* the hierarchical attention network (Yang et al. 2016, HN-ATT) against its averaging and
  max-pooling variants (Table 2: HN-AVE, HN-MAX) on documents whose label one key sentence
  decides (``docs.measure``);
* multi-dimensional (feature-wise) pooling (Shen et al. 2018, DiSAN) against scalar attention
  pooling, on the same documents.

Each measure function ``measure(seeds, steps, quick, say) -> rows`` trains every model of its
task for the same number of updates (``--qa-steps`` on digit-qa, ``--steps`` on docs), once per
seed, and returns one row per (model, seed):
accuracy on held-out data, parameters and wall-clock seconds per update.

Verdict (thresholds fixed from the claims before any run, not tuned after):
  qa       the better co-attention model's mean accuracy over seeds beats no co-attention's
           by at least ``MARGIN`` (1 point);
  han      HAN's mean accuracy beats both HN-AVE's and HN-MAX's by at least ``MARGIN``;
  peak     HAN's sentence attention peaks on the key sentence for at least ``MIN_PEAK``
           (half) of the test documents (chance: about 1 in 6);
  multidim feature-wise pooling's mean accuracy is not below scalar attention pooling's by
           more than ``MARGIN``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..._checks import check_ranges
from ..base import Experiment, Say, option, report_of
from ..base import verdict as verdict_text

MARGIN = 0.01  # one accuracy point
MIN_PEAK = 0.5
QA_BASELINE = "none"  # digit-qa's model without co-attention (qa.py)

Measure = Callable[[list[int], int, bool, Say], list[dict[str, Any]]]



@dataclass
class StructureConfig:
    steps: int = option(250, "updates per docs model, the same for every docs model")
    qa_steps: int = option(1500, "updates per digit-qa model, the same for each")
    seeds: int = option(3, "seeds per model: seed, seed+1, ...")
    seed: int = option(0, "first seed of data and initialisation")
    threads: int = option(1, "torch CPU threads")
    tiny: int = option(0, "1 = tiny models and data (what --quick sets: a smoke run)")

    def __post_init__(self) -> None:
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "steps", "qa_steps", "seeds", "threads"
        ))  # fmt: skip
        if self.tiny not in (0, 1):
            raise ValueError(f"--tiny {self.tiny}; use 0 or 1")
        if self.seed < 0:
            raise ValueError(f"--seed {self.seed}; it must not be negative")


QUICK = dict(steps=3, qa_steps=3, seeds=1, tiny=1)


def measures() -> dict[str, Measure | None]:
    """task -> its measure function."""
    from .docs import measure as docs
    from .qa import measure as qa

    return {"digit-qa": qa, "docs": docs}


def means(rows: Sequence[dict[str, Any]], key: str = "accuracy") -> dict[tuple[str, str], float]:
    """(task, model) -> the mean of ``key`` over its seeds (rows where it is None left out)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r.get(key) is not None:
            groups.setdefault((r["task"], r["model"]), []).append(float(r[key]))
    return {k: sum(v) / len(v) for k, v in groups.items()}


def verdict(rows: Sequence[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """The failed checks (see the module docstring) and the numbers they compared."""
    acc, peak = means(rows), means(rows, "key_peak")
    reasons: list[str] = []
    checks: dict[str, Any] = {"margin": MARGIN, "min_peak": MIN_PEAK}
    qa = {m: a for (t, m), a in acc.items() if t == "digit-qa"}
    if QA_BASELINE not in qa or len(qa) < 2:
        reasons.append("digit-qa not measured (co-attention against no co-attention)")
    else:
        best = max((m for m in qa if m != QA_BASELINE), key=lambda m: qa[m])
        gain = qa[best] - qa[QA_BASELINE]
        checks["qa"] = {"best": best, "accuracy": qa[best], "baseline": qa[QA_BASELINE],
                        "gain": gain}  # fmt: skip
        if gain < MARGIN:
            reasons.append(
                f"digit-qa: co-attention ({best}) {qa[best]:.3f} vs none {qa[QA_BASELINE]:.3f} "
                f"(gain {gain:+.3f} < {MARGIN})"
            )
    han = acc.get(("docs", "han-attention"))
    pools = {m: acc.get(("docs", f"han-{m}")) for m in ("mean", "max", "multidim")}
    if han is None or None in pools.values():
        reasons.append("docs not measured (HAN and its pooling variants)")
        return reasons, checks
    assert pools["mean"] is not None and pools["max"] is not None and pools["multidim"] is not None
    gains = {m: han - pools[m] for m in ("mean", "max")}  # type: ignore[operator]
    checks["han"] = {"accuracy": han, "mean": pools["mean"], "max": pools["max"], "gains": gains}
    for m, g in gains.items():
        if g < MARGIN:
            reasons.append(f"docs: HAN {han:.3f} vs {m} pooling {pools[m]:.3f} "
                           f"(gain {g:+.3f} < {MARGIN})")  # fmt: skip
    p = peak.get(("docs", "han-attention"))
    checks["peak"] = p
    if p is None or p < MIN_PEAK:
        share = 0.0 if p is None else p
        reasons.append(
            f"docs: HAN's sentence attention peaks on the key sentence in {share:.1%} of "
            f"documents (< {MIN_PEAK:.0%})"
        )
    md = pools["multidim"] - han
    checks["multidim"] = {"accuracy": pools["multidim"], "scalar": han, "difference": md}
    if md < -MARGIN:
        reasons.append(f"docs: multi-dimensional pooling {pools['multidim']:.3f} below scalar "
                       f"{han:.3f} by {-md:.3f} (> {MARGIN})")  # fmt: skip
    return reasons, checks


def run(cfg: StructureConfig, out: Path, say: Say) -> dict[str, Any]:
    import torch

    torch.set_num_threads(cfg.threads)
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    steps = {"digit-qa": cfg.qa_steps, "docs": cfg.steps}
    say(f"structure experiment: updates per model {steps}, seeds {seeds}; output in {out}/")
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    measured = {}
    for task, measure in measures().items():
        if measure is None:
            say(f"  {task}: not measured (its measure module is not installed)")
            measured[task] = False
            continue
        rows += measure(seeds, steps[task], bool(cfg.tiny), say)
        measured[task] = True
    reasons, checks = verdict(rows)
    return {
        "config": asdict(cfg),
        "rows": rows,
        "mean_accuracy": {f"{t}/{m}": round(a, 4) for (t, m), a in means(rows).items()},
        "budgets": {"updates_per_model": steps, "seeds": seeds},
        "measured": measured,
        "seconds": round(time.perf_counter() - t0, 1),
        "checks": checks,
        "verdict": verdict_text(reasons),
    }


EXPERIMENT = Experiment(
    name="structure",
    help="co-attention, hierarchical and multi-dimensional attention at equal updates "
    "(Lu 2016, Yang 2016, Shen 2018)",
    typical="38 min on a busy 2-core CPU (not timed idle)",
    description="Train each structure on its task (digit-qa: parallel/alternating/no "
    "co-attention; docs: HAN with attention, mean, max and feature-wise pooling, and DiSAN's "
    "directional encoder) for the same number of updates over several seeds; report accuracy, "
    "parameters and seconds per update, and check co-attention > none, HAN > its pooling "
    "variants, sentence attention on the key sentence, multi-dimensional >= scalar pooling. "
    "Writes OUT/structure.{csv,json,png}.",
    config=StructureConfig,
    quick=QUICK,
    run=run,
    report=report_of(__name__),
)

__all__ = ["EXPERIMENT", "MARGIN", "MIN_PEAK", "QUICK", "StructureConfig", "means", "measures",
           "run", "verdict"]  # fmt: skip
