"""``attnkit experiment length``: bins, the verdict computed from the numbers, and a --quick run
that writes the table, CSV, JSON and PNG."""

import csv
import json
import math
from pathlib import Path

import pytest

from attnkit.cli import main
from attnkit.experiments.length import LengthConfig, bins, train_argv, verdict


def test_bins_cover_the_lengths_once() -> None:
    edges = bins(LengthConfig())
    assert edges[0] == (5, 9) and edges[-1] == (45, 50)  # a lone 50 joins the last bin
    covered = [n for lo, hi in edges for n in range(lo, hi + 1)]
    assert covered == list(range(5, 51))
    assert bins(LengthConfig(min_len=3, max_len=3)) == [(3, 3)]


def test_train_argv_differ_only_in_model_and_its_own_width() -> None:
    cfg = LengthConfig(steps=10, batch_size=4)
    a, b = train_argv(cfg, "rnnencdec", Path("x")), train_argv(cfg, "rnnsearch", Path("x"))
    assert a[a.index("--train-size") + 1] == "40"  # one epoch = exactly `steps` updates
    assert a[a.index("--epochs") + 1] == "1"
    diff = {x for x in a if x not in b} | {x for x in b if x not in a}
    assert diff == {"rnnencdec", "rnnsearch", "--context", "--attn-hidden"}


def table(short: dict[str, float], long: dict[str, float]) -> dict:
    return {
        m: [{"src_len": "5-9", "bleu": short[m]}, {"src_len": "45-50", "bleu": long[m]}]
        for m in short
    }


def test_verdict_reproduced_and_not() -> None:
    ok = verdict(table({"rnnencdec": 60, "rnnsearch": 95}, {"rnnencdec": 10, "rnnsearch": 90}))
    assert ok.reproduced and ok.reasons == []
    assert ok.drop["rnnencdec"] == pytest.approx(1 - 10 / 60)
    assert ok.gap_longest == pytest.approx(80)

    flat = verdict(table({"rnnencdec": 60, "rnnsearch": 95}, {"rnnencdec": 55, "rnnsearch": 50}))
    assert not flat.reproduced
    assert any("RNNsearch dropped" in r for r in flat.reasons)
    assert any("RNNencdec dropped only" in r for r in flat.reasons)

    dead = verdict(table({"rnnencdec": 0, "rnnsearch": 0}, {"rnnencdec": 0, "rnnsearch": 0}))
    assert not dead.reproduced and math.isnan(dead.drop["rnnsearch"])
    assert any("not learnt" in r for r in dead.reasons)


def test_bad_settings_fail_clearly() -> None:
    with pytest.raises(ValueError, match="copy, reverse or sort"):
        LengthConfig(task="dates")
    with pytest.raises(ValueError, match="--steps"):
        LengthConfig(steps=0)


def test_quick_run_writes_table_csv_json_png(tmp_path: Path, one_thread: None, capsys) -> None:
    out = tmp_path / "len"
    assert main(["experiment", "length", "--quick", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    head = "| source length | n | RNNencdec BLEU | RNNsearch BLEU | RNNencdec exact % |"
    assert head in text
    assert "| 5-9 |" in text and "| 45-50 |" in text
    assert "verdict: " in text

    with open(out / "length.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["src_len"] for r in rows] == [f"{lo}-{hi}" for lo, hi in bins(LengthConfig())]
    assert set(rows[0]) == {
        "src_len",
        "n",
        "rnnencdec_bleu",
        "rnnsearch_bleu",
        "rnnencdec_exact",
        "rnnsearch_exact",
    }
    assert sum(int(r["n"]) for r in rows) == 46  # the --quick test set, every length 5-50
    result = json.loads((out / "length.json").read_text())
    assert result["config"]["steps"] == 4 and set(result["by_length"]) == {
        "rnnencdec",
        "rnnsearch",
    }
    assert result["train_commands"]["rnnsearch"].startswith("attnkit train --task copy")
    assert set(result["verdict"]) >= {"drop", "gap_longest", "reproduced", "reasons"}
    png = (out / "length.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    for m in ("rnnencdec", "rnnsearch"):
        assert (out / m / "last" / "model.safetensors").is_file()
