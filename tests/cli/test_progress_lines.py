"""Issue "First use and everyday use", section 4: long work says where it is. With stderr not a
terminal (pytest captures it, as a log file or CI would), training, translating and scoring
files print progress lines (count, rate, ETA), experiments number their runs, and the help
says what stops training; the quick demo says its numbers mean nothing."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from attnkit.cli import main

TINY = [
    "--task", "copy", "--train-size", "64", "--valid-size", "8", "--test-size", "8",
    "--model", "rnnsearch", "--emb", "8", "--enc-hidden", "8", "--dec-hidden", "8",
    "--maxout", "8", "--attn-hidden", "8", "--epochs", "1", "--batch-size", "16",
]  # fmt: skip

LINE = re.compile(r"^epoch 1/1: (\d+)/4 updates  loss \d+\.\d{3}  [\d.]+ updates/s  ETA \d+s$")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A tiny run trained with a progress line every 2 updates; its folder and stderr."""
    import contextlib

    out = tmp_path_factory.mktemp("progress") / "run"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["train", *TINY, "--report-every", "2", "--out", str(out)]) == 0
    return out, err.getvalue()


def test_train_prints_a_line_every_n_updates_in_a_log(run: tuple[Path, str]) -> None:
    lines = [m for line in run[1].splitlines() if (m := LINE.match(line))]
    assert [m.group(1) for m in lines] == ["2", "4"], run[1]


def test_no_progress_means_no_lines(tmp_path: Path, capsys) -> None:
    argv = ["train", *TINY, "--report-every", "1", "--no-progress", "--out", str(tmp_path / "r")]
    assert main(argv) == 0
    assert "updates/s" not in capsys.readouterr().err


def test_translate_from_a_file_says_lines_done_and_eta(
    run: tuple[Path, str], tmp_path: Path, monkeypatch, capsys
) -> None:
    src = tmp_path / "src.txt"
    src.write_text("3 4 5\n" * 25, encoding="utf-8")
    with open(src, encoding="utf-8") as stdin:
        monkeypatch.setattr("sys.stdin", stdin)
        assert main(["translate", "--checkpoint", str(run[0]), "--batch-size", "1"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 25
    counts = re.findall(r"^translating: (\d+)/25 lines  [\d.]+ lines/s  ETA \d+s$", err, re.M)
    assert counts == ["10", "20"], err


def test_evaluate_on_files_says_lines_done(run: tuple[Path, str], tmp_path: Path, capsys) -> None:
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("3 4 5\n" * 25, encoding="utf-8")
    ref.write_text("3 4 5\n" * 25, encoding="utf-8")
    argv = ["evaluate", "--checkpoint", str(run[0]), "--src", str(src), "--ref", str(ref),
            "--batch-size", "2"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert re.findall(r"^translating: (\d+)/25 lines", err, re.M) == ["20"], err


def test_experiment_runs_are_numbered(capsys) -> None:
    from attnkit.experiments.base import Tally

    said: list[str] = []
    tally = Tally(3, said.append)
    tally.starting("a")
    tally("a done")
    tally("b and c done", runs=2)
    assert [re.sub(r"\[\s*\d+s\]", "[t]", s) for s in said] == [
        "  [t] a (1/3) ...", "  [t] a done (1/3)", "  [t] b and c done (3/3)",
    ]  # fmt: skip


def test_train_help_says_what_stops_training(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for said in ("--patience epochs in a row", "--target-exact", "--time-limit", "Ctrl-C",
                 "--report-every"):  # fmt: skip
        assert said in text, said


def test_quick_demo_says_first_that_it_is_a_smoke_run(tmp_path: Path, one_thread, capsys) -> None:
    assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "smoke run" in first and "mean nothing" in first, first
