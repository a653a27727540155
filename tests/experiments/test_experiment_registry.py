"""A new experiment is one module defining EXPERIMENT and one registry line: the CLI picks it
up (flags from its config, --quick, the exit code from its verdict) with no other edit."""

import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from attnkit import experiments
from attnkit.cli import main
from attnkit.experiments.base import Experiment, write_json


@dataclass
class CoinConfig:
    heads: int = field(default=7, metadata={"help": "heads seen"})
    claim: float = field(default=0.5, metadata={"help": "claimed rate"})


def run_coin(cfg: CoinConfig, out: Path, say) -> dict:
    rate = cfg.heads / 10
    ok = abs(rate - cfg.claim) <= 0.25
    return {"rate": rate, "verdict": {"reproduced": ok, "reasons": [] if ok else ["off"]}}


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
    monkeypatch.setitem(experiments.EXPERIMENTS, "coin", "fake_coin")


def test_a_registered_experiment_gets_a_command(coin: None, tmp_path: Path, capsys) -> None:
    assert main(["experiment", "coin", "--out", str(tmp_path)]) == 0  # 0.7 is near 0.5
    assert "rate 0.7" in capsys.readouterr().out
    assert main(["experiment", "coin", "--heads", "10", "--out", str(tmp_path)]) == 1
    assert main(["experiment", "coin", "--quick", "--heads", "1", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "coin.json").is_file()


def test_every_registered_experiment_is_well_formed() -> None:
    for name in experiments.EXPERIMENTS:
        exp = experiments.get(name)
        exp.config(**exp.quick)  # the quick settings are a valid config
        assert exp.help and exp.description
    with pytest.raises(ValueError, match="unknown experiment 'nope'; choose one of"):
        experiments.get("nope")
