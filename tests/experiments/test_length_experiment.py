"""``attnkit experiment length``: bins, the checks on synthetic numbers (REPRODUCED, NOT
REPRODUCED, INCONCLUSIVE on a ceiling, on a task not learned, on a censored model and on an
interval that straddles zero; the design checks read the compared models only), and a --quick
run that writes the table, CSV, JSON and PNG."""

import csv
import json
import math
from pathlib import Path

import pytest
from _refusals import refused

from attnkit.cli import main
from attnkit.experiments import evidence as ev
from attnkit.experiments.length import LengthConfig, bins, checks_of, train_argv


def test_bins_cover_the_lengths_once() -> None:
    edges = bins(LengthConfig())
    assert edges[0] == (5, 9) and edges[-1] == (45, 50)  # a lone 50 joins the last bin
    covered = [n for lo, hi in edges for n in range(lo, hi + 1)]
    assert covered == list(range(5, 51))
    assert bins(LengthConfig(min_len=3, max_len=3)) == [(3, 3)]


def test_train_argv_differ_only_in_model_and_its_own_width() -> None:
    cfg = LengthConfig(steps=30, epoch_steps=10, batch_size=4, patience=2)
    a, b = train_argv(cfg, "rnnencdec", Path("x")), train_argv(cfg, "rnnsearch", Path("x"))
    assert a[a.index("--train-size") + 1] == "40"  # one epoch = exactly `epoch_steps` updates
    assert a[a.index("--epochs") + 1] == "3" and a[a.index("--patience") + 1] == "2"
    diff = {x for x in a if x not in b} | {x for x in b if x not in a}
    assert diff == {"rnnencdec", "rnnsearch", "--context", "--attn-hidden"}


def seeds(short: dict[str, list[float]], long: dict[str, list[float]]) -> list[dict]:
    """One {model: [shortest bin, longest bin]} table per seed from per-seed BLEU lists."""
    return [
        {m: [{"src_len": "5-9", "bleu": short[m][i]}, {"src_len": "45-50", "bleu": long[m][i]}]
         for m in short}
        for i in range(len(short["rnnsearch"]))
    ]  # fmt: skip


SHORT = {"rnnencdec": [60, 58, 62, 61, 59], "rnnsearch": [95, 96, 94, 95, 97]}
CONVERGED = dict(stops={"rnnencdec": [900] * 5, "rnnsearch": [700] * 5},
                 censored={"rnnencdec": [False] * 5, "rnnsearch": [False] * 5}, cap=3000)


def test_checks_reproduced_with_t_intervals_over_the_seeds() -> None:
    long = {"rnnencdec": [10, 12, 8, 11, 9], "rnnsearch": [95, 96, 94, 95, 97]}
    checks = checks_of(seeds(SHORT, long), **CONVERGED)
    assert ev.verdict_of(checks) == "REPRODUCED"
    contrast = checks[0]
    assert contrast.name == "drop RNNencdec - drop RNNsearch (paired by seed)"
    want = [1 - b / a for a, b in zip(SHORT["rnnencdec"], long["rnnencdec"], strict=True)]
    mean = sum(want) / 5  # RNNsearch's drops are 0: the contrast is RNNencdec's drop
    sd = math.sqrt(sum((x - mean) ** 2 for x in want) / 4)
    half = 2.776445105 * sd / math.sqrt(5)  # t_{4, .975}
    assert contrast.value == pytest.approx(mean)
    assert contrast.ci == pytest.approx((mean - half, mean + half), rel=1e-8)
    assert checks[1].outcome == ev.PASS and "leaves open a drop of up to 0" in checks[1].reason
    assert [c.kind for c in checks] == ["claim", "claim", "design", "design", "design", "design"]


def test_checks_not_reproduced_when_rnnsearch_deteriorates_as_much() -> None:
    long = {"rnnencdec": [30, 29, 31, 30, 30], "rnnsearch": [38, 40, 37, 39, 38]}
    checks = checks_of(seeds(SHORT, long), **CONVERGED)
    verdict = ev.verdict_of(checks)
    assert verdict.startswith("NOT REPRODUCED: drop RNNencdec - drop RNNsearch") and (
        ev.exit_code(verdict) == 1)
    assert "RNNsearch deteriorates with length" in verdict
    assert [c.outcome for c in checks[:2]] == [ev.FAIL] * 2


def test_a_small_drop_shown_fails_no_deterioration_without_any_margin() -> None:
    long = {"rnnencdec": [10, 12, 8, 11, 9], "rnnsearch": [93, 94, 92, 93, 95]}
    checks = checks_of(seeds(SHORT, long), **CONVERGED)
    assert checks[0].outcome == ev.PASS and checks[1].outcome == ev.FAIL
    mixed = {**long, "rnnsearch": [96, 95, 93, 96, 96]}  # drops -0.01 .. +0.01: 0 inside
    assert checks_of(seeds(SHORT, mixed))[1].outcome == ev.PASS


def test_both_models_at_the_ceiling_are_inconclusive_never_not_reproduced() -> None:
    """Every arm within 2 BLEU of 100 on the longest bin: the contrast fails its claim,
    but the ceiling leaves no drop to show: INCONCLUSIVE."""
    top = {"rnnencdec": [99.5, 100, 99, 100, 99.8], "rnnsearch": [100, 100, 99.9, 100, 100]}
    checks = checks_of(seeds(top, top), **CONVERGED)
    assert checks[0].outcome == ev.FAIL and checks[3].outcome == ev.INCONCLUSIVE
    verdict = ev.verdict_of(checks)
    assert verdict.startswith("INCONCLUSIVE: mean BLEU on the longest bin") and (
        "every arm at the ceiling" in verdict and ev.exit_code(verdict) == 2)


def test_a_contrast_interval_that_straddles_zero_is_inconclusive() -> None:
    long = {"rnnencdec": [60, 50, 62, 58, 61], "rnnsearch": [90, 96, 94, 89, 97]}
    checks = checks_of(seeds(SHORT, long), **CONVERGED)
    assert checks[0].outcome == ev.INCONCLUSIVE and checks[0].ci[0] < 0 < checks[0].ci[1]
    assert ev.verdict_of(checks).startswith("INCONCLUSIVE: drop RNNencdec - drop RNNsearch")


def test_design_checks_read_the_compared_models_only_and_each_on_its_own() -> None:
    """An extra model in the tables (one reported beside them, at BLEU 0) judges nothing;
    RNNsearch short of learning makes the verdict INCONCLUSIVE; so does one model whose
    median run reached the cap (censored), whatever the other's."""
    long = {"rnnencdec": [10, 12, 8, 11, 9], "rnnsearch": [95, 96, 94, 95, 97]}
    tables = seeds(SHORT, long)
    for t in tables:
        t["other"] = [{"src_len": "5-9", "bleu": 0.0}, {"src_len": "45-50", "bleu": 0.0}]
    assert ev.verdict_of(checks_of(tables, **CONVERGED)) == "REPRODUCED"
    unlearned = seeds({**SHORT, "rnnsearch": [60] * 5}, {**long, "rnnsearch": [60] * 5})
    v = ev.verdict_of(checks_of(unlearned, **CONVERGED))
    assert v.startswith("INCONCLUSIVE: RNNsearch mean BLEU on the shortest bin: best arm 60")
    cut = {"stops": {"rnnencdec": [3000, 3000, 3000, 800, 900], "rnnsearch": [700] * 5},
           "censored": {"rnnencdec": [True, True, True, False, False],
                        "rnnsearch": [False] * 5}, "cap": 3000}  # fmt: skip
    checks = checks_of(seeds(SHORT, long), **cut)
    v = ev.verdict_of(checks)
    assert v.startswith("INCONCLUSIVE: RNNencdec: cap / median stopping point: cap 3000 / "
                        "median 3000 updates = 1"), v
    assert "3 of 5 runs censored" in v and checks[-1].outcome == ev.PASS


def test_a_model_with_no_bleu_on_the_shortest_bin_gives_no_drop() -> None:
    dead = {"rnnencdec": [0.0] * 3, "rnnsearch": [0.0] * 3}
    checks = checks_of(seeds(dead, dead))
    assert math.isnan(checks[0].value) and checks[0].outcome == ev.INCONCLUSIVE
    assert checks[1].outcome == ev.INCONCLUSIVE
    assert ev.verdict_of(checks).startswith("INCONCLUSIVE: RNNsearch mean BLEU")


test_bad_settings_fail_clearly = refused(LengthConfig, [
    ({"task": "dates"}, "copy, reverse or sort"),
    ({"steps": 0}, "--steps"),
    ({"seeds": 0}, "--seeds"),
    ({"seeds": 1}, "an interval over seeds needs 2"),
    ({"steps": 3000, "epoch_steps": 70}, "not a multiple of --epoch-steps"),
])


def test_default_settings() -> None:
    cfg = LengthConfig()
    assert (cfg.steps, cfg.epoch_steps, cfg.patience, cfg.seeds, cfg.epochs) == (
        8000, 100, 3, 8, 80)


def test_quick_run_writes_table_csv_json_png(tmp_path: Path, one_thread: None, capsys) -> None:
    out = tmp_path / "len"
    assert main(["experiment", "length", "--quick", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    head = ("| source length | n | RNNencdec BLEU (seed range) | RNNsearch BLEU (seed range) "
            "| RNNencdec exact % |")
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
        "rnnencdec_bleu_min",
        "rnnencdec_bleu_max",
        "rnnsearch_bleu_min",
        "rnnsearch_bleu_max",
        "rnnencdec_exact",
        "rnnsearch_exact",
    }
    assert sum(int(r["n"]) for r in rows) == 46  # the --quick test set, every length 5-50
    result = json.loads((out / "length.json").read_text())
    assert result["config"]["steps"] == 4 and set(result["by_length"]) == {
        "rnnencdec",
        "rnnsearch",
    }
    assert result["seeds"] == [0, 1]  # --quick: two training seeds, one data set
    cmd = result["train_commands"]["rnnsearch-s1"]
    assert cmd.startswith("attnkit train --task copy --task-seed 0 ") and " --seed 1 " in cmd
    assert [c["name"] for c in result["checks"]][:1] == [
        "drop RNNencdec - drop RNNsearch (paired by seed)"]
    assert set(result["updates"]) == {"rnnencdec", "rnnsearch"} and result["cap_updates"] == 4
    assert "updates until early stopping" in text
    assert {"name", "value", "ci", "threshold", "outcome", "kind"} <= set(result["checks"][0])
    assert ev.exit_code(result["verdict"]) in (0, 1, 2)
    assert "| check | kind | value | 95% interval | threshold | outcome |" in text
    png = (out / "length.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    for m in ("rnnencdec", "rnnsearch"):
        for s in (0, 1):
            assert (out / f"{m}-s{s}" / "last" / "model.safetensors").is_file()
    _scores_match_sacrebleu(out, result)
    first = result["by_seed"]["0"]["rnnsearch"][0]["bleu"]
    second = result["by_seed"]["1"]["rnnsearch"][0]["bleu"]
    assert result["by_length"]["rnnsearch"][0]["bleu"] == pytest.approx((first + second) / 2,
                                                                        abs=0.006)  # fmt: skip


def _scores_match_sacrebleu(out: Path, result: dict) -> None:
    """Every seed's and bin's BLEU and exact match, recomputed here from the saved models'
    greedy output with sacrebleu itself (tokens joined by spaces, tokenize="none")."""
    import sacrebleu

    from attnkit.data.tasks import load_task
    from attnkit.decode import translate
    from attnkit.train import checkpoint

    c = result["config"]
    test = load_task(
        c["task"], seed=c["seed"], train_size=c["epoch_steps"] * c["batch_size"],
        valid_size=c["valid_size"], test_size=c["test_size"],
        min_len=c["min_len"], max_len=c["max_len"],
    ).test  # fmt: skip
    for seed, m in [(s, m) for s in result["seeds"] for m in ("rnnencdec", "rnnsearch")]:
        ck = checkpoint.load(out / f"{m}-s{seed}" / "best")
        hyps = translate(ck.model, test, ck.src_vocab, ck.tgt_vocab).hyps
        for row in result["by_seed"][str(seed)][m]:
            lo, hi = map(int, row["src_len"].split("-"))
            idx = [i for i, e in enumerate(test) if lo <= len(e.src) <= hi]
            h = [" ".join(hyps[i]) for i in idx]
            r = [" ".join(test[i].tgt) for i in idx]
            bleu = sacrebleu.corpus_bleu(h, [r], tokenize="none").score
            exact = 100 * sum(a == b for a, b in zip(h, r, strict=True)) / len(idx)
            assert row["n"] == len(idx)
            assert row["bleu"] == pytest.approx(bleu, abs=0.006), (m, row)
            assert row["exact"] == pytest.approx(exact, abs=0.006), (m, row)


def test_train_argv_is_the_same_run_as_fit_config(tmp_path: Path) -> None:
    """The recorded `attnkit train` command describes exactly the run the experiment makes;
    a training seed changes the initialisation seed only, never the data's."""
    from attnkit.cli import make_parser
    from attnkit.cli.train import fit_config as parsed_fit_config
    from attnkit.experiments.length import MODELS, fit_config

    cfg = LengthConfig(steps=10, epoch_steps=5, batch_size=4, hidden=16, seed=3)
    for m in MODELS:
        for seed in (None, 5):
            argv = train_argv(cfg, m, tmp_path / m, seed)
            parsed = parsed_fit_config(make_parser().parse_args(argv))
            assert parsed.to_json() == fit_config(cfg, m, tmp_path / m, seed).to_json()
    a, b = fit_config(cfg, "rnnsearch", tmp_path), fit_config(cfg, "rnnsearch", tmp_path, 5)
    assert (a.train.seed, b.train.seed) == (3, 5) and a.data == b.data


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
    assert set(seconds) == {"rnnencdec-s0", "rnnsearch-s0", "rnnencdec-s1", "rnnsearch-s1"}
    train_models(LengthConfig(**QUICK), tmp_path / "serial", say=lambda s: None)
    for m in seconds:
        a = load_file(str(tmp_path / "pool" / m / "last" / "model.safetensors"))
        b = load_file(str(tmp_path / "serial" / m / "last" / "model.safetensors"))
        assert all(torch.equal(a[k], b[k]) for k in a), m
