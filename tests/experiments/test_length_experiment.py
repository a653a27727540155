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
    assert set(result["checks"]) >= {"drop", "gap_longest", "reproduced", "reasons"}
    assert result["verdict"] == "REPRODUCED" or result["verdict"].startswith("NOT REPRODUCED: ")
    png = (out / "length.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    for m in ("rnnencdec", "rnnsearch"):
        assert (out / m / "last" / "model.safetensors").is_file()
    _scores_match_sacrebleu(out, result)


def _scores_match_sacrebleu(out: Path, result: dict) -> None:
    """Every bin's BLEU and exact match, recomputed here from the saved models' greedy output
    with sacrebleu itself (tokens joined by spaces, tokenize="none")."""
    import sacrebleu

    from attnkit.data.tasks import load_task
    from attnkit.decode import translate
    from attnkit.train import checkpoint

    c = result["config"]
    test = load_task(
        c["task"], seed=c["seed"], train_size=c["steps"] * c["batch_size"],
        valid_size=c["valid_size"], test_size=c["test_size"],
        min_len=c["min_len"], max_len=c["max_len"],
    ).test  # fmt: skip
    for m in ("rnnencdec", "rnnsearch"):
        ck = checkpoint.load(out / m / "last")
        hyps = translate(ck.model, test, ck.src_vocab, ck.tgt_vocab).hyps
        for row in result["by_length"][m]:
            lo, hi = map(int, row["src_len"].split("-"))
            idx = [i for i, e in enumerate(test) if lo <= len(e.src) <= hi]
            h = [" ".join(hyps[i]) for i in idx]
            r = [" ".join(test[i].tgt) for i in idx]
            bleu = sacrebleu.corpus_bleu(h, [r], tokenize="none").score
            exact = 100 * sum(a == b for a, b in zip(h, r, strict=True)) / len(idx)
            assert row["n"] == len(idx)
            assert row["bleu"] == pytest.approx(bleu, abs=0.006), (m, row)
            assert row["exact"] == pytest.approx(exact, abs=0.006), (m, row)


def test_train_argv_is_the_same_run_as_train_config(tmp_path: Path) -> None:
    """The recorded `attnkit train` command describes exactly the run the experiment makes."""
    from attnkit.cli import make_parser
    from attnkit.cli.train import fit_config
    from attnkit.experiments.length import MODELS, train_config

    cfg = LengthConfig(steps=10, batch_size=4, hidden=16)
    for m in MODELS:
        argv = train_argv(cfg, m, tmp_path / m)
        parsed = fit_config(make_parser().parse_args(argv))
        assert parsed.to_json() == train_config(cfg, m, tmp_path / m).to_json()


def test_score_by_length_is_bleu_not_exact_match() -> None:
    """A near-miss hypothesis scores high BLEU but no exact match: the columns must differ."""
    import sacrebleu

    from attnkit.data.example import Example
    from attnkit.experiments.length import score_by_length

    src = list("abcdefgh")
    refs = [Example(src, list("abcdefgh")), Example(src, list("hgfedcba"))]
    hyps = [list("abcdefgx"), list("hgfedcba")]
    (row,) = score_by_length(hyps, refs, [(8, 8)])
    want = sacrebleu.corpus_bleu(
        ["a b c d e f g x", "h g f e d c b a"], [["a b c d e f g h", "h g f e d c b a"]],
        tokenize="none",
    ).score  # fmt: skip
    assert row["bleu"] == pytest.approx(want, abs=0.006) and row["exact"] == 50.0


def test_models_train_side_by_side_in_a_pool(tmp_path: Path, one_thread: None) -> None:
    """--jobs 2: the two fits run in a process pool and give the same models as one by one."""
    import torch
    from safetensors.torch import load_file

    from attnkit.experiments.length import QUICK, train_models

    cfg = LengthConfig(**{**QUICK, "jobs": 2})
    seconds = train_models(cfg, tmp_path / "pool", say=lambda s: None)
    assert set(seconds) == {"rnnencdec", "rnnsearch"}
    train_models(LengthConfig(**QUICK), tmp_path / "serial", say=lambda s: None)
    for m in seconds:
        a = load_file(str(tmp_path / "pool" / m / "last" / "model.safetensors"))
        b = load_file(str(tmp_path / "serial" / m / "last" / "model.safetensors"))
        assert all(torch.equal(a[k], b[k]) for k in a), m
