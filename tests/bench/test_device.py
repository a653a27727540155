"""``attnkit bench --device cuda``: the plumbing that can be checked without a GPU. The cases
carry their device, a CUDA step waits for the device before the timer reads it, a machine
without CUDA gets a clear error (the suite) or a skip reason (a case), and the sliding
window's band mask is built where the inputs are (a copy to the GPU per call waited for it:
tests/test_cuda_syncs.py checks that on a GPU)."""

import pytest
import torch

from attnkit.bench.suite import SuiteConfig, plan_cases
from attnkit.bench.variants import Case, available, synchronised
from attnkit.cli import main
from attnkit.local.tiles import Geometry


def test_cases_carry_the_suite_device() -> None:
    cfg = SuiteConfig(scenarios=["local"], variants=["attnkit"], local_sizes=[64])
    assert {c.device for c in plan_cases(cfg)} == {"cpu"}
    cfg.device = "cuda"  # planning only: nothing runs
    assert {c.device for c in plan_cases(cfg)} == {"cuda"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_without_cuda_the_suite_says_so_and_a_case_is_skipped(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="no CUDA device"):
        SuiteConfig(device="cuda")
    assert available(Case("attnkit", "local", 64, False, device="cuda")) == "no CUDA device here"
    with pytest.raises(SystemExit):
        main(["bench", "--device", "tpu"])
    assert "invalid choice" in capsys.readouterr().err


def test_the_model_scenarios_refuse_a_device(capsys) -> None:  # type: ignore[no-untyped-def]
    """train, decode, models run on the CPU: --device cuda there is an error, not ignored."""
    assert main(["bench", "--device", "cuda", "--scenarios", "models", "--quick"]) != 0
    assert "the whole-model scenarios (train, decode, models) run on the CPU" in (
        capsys.readouterr().err
    )


def test_flex_backward_is_skipped_on_the_cpu_only() -> None:
    assert available(Case("flex", "local", 64, True)) == "no CPU backward (pytorch#148752)"
    if torch.cuda.is_available():
        assert available(Case("flex", "local", 64, True, device="cuda")) is None


def test_a_cuda_step_synchronises_after_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("sync"))
    step = lambda: calls.append("step")  # noqa: E731
    assert synchronised(step, "cpu") is step
    synchronised(step, "cuda")()
    assert calls == ["step", "sync"]


def test_the_band_mask_is_built_on_the_inputs_device() -> None:
    geo = Geometry(100, 100, 8, False, 16, torch.device("meta"))
    assert geo.band.device.type == "meta" and geo.band.shape == (16, 16 + 2 * 8)
