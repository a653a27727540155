"""``attnkit experiment softness``: the scope of its checks (``checks.scoped``): the seed rule,
comparisons at unequal parameters and margins the papers do not set are reported, a task
with no claim left is INCONCLUSIVE, and each task is judged on its own."""

from attnkit.experiments import evidence as ev
from attnkit.experiments.softness.checks import scoped, task_verdicts


def claim(name: str, lo: float, hi: float, n: int = 5) -> ev.Check:
    return ev.on_interval(name, ev.Interval((lo + hi) / 2, lo, hi, n), 0.0)


PARAMS = {"multi30k": {"soft": 209_075, "exact": 209_075, "hard": 209_075,
                       "variational": 283_795},
          "digit-captions": {"mean": 88_271, "soft": 88_271, "hard": 88_271}}  # fmt: skip


def test_a_comparison_at_unequal_parameters_is_reported_not_checked() -> None:
    checks = [claim("multi30k: PPL soft − exact (claim: exact marginal ≤ soft)", 2.7, 5.0),
              claim("multi30k: PPL soft − variational (claim: variational-enumerate ≤ soft)",
                    -6.4, -2.8)]  # fmt: skip
    got = scoped(checks, {"multi30k": 5}, PARAMS)
    variational = next(c for c in got if "variational" in c.name)
    assert variational.kind == "report" and "differ by more than 5%" in variational.reason
    assert task_verdicts(got, ["multi30k"])["multi30k"] == ev.REPRODUCED


def test_too_few_seeds_and_no_claim_left_each_withhold_only_their_task() -> None:
    checks = [claim("multi30k: PPL soft − exact (claim: exact marginal ≤ soft)", 2.7, 5.0),
              claim("digit-captions: exact soft − mean (claim: > 20 points)", 80.0, 84.0),
              claim("digit-captions: exact hard − soft (claim: within ±5 points)", -1.7, 1.2)]
    got = scoped(checks, {"multi30k": 5, "digit-captions": 5}, PARAMS)
    verdicts = task_verdicts(got, ["multi30k", "digit-captions"])
    assert verdicts["multi30k"] == ev.REPRODUCED
    assert verdicts["digit-captions"].startswith(
        "INCONCLUSIVE: digit-captions: claim checks the paper sets: 0")
    assert all(c.kind == "report" for c in got if c.name.startswith("digit-captions: exact"))
    three = task_verdicts(scoped(checks, {"multi30k": 3, "digit-captions": 5}, PARAMS),
                          ["multi30k"])  # fmt: skip
    assert three["multi30k"].startswith("INCONCLUSIVE: multi30k: seeds for a check")
    assert "under-covers" in three["multi30k"]


def test_the_configs_task_rows_are_the_tasks_own() -> None:
    """The config checks --tasks and --rows against config.TASK_ROWS (it cannot import the
    package's TASKS, whose functions take the config): each task there has the rows TASKS
    runs, in the same order."""
    from attnkit.experiments.softness import TASKS
    from attnkit.experiments.softness.config import TASK_ROWS, SoftnessConfig

    assert list(TASKS) == list(TASK_ROWS)
    assert all((t.rows, t.default_rows) == TASK_ROWS[n] for n, t in TASKS.items())
    assert SoftnessConfig(tasks="digit-captions").rows_of("digit-captions") == [
        "mean", "soft", "hard"]  # fmt: skip
