"""``attnkit bench --baseline FILE``: FILE says what to re-run, so it is checked like a command
line before any work (its size, then every setting's type and range: one line naming the
key, never a traceback, never hours of the default suite); a file bench wrote itself is
re-run as it is; and the re-run never writes over the baseline it compares with."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from _reliability import one_line_error, snapshot

from attnkit.bench import models, suite
from attnkit.cli import main


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What ``bench --quick --scenarios additive --sizes 64`` writes (two variants, forward
    only: seconds). Its config lists the quick run's variants as the run chose them."""
    out = tmp_path_factory.mktemp("bench") / "b"
    argv = ["bench", "--quick", "--scenarios", "additive", "--sizes", "64", "--modes", "fwd",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    return out / "bench.json"


def test_a_file_bench_wrote_is_re_run(genuine, tmp_path, capsys):
    """A quick run recorded its whole list of variants, most of which (sdpa, sdpa-band,
    sdpa-mask, local-attention) belong to no chosen scenario, and the re-run refused its own
    file as "unknown variant(s)"; the list in an older file is read the same way."""
    capsys.readouterr()
    code = main(["bench", "--baseline", str(genuine), "--out", str(tmp_path / "again")])
    out = capsys.readouterr()
    assert code in (0, 1), out.err  # 1: a case slower than the baseline (a loaded machine)
    assert "case" in out.out and (tmp_path / "again" / "comparison.txt").is_file()
    rerun = json.loads((tmp_path / "again" / "bench.json").read_text())
    assert rerun["config"]["additive_sizes"] == [64] and rerun["config"]["scenarios"] == [
        "additive"
    ]
    assert rerun["config"]["variants"] == ["attnkit", "naive"]
    old = json.loads(genuine.read_text())  # as a quick run wrote it before: every variant
    old["config"]["variants"] = ["attnkit", "sdpa", "sdpa-band", "sdpa-mask", "naive"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert main(["bench", "--baseline", str(tmp_path / "old.json"), "--out",
                 str(tmp_path / "older")]) in (0, 1)  # fmt: skip


def test_the_re_run_never_writes_over_its_baseline(genuine, tmp_path, capsys, monkeypatch):
    """``bench --baseline runs/bench/bench.json`` with the default --out runs/bench."""
    monkeypatch.chdir(tmp_path)
    base = Path("runs/bench/bench.json")
    base.parent.mkdir(parents=True)
    base.write_bytes(genuine.read_bytes())
    before = snapshot(tmp_path)
    one_line_error(
        capsys, ["bench", "--baseline", str(base)],
        r"--baseline runs/bench/bench\.json is the file this re-run writes "
        r"\(--out runs/bench\); it would be overwritten: pass another --out",
    )  # fmt: skip
    link = Path("elsewhere")
    link.mkdir()
    os.link(base, link / "bench.json")  # the same file under another name
    one_line_error(capsys, ["bench", "--baseline", str(base), "--out", "elsewhere"],
                   r"is the file this re-run writes")  # fmt: skip
    assert snapshot(tmp_path)["runs/bench/bench.json"] == before["runs/bench/bench.json"]


def _config(**change: Any) -> Any:
    def make(report: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(report)
        out["config"].update(change)
        return out

    return make


def _without_config(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k != "config"}


MODELS = {
    "names": ["transformer"], "preset": "tiny", "batch_size": 16, "steps": 1, "warmup": 1,
    "repeats": 1, "seed": 0, "load": [0, 0, 0],
    "rows": [{"model": "transformer", "plain": "Plain", "attnkit_ms": 1.0, "plain_ms": 1.0,
              "ratio": 1.0, "rounds": [{"attnkit": 1.0, "plain": 1.0, "ratio": 1.0}]}],
}  # fmt: skip


def _models(**change: Any) -> Any:
    def make(report: dict[str, Any]) -> dict[str, Any]:
        return {"threads": 1, "models": {**MODELS, **change}}

    return make


CASES: dict[str, tuple[Any, str]] = {
    "no config": (_without_config, r"its config, which says what was run, is none"),
    "config a list": (
        lambda r: {**r, "config": [1, 2]},
        r"its config, which says what was run, is a JSON list",
    ),
    "only unknown keys": (
        lambda r: {**r, "config": {"colour": "blue"}},
        r"its config lacks scenarios, global_sizes, .*which decide how long a re-run takes",
    ),
    "repeats 2.5": (_config(repeats=2.5), r"repeats is 2\.5; it must be an integer"),
    "repeats 0": (_config(repeats=0), r"repeats is 0; it must lie between 1 and 100"),
    "repeats 10^9": (_config(repeats=10**9), r"repeats is 1000000000; it must lie between"),
    "warmup 10^9": (_config(warmup=10**9), r"warmup is 1000000000; it must lie between 0 and"),
    "repeats true": (_config(repeats=True), r"repeats is True; it must be an integer"),
    "backward ['yes']": (_config(backward=["yes"]), r"backward is \['yes'\]; it must be a list"),
    "size 0": (_config(local_sizes=[0]), r"local_sizes is 0; it must lie between 1 and"),
    "size -64": (_config(global_sizes=[-64]), r"global_sizes is -64; it must lie between 1"),
    "sizes a number": (_config(local_sizes=64), r"local_sizes is 64; it must be a non-empty"),
    "dim 0": (_config(dim=0), r"dim is 0; it must lie between 1 and 4096"),
    "matmul_size 0": (_config(matmul_size=0), r"matmul_size is 0; it must lie between 16"),
    "matmul_size 10^6": (_config(matmul_size=10**6), r"matmul_size is 1000000; it must lie"),
    "time limit NaN": (_config(time_limit_s="nan"), r"time_limit_s is 'nan'; give a number"),
    "a variant that is none": (
        _config(variants=["warp-drive"]),
        r"unknown variant\(s\) \['warp-drive'\]",
    ),
    "a scenario that is none": (_config(scenarios=["warp"]), r"scenarios \['warp'\]; each is"),
    "models repeats 0": (_models(repeats=0), r"models\.repeats is 0; it must lie between 1"),
    "models steps 10^9": (_models(steps=10**9), r"models\.steps is 1000000000; it must lie"),
    "models batch_size 10^9": (_models(batch_size=10**9), r"models\.batch_size is 1000000000"),
    "models a name that is none": (
        _models(names=["gpt-5"]),
        r"models\.names \['gpt-5'\]; each is one of",
    ),
}


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a refused baseline started a run")


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_baseline_that_cannot_be_re_run_is_one_line(genuine, tmp_path, capsys, monkeypatch, case):
    monkeypatch.setattr(suite, "run_suite", _never)  # a regression fails here, not in hours
    monkeypatch.setattr(models, "versus_speed", _never)
    make, match = CASES[case]
    path = tmp_path / "base.json"
    path.write_text(json.dumps(make(json.loads(genuine.read_text()))))
    one_line_error(capsys, ["bench", "--baseline", str(path), "--out", str(tmp_path / "o")],
                   rf"^attnkit bench: error: --baseline .*base\.json: {match}")  # fmt: skip
    assert not (tmp_path / "o").exists()  # nothing ran


def test_a_baseline_that_is_no_file_or_too_big_is_one_line(tmp_path, capsys):
    """A device or a folder is refused unread (``/dev/zero`` was read until MemoryError; the
    test names /dev/null, which a regression reads to its end at once), a file over the size
    limit before it is read."""
    out = ["--out", str(tmp_path / "o")]
    for path in ("/dev/null", str(tmp_path)):
        one_line_error(capsys, ["bench", "--baseline", path, *out],
                       rf"--baseline {path}: not a regular file")  # fmt: skip
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(17 * 2**20)  # sparse: no disk used
    one_line_error(
        capsys, ["bench", "--baseline", str(big), *out],
        r"big\.json: 17,825,792 bytes, over the 16 MiB a bench report can be",
    )  # fmt: skip
    (tmp_path / "list.json").write_text("[1, 2]")
    one_line_error(capsys, ["bench", "--baseline", str(tmp_path / "list.json"), *out],
                   r"list\.json: holds a JSON list, not a bench report")  # fmt: skip
