"""The interleaved one-process comparison: shape of its report on a tiny case, its ratio
lines against hand-made rows, and a clear error for a case that cannot run."""

import pytest
import torch

from attnkit.bench.interleave import _ratios, interleaved, main
from attnkit.bench.variants import Case


def test_tiny_run_reports_every_case() -> None:
    cases = [Case("attnkit", "local", 64, b, radius=4) for b in (False, True)]
    cases.append(Case("attnkit-autograd", "local", 64, True, radius=4))
    out = interleaved(cases, rounds=2, matmul_size=64)
    assert [r["mode"] for r in out["rows"]] == ["fwd", "fwd+bwd", "fwd+bwd"]
    for r in out["rows"]:
        assert len(r["all_ms"]) == 2 and r["ms"] > 0 and r["pct_matmul"] > 0
    assert out["matmul_gflops"] > 0


def test_ratios_by_hand() -> None:
    rows = [
        {"variant": "a", "mode": "fwd", "ms": 10.0},
        {"variant": "b", "mode": "fwd", "ms": 25.0},
        {"variant": "a", "mode": "fwd+bwd", "ms": 40.0},
        {"variant": "b", "mode": "fwd+bwd", "ms": 20.0},
    ]
    assert _ratios(rows) == ["fwd: b / a = 2.50", "fwd+bwd: b / a = 0.50"]


def test_errors() -> None:
    with pytest.raises(ValueError, match="no CPU backward"):
        interleaved([Case("flex", "local", 64, True, radius=4)], rounds=1)
    with pytest.raises(ValueError, match="rounds"):
        interleaved([Case("attnkit", "local", 64, False, radius=4)], rounds=0)


def test_cli_prints_ratios(capsys) -> None:  # type: ignore[no-untyped-def]
    threads = torch.get_num_threads()
    try:
        main(["--n", "48", "--radius", "3", "--variants", "attnkit,naive", "--modes", "fwd",
              "--rounds", "1", "--threads", "1"])  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    assert "fwd: naive / attnkit = " in capsys.readouterr().out
