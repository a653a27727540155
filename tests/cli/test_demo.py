"""``attnkit demo``, the README's main job, on a small budget: what it prints and writes in
summary.json is recomputed here from the checkpoint it saved, with sacrebleu itself."""

import json
from pathlib import Path

import pytest

from attnkit.cli import main


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, one_thread_module: None) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["demo", "--out", str(out), "--epochs", "1", "--no-progress"])
    assert code == 0
    return out, buf.getvalue()


def test_summary_matches_an_independent_scoring(demo: tuple[Path, str]) -> None:
    import sacrebleu

    from attnkit.data.tasks import load_task
    from attnkit.decode import translate
    from attnkit.train import checkpoint

    out, text = demo
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    best = checkpoint.load(out / "model" / "best")
    test = load_task("toy-ko", seed=0).test
    hyps = [" ".join(h) for h in translate(best.model, test, best.src_vocab, best.tgt_vocab).hyps]
    refs = [" ".join(e.tgt) for e in test]
    exact = sum(h == r for h, r in zip(hyps, refs, strict=True)) / len(refs)
    bleu = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none").score
    chrf = sacrebleu.corpus_chrf(hyps, [refs]).score
    assert summary["test_sentences"] == len(test) == 500
    assert summary["exact_match"] == pytest.approx(exact)
    assert summary["bleu"] == pytest.approx(bleu)
    assert summary["chrf"] == pytest.approx(chrf)
    assert 0 <= summary["attention_aer"] <= 1
    assert summary["epochs"] == 1 and summary["stopped"] == "epochs"
    assert summary["parameters"] == sum(p.numel() for p in best.model.parameters())
    assert f"held-out exact match  {100 * exact:.1f}%  (500 sentences)" in text
    assert f"held-out BLEU         {bleu:.1f}   chrF {chrf:.1f}" in text
    assert f"attention AER         {100 * summary['attention_aer']:.1f}%" in text


def test_it_writes_heatmaps_and_a_checkpoint_translate_can_use(demo: tuple[Path, str]) -> None:
    out, text = demo
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    assert summary["heatmaps"] == [str(out / "attention-1.png"), str(out / "attention-2.png")]
    for png in summary["heatmaps"]:
        assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "I am a student" in text and "epoch 1: train loss" in text
    assert main(["translate", "--checkpoint", str(out / "model"), "I am a student"]) == 0


def test_a_second_demo_replaces_the_first(tmp_path: Path, one_thread: None) -> None:
    """The demo owns its folder: running it again is not an error."""
    args = ["demo", "--out", str(tmp_path), "--epochs", "1", "--no-progress", "--time-limit", "1"]
    assert main(args) == 0
    assert main(args) == 0
    assert json.loads((tmp_path / "summary.json").read_text())["stopped"] == "time limit"


def test_quick_demo_is_a_seconds_long_smoke_run(tmp_path: Path, one_thread: None) -> None:
    import contextlib
    import io
    import time

    buf = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(buf):
        assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    assert time.perf_counter() - t0 < 60
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["epochs"] == 1 and summary["test_sentences"] == 50
    assert "1000 train / 50 valid / 50 held-out" in buf.getvalue()
