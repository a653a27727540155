"""A bench run compared with a committed baseline (attnkit.bench.baseline, `bench
--baseline`), on hand-made reports: a regression beyond 5% + the measured spread is flagged,
noise within the spread is not, and the CLI re-runs the baseline's own cases."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

import pytest

from attnkit.bench import baseline as bl
from attnkit.cli import main


def kernel_report(times: dict[str, list[float]]) -> dict:
    rows = []
    for name, t in times.items():
        variant, n = name.split("@")
        rows.append({"scenario": "local", "variant": variant, "mode": "fwd", "n": int(n),
                     "ms": sorted(t)[len(t) // 2], "times_ms": t})  # fmt: skip
    rows.append({"scenario": "local", "variant": "naive", "mode": "fwd", "n": 65536,
                 "skipped": "needs 32 GiB"})  # fmt: skip
    return {"environment": {"torch": "2.13.0", "cpu": "X", "cores": 2, "threads": 1},
            "config": {}, "rows": rows}  # fmt: skip


def models_report(attnkit_ms: list[float], ratios: list[float]) -> dict:
    rounds = [{"attnkit": a, "plain": a * r, "ratio": r}
              for a, r in zip(attnkit_ms, ratios, strict=True)]  # fmt: skip
    return {"environment": {"torch": "2.13.0", "cpu": "X", "cores": 2, "threads": 1},
            "models": {"names": ["transformer"], "preset": "tiny", "steps": 1, "warmup": 1,
                       "repeats": len(rounds), "batch_size": 16, "seed": 0, "load": [0, 0, 0],
                       "rows": [{"model": "transformer", "plain": "PlainTransformer",
                                 "rounds": rounds, "attnkit_ms": median(attnkit_ms),
                                 "plain_ms": median(r["plain"] for r in rounds),
                                 "ratio": median(ratios)}]}}  # fmt: skip


def by_name(rows: list[bl.Compared]) -> dict[str, bl.Compared]:
    return {r.name: r for r in rows}


def test_a_regression_is_flagged_and_noise_is_not() -> None:
    base = kernel_report({"attnkit@4096": [10.0, 10.1, 9.9, 10.0, 10.2],
                          "sdpa@4096": [20.0, 20.0, 20.0],
                          "flex@4096": [10.0, 8.0, 12.0, 9.0, 11.0]})  # fmt: skip
    now = kernel_report({"attnkit@4096": [12.0, 12.1, 11.9, 12.0, 12.2],  # 20% slower, tight
                         "sdpa@4096": [20.6, 20.6, 20.6],  # 3% slower: within 5%
                         "flex@4096": [11.0, 8.8, 13.2, 9.9, 12.1]})  # 10%, spread +-10%
    got = by_name(bl.compare(base, now))
    assert set(got) == {"local/attnkit/fwd/n=4096", "local/sdpa/fwd/n=4096",
                        "local/flex/fwd/n=4096"}  # the skipped row is no case
    slow = got["local/attnkit/fwd/n=4096"]
    assert slow.flagged and slow.slower == pytest.approx(0.2)
    assert slow.allowed == pytest.approx(0.05 + 0.1 / 2 / 10.0)  # the larger IQR half-width
    assert not got["local/sdpa/fwd/n=4096"].flagged
    noisy = got["local/flex/fwd/n=4096"]
    assert noisy.slower == pytest.approx(0.1) and not noisy.flagged  # spread (q3-q1)/2/median
    text = bl.format_comparison(list(got.values()))
    assert "SLOWER by 20%" in text and text.count("SLOWER") == 1
    assert text.splitlines()[-1].startswith("1 of 3 cases slower")


def test_a_speed_ratio_is_flagged_when_it_falls() -> None:
    base = models_report([100.0] * 5, [1.25, 1.24, 1.26, 1.25, 1.25])
    fell = models_report([100.0] * 5, [0.95, 0.96, 0.95, 0.97, 0.95])
    got = by_name(bl.compare(base, fell))
    ratio = got["models/transformer vs PlainTransformer"]
    assert ratio.flagged and ratio.slower == pytest.approx(1.25 / 0.95 - 1)
    assert not got["models/transformer"].flagged  # its own ms did not move
    held = by_name(bl.compare(base, models_report([100.0] * 5, [1.22, 1.23, 1.25, 1.21, 1.24])))
    assert not held["models/transformer vs PlainTransformer"].flagged


def test_machines_that_differ_are_named() -> None:
    a, b = models_report([1.0], [1.0]), models_report([1.0], [1.0])
    b["environment"]["threads"] = 2
    assert bl.differences(a, b) == ["threads: baseline 1, now 2"]


def test_the_environment_is_recorded() -> None:
    env = bl.environment()
    assert env["torch"] and env["cpu"] and env["threads"] >= 1
    assert env["commit"] is None or len(env["commit"].removesuffix("+dirty")) == 40


def test_cli_reruns_the_baselines_cases_with_its_settings(tmp_path: Path, monkeypatch, capsys):
    """`bench --baseline` re-runs the models rows the file names with the file's settings,
    writes comparison.txt and exits 1 when a case is slower beyond the tolerance."""
    import attnkit.bench.models as models

    seen = {}

    def fake(**settings):
        seen.update(settings)
        return models_report([100.0] * 3, [1.0, 1.0, 1.0])["models"]

    monkeypatch.setattr(models, "versus_speed", fake)
    path = tmp_path / "bench_models.json"
    path.write_text(json.dumps(models_report([100.0] * 3, [1.3, 1.3, 1.3])))
    out = tmp_path / "now"
    assert main(["bench", "--baseline", str(path), "--out", str(out)]) == 1
    assert seen == {"names": ("transformer",), "preset": "tiny", "steps": 1, "warmup": 1,
                    "repeats": 3, "batch_size": 16, "seed": 0}  # fmt: skip
    text = (out / "comparison.txt").read_text()
    assert "SLOWER by 30%" in text
    assert json.loads((out / "bench_models.json").read_text())["environment"]["threads"] == 1
    path.write_text(json.dumps(models_report([100.0] * 3, [1.0, 1.0, 1.0])))
    assert main(["bench", "--baseline", str(path), "--out", str(out)]) == 0


@pytest.mark.parametrize("content, match", [
    (None, r"no such file"), ("{not json", r"not a JSON file"), ('{"rows": []}', r"no timed case"),
    ("[1, 2]", r"holds a JSON list, not a bench report"),
])  # fmt: skip
def test_a_bad_baseline_is_one_line(tmp_path: Path, capsys, content, match) -> None:
    import re

    path = tmp_path / "b.json"
    if content is not None:
        path.write_text(content)
    assert main(["bench", "--baseline", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and re.search(match, err), err
