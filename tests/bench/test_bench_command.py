"""``attnkit bench --quick`` runs end to end: a table, JSON with every planned case (measured
or skipped with a reason), PNG plots; the skip rule and the FLOP count are right."""

import json
from pathlib import Path

import pytest

from attnkit.bench.suite import SuiteConfig, skip_reason
from attnkit.bench.variants import Case
from attnkit.cli import main
from attnkit.cli.bench import QUICK_NOTE


def test_quick_run_writes_table_json_and_plots(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert (
        main(
            [
                "bench",
                "--quick",
                "--sizes",
                "128",
                "--variants",
                "attnkit,sdpa,sdpa-band",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "GFLOP/s" in text and "targets:" in text
    assert text.splitlines()[0] == QUICK_NOTE  # first, the numbers of a smoke run mean nothing
    report = json.loads((tmp_path / "bench.json").read_text())
    rows = report["rows"]
    measured = [r for r in rows if "ms" in r]
    assert {(r["scenario"], r["variant"]) for r in measured} >= {
        ("global", "attnkit"),
        ("global", "sdpa"),
        ("local", "attnkit"),
        ("local", "sdpa-band"),
    }
    assert all(r["ms"] > 0 and r["gflops"] > 0 for r in measured)
    assert all("skipped" in r for r in rows if "ms" not in r)
    assert report["matmul_gflops"]["before"] > 0
    assert "| target |" in (tmp_path / "bench.md").read_text()
    for scenario in ("global", "local"):
        assert (tmp_path / f"bench_{scenario}.png").stat().st_size > 1000


def test_flops_count_only_the_window() -> None:
    local = Case("attnkit", "local", 1024, False, radius=256)
    assert local.flops == 4 * 1024 * 513 * 64 * 8
    assert Case("sdpa", "global", 1024, False).flops == 4 * 1024 * 1024 * 64 * 8
    assert Case("attnkit", "causal", 1024, True, radius=512).flops == 3 * 4 * 1024 * 513 * 64 * 8


def test_skip_rule_extrapolates_and_says_why() -> None:
    cfg = SuiteConfig()
    prev = {"n": 8192, "ms": 9000.0, "peak_mib": 10.0}
    why = skip_reason(Case("sdpa", "global", 16384, False), prev, cfg)
    assert why is not None and "est. 36 s" in why
    assert skip_reason(Case("naive", "global", 65536, False), None, cfg) is not None
    assert "backward" in str(skip_reason(Case("flex", "local", 1024, True), None, cfg))
    assert skip_reason(Case("attnkit", "local", 16384, False), prev | {"ms": 100.0}, cfg) is None


def test_bad_sizes_are_a_clean_error(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["bench", "--sizes", "12,abc"]) == 2
    assert "comma-separated" in capsys.readouterr().err


@pytest.mark.parametrize("modes", ["bwd", ""])
def test_bad_modes(modes: str) -> None:
    assert main(["bench", "--quick", "--modes", modes]) == 2


def test_heads_flag_reaches_every_case_and_its_flops(tmp_path: Path) -> None:
    """``--heads 2``: every planned case runs with two heads, and its FLOPs are a quarter of
    the eight-head count (the idle-machine run measures n = 2048, 4096 with one head)."""
    args = ["bench", "--quick", "--sizes", "128", "--scenarios", "additive", "--heads", "2"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    assert report["config"]["heads"] == 2
    assert report["rows"] and all(r["heads"] == 2 for r in report["rows"])
    two = Case("attnkit", "additive", 128, False, heads=2)
    eight = Case("attnkit", "additive", 128, False, heads=8)
    assert two.flops * 4 == eight.flops
    with pytest.raises(ValueError, match="--heads 0"):
        SuiteConfig(heads=0)
