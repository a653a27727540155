"""A new experiment is one module defining EXPERIMENT and one registry line: the CLI picks it
up (flags from its config, --quick, the exit code from its verdict) with no other edit."""

import json
import sys
import types
from dataclasses import dataclass, field, fields
from pathlib import Path

import pytest

from attnkit import experiments
from attnkit._registry import Lazy
from attnkit.cli import main
from attnkit.experiments.base import REPRODUCED, Experiment, write_json


@dataclass
class CoinConfig:
    heads: int = field(default=7, metadata={"help": "heads seen"})
    seed: int = field(default=0, metadata={"help": "unused"})
    claim: float = field(default=0.5, metadata={"help": "claimed rate"})


def run_coin(cfg: CoinConfig, out: Path, say) -> dict:
    rate = cfg.heads / 10
    ok = abs(rate - cfg.claim) <= 0.25
    return {"rate": rate, "verdict": REPRODUCED if ok else f"NOT REPRODUCED: rate {rate} is off"}


def report_coin(result: dict, out: Path, say) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    say(f"rate {result['rate']}")
    return [write_json(result, out / "coin.json")]


@pytest.fixture
def coin(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("fake_coin")
    module.EXPERIMENT = Experiment(  # type: ignore[attr-defined]
        "coin", "a coin", "flip a coin", CoinConfig, {"heads": 5}, run_coin, report_coin
    )
    monkeypatch.setitem(sys.modules, "fake_coin", module)
    entry = Lazy("coin", "fake_coin:EXPERIMENT")
    monkeypatch.setitem(experiments.EXPERIMENTS.entries, "coin", entry)


def test_a_registered_experiment_gets_a_command(coin: None, tmp_path: Path, capsys) -> None:
    assert main(["experiment", "coin", "--out", str(tmp_path)]) == 0  # 0.7 is near 0.5
    assert "rate 0.7" in capsys.readouterr().out
    assert main(["experiment", "coin", "--heads", "10", "--overwrite", "--out", str(tmp_path)]) == 1
    quick = ["--quick", "--heads", "1", "--overwrite", "--out", str(tmp_path)]
    assert main(["experiment", "coin", *quick]) == 0
    assert (tmp_path / "coin.json").is_file()


def test_every_registered_experiment_is_well_formed() -> None:
    for name in experiments.EXPERIMENTS:
        exp = experiments.get(name)
        exp.config(**exp.quick)  # the quick settings are a valid config
        assert exp.help and exp.description
        assert "seed" in {f.name for f in fields(exp.config)}, f"{name}: every config has --seed"
    with pytest.raises(ValueError, match="unknown experiment 'nope'; choose one of"):
        experiments.get("nope")


@pytest.mark.parametrize("name", sorted(experiments.EXPERIMENTS))
def test_every_experiment_keeps_the_contract(
    name: str, tmp_path: Path, one_thread: None, capsys
) -> None:
    """`attnkit experiment NAME --quick --seed 1 --out DIR` writes DIR/NAME.{json,csv,png};
    the JSON has a top-level "verdict" string (one of the three outcomes of evidence.py) and
    records the seed it ran with."""
    import json

    out = tmp_path / name
    assert main(["experiment", name, "--quick", "--seed", "1", "--out", str(out)]) == 0
    assert "verdict" in capsys.readouterr().out
    result = json.loads((out / f"{name}.json").read_text())
    v = result["verdict"]
    from attnkit.experiments.evidence import exit_code

    assert exit_code(v) in (0, 1, 2), v  # REPRODUCED, NOT REPRODUCED: ..., INCONCLUSIVE: ...
    assert result["config"]["seed"] == 1
    assert (out / f"{name}.csv").read_text().count("\n") >= 2  # a header and a row
    assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_inconclusive_verdict_exits_2(coin: None, tmp_path: Path, monkeypatch) -> None:
    """The three outcomes reach the shell: 0 REPRODUCED, 1 NOT REPRODUCED, 2 INCONCLUSIVE."""
    def at_ceiling(cfg: CoinConfig, out: Path, say) -> dict:
        return {"rate": 1.0, "verdict": "INCONCLUSIVE: every arm at the ceiling"}

    import dataclasses

    module = sys.modules["fake_coin"]
    inconclusive = dataclasses.replace(module.EXPERIMENT, run=at_ceiling)
    monkeypatch.setattr(module, "EXPERIMENT", inconclusive)
    assert main(["experiment", "coin", "--out", str(tmp_path)]) == 2


@pytest.mark.parametrize("name", sorted(experiments.EXPERIMENTS))
def test_a_count_flag_below_one_names_the_flag(name: str) -> None:
    """Every experiment's counts go through one range check (``_checks.check_ranges``) that
    names the flag a user typed: ``--seeds 0; it must be >= 1``."""
    import dataclasses

    config = experiments.get(name).config
    counts = [f.name for f in dataclasses.fields(config)
              if f.type in (int, "int") and f.name in ("steps", "threads", "jobs", "batch_size",
                                                        "repeats")]  # fmt: skip
    assert counts, f"{name} has none of the usual count flags"
    flag = counts[0]
    with pytest.raises(ValueError, match=rf"^--{flag.replace('_', '-')} 0; it must be >= 1$"):
        config(**{flag: 0})


def test_experiment_of_finds_the_roles_of_a_package_by_name(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:  # fmt: skip
    package = types.ModuleType("fake_pkg")
    package.QUICK = {"heads": 5}  # type: ignore[attr-defined]
    package.run_experiment = run_coin  # type: ignore[attr-defined]
    report = types.ModuleType("fake_pkg.report")
    report.report = report_coin  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_pkg", package)
    monkeypatch.setitem(sys.modules, "fake_pkg.report", report)
    exp = Experiment.of("fake_pkg", name="coin", help="a coin", description="flip",
                        config=CoinConfig)  # fmt: skip
    assert exp.quick == {"heads": 5} and exp.run is run_coin and exp.typical == "unknown"
    result = exp.run(CoinConfig(), tmp_path, print)
    assert exp.report(result, tmp_path, print) == [tmp_path / "coin.json"]  # report.report ran


def test_flags_list_an_experiments_own_fields_before_the_shared_ones() -> None:
    from attnkit.experiments import flags_of
    from attnkit.experiments.base import Pooled
    from attnkit.experiments.pool import LMFlags
    from attnkit.experiments.sparse.config import SparseConfig

    names = [f.name for f in flags_of(SparseConfig)]
    assert sorted(names) == sorted(f.name for f in fields(SparseConfig))  # each once
    # its own first: sparse redefines epochs (its cap) and seeds (5 for a t-interval), which
    # keep their inherited places
    assert names[:4] == ["epochs", "seeds", "train_size", "valid_size"]
    own = set(SparseConfig.__annotations__)
    shared = [f.name for f in fields(LMFlags) if f.name not in {"jobs", "threads", *own}]
    assert names[-len(shared) - 2:] == [*shared, "jobs", "threads"]  # then LMFlags, Pooled
    assert [f.name for f in flags_of(CoinConfig)] == ["heads", "seed", "claim"]  # no mixins
    assert issubclass(SparseConfig, Pooled)


def test_reported_table_lists_each_number_with_its_interval_and_seeds() -> None:
    from attnkit.experiments.base import reported_table

    result = {"reported": [{"name": "gap", "value": 0.123456, "ci": [-0.01, 0.25], "n": 5}]}
    assert reported_table(result).splitlines() == [
        "| reported, not checked | value | 95% interval | seeds |",
        "|---|---|---|---|",
        "| gap | 0.1235 | [-0.01, 0.25] | 5 |",
    ]


def test_a_report_that_fails_after_the_runs_keeps_what_was_measured(
    coin: None, tmp_path: Path, monkeypatch, capsys
) -> None:
    """A report that raises after every run has trained (a table reading an arm the run did
    not train, once) must not lose the measured result: it is kept as JSON beside the
    checkpoints, and the error still ends the command."""
    import dataclasses

    def broken(result: dict, out: Path, say) -> list[Path]:
        return [result["strided"]]  # a key the result does not have

    module = sys.modules["fake_coin"]
    monkeypatch.setattr(module, "EXPERIMENT", dataclasses.replace(module.EXPERIMENT,
                                                                  report=broken))  # fmt: skip
    with pytest.raises(KeyError):
        main(["experiment", "coin", "--out", str(tmp_path)])
    kept = tmp_path / "coin-measured.json"
    assert json.loads(kept.read_text())["rate"] == 0.7
    assert f"the measured result is kept in {kept}" in capsys.readouterr().out


def _pooled_then_broken(cfg: CoinConfig, out: Path, say) -> dict:
    """Three runs through the pool, then checks that raise (a KeyError, as a check reading
    an arm the run did not train once did)."""
    from attnkit.experiments.pool import run_each

    got: list[float] = []
    run_each(float, [1, 2, 3], 1, lambda item, r: got.append(r))
    return {"runs": got}["checks"]


def test_an_experiment_that_fails_after_its_runs_keeps_each_run(
    coin: None, tmp_path: Path, monkeypatch, capsys
) -> None:
    """A failure between the runs and the report (in the checks) must not lose what the runs
    measured: each finished run is a JSON line of DIR/NAME-runs.jsonl, and the command says
    where. A second failure keeps the first journal and writes NAME-runs-2.jsonl."""
    import dataclasses

    module = sys.modules["fake_coin"]
    broken = dataclasses.replace(module.EXPERIMENT, run=_pooled_then_broken)
    monkeypatch.setattr(module, "EXPERIMENT", broken)
    with pytest.raises(KeyError):
        main(["experiment", "coin", "--out", str(tmp_path)])
    kept = tmp_path / "coin-runs.jsonl"
    lines = [json.loads(line) for line in kept.read_text().splitlines()]
    assert lines == [{"item": 1, "result": 1.0}, {"item": 2, "result": 2.0},
                     {"item": 3, "result": 3.0}]  # fmt: skip
    assert f"each is kept in {kept}, one JSON line a run" in capsys.readouterr().out
    with pytest.raises(KeyError):
        main(["experiment", "coin", "--out", str(tmp_path), "--overwrite"])
    assert kept.read_text().count("\n") == 3
    assert (tmp_path / "coin-runs-2.jsonl").read_text().count("\n") == 3


def test_an_experiment_that_ends_well_leaves_no_journal(coin: None, tmp_path: Path) -> None:
    from attnkit.experiments.evidence import journal

    with journal(tmp_path / "x-runs.jsonl") as runs:
        from attnkit.experiments.pool import run_each

        run_each(float, [1], 1, lambda item, r: None)
        assert runs.is_file()
    assert not runs.exists()
    assert main(["experiment", "coin", "--out", str(tmp_path / "ok")]) == 0
    assert not list((tmp_path / "ok").glob("*.jsonl"))
