"""Issue "Nothing lost, nothing silently wrong", sections 3 and 4: a meaningless number or a
damaged input file is one clear line and exit 2, never a traceback, a NaN run that "succeeds",
or a silently disabled option. Each row: the command, what the line must say."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import torch
from _reliability import TINY, one_line_error, snapshot

TRAIN = ["train", *TINY]

CASES: dict[str, tuple[list[str], str]] = {
    # numbers that mean nothing (section 3)
    "train --train-size 0": (
        ["train", "--task", "copy", "--train-size", "0"],
        r"--train-size 0; it must be at least 1",
    ),
    "train --valid-size 0": (["train", "--task", "copy", "--valid-size", "0"], r"--valid-size 0"),
    "train --clip nan": ([*TRAIN, "--clip", "nan"], r"--clip nan; it must be a finite number"),
    "train --lr inf": ([*TRAIN, "--lr", "inf"], r"--lr inf; it must be a finite number"),
    "train --lr 0": ([*TRAIN, "--lr", "0"], r"--lr 0.0; it must be positive"),
    "train --batch-size 0": ([*TRAIN, "--batch-size", "0"], r"--batch-size 0; both must be >= 1"),
    "bench --variants nope": (
        ["bench", "--quick", "--variants", "nope"],
        r"unknown variant\(s\) \['nope'\]",
    ),
    "bench --variants ''": (["bench", "--quick", "--variants", ","], r"unknown variant\(s\) \[\]"),
    "bench --warmup -1": (["bench", "--quick", "--warmup", "-1"], r"--warmup -1: give 0 or more"),
    "bench --memory-limit -2": (
        ["bench", "--quick", "--memory-limit", "-2"],
        r"--memory-limit -2.0: give a positive",
    ),
    "bench --time-limit nan": (["bench", "--quick", "--time-limit", "nan"], r"--time-limit nan"),
    "bench --radius 0": (["bench", "--quick", "--radius", "0"], r"--radius 0 .*a window needs"),
    "bench --repeats 0": (
        ["bench", "--quick", "--repeats", "0"],
        r"--repeats 0: need at least one",
    ),
    # a run that diverges stops with what to do, and saves no NaN model (section 4)
    "train --lr 1e30": (
        [*TRAIN, "--lr", "1e30", "--clip", "0"],
        r"training diverged: .* is nan at update \d+ \(lr 1e\+30\); lower --lr",
    ),
    # one update: its loss is finite, the parameters it leaves are not
    "train --lr 1e30, caught by validation": (
        [*TRAIN, "--lr", "1e30", "--clip", "0", "--train-size", "16", "--save-every", "0"],
        r"training diverged: the validation loss is nan at update 1",
    ),
    "train --lr 1e39": ([*TRAIN, "--lr", "1e39"], r"--lr 1e\+39; it must be positive and within"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_meaningless_option_is_one_line(case: str, tmp_path: Path, capsys) -> None:
    argv, match = CASES[case]
    out = ["--out", str(tmp_path / "out")]
    before = snapshot(tmp_path)
    one_line_error(capsys, [*argv, *out], match)
    if "diverged" in match:  # the run folder exists, but holds no checkpoint of NaNs
        assert not (tmp_path / "out" / "best").exists()
        assert not (tmp_path / "out" / "last").exists()
    else:
        assert snapshot(tmp_path) == before


def damaged_gz(tmp_path: Path, kind: str) -> Path:
    good = gzip.compress(b"a b\tc d\n" * 2000)
    data = {"not gzip": b"plain text\tnot gzip\n", "truncated": good[: len(good) // 2],
            "garbage tail": good + b"\x00junk", "empty": b""}[kind]  # fmt: skip
    path = tmp_path / "corpus.tsv.gz"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("kind", ["not gzip", "truncated", "garbage tail"])
def test_a_damaged_gz_corpus_is_one_line(kind: str, tmp_path: Path, capsys) -> None:
    path = damaged_gz(tmp_path, kind)
    argv = ["train", "--train-tsv", str(path), "--out", str(tmp_path / "out"), "--no-progress"]
    one_line_error(capsys, argv, r"corpus\.tsv\.gz: a damaged gzip file \(.*\); check it with")
    assert not (tmp_path / "out" / "best").exists()


@pytest.mark.parametrize("kind", ["not gzip", "truncated", "garbage tail"])
def test_a_damaged_gz_text_is_one_line(kind: str, tmp_path: Path, capsys) -> None:
    """A language model's ``--train-text`` (read whole, not line by line) too."""
    path = damaged_gz(tmp_path, kind).rename(tmp_path / "book.txt.gz")
    argv = ["train", "--task", "lm", "--model", "transformer-lm", "--train-text", str(path),
            "--out", str(tmp_path / "out"), "--no-progress"]  # fmt: skip
    one_line_error(capsys, argv, r"--train-text .*book\.txt\.gz: a damaged gzip file \(.*\); check")
    assert not (tmp_path / "out" / "best").exists()


def test_control_characters_are_escaped_on_a_terminal() -> None:
    from attnkit._text import printable
    from attnkit.viz.terminal import terminal_heatmap

    assert printable("a\x1b[31mred\x07 b\u202eevil\tok") == "a\\x1b[31mred\\x07 b\\u202eevil\tok"
    assert printable("학생 🙂 naïve") == "학생 🙂 naïve"  # printable text is untouched
    text = terminal_heatmap(torch.eye(2), ["\x1b[2J", "b"], ["\x9bx", "c"])
    assert "\x1b" not in text and "\x9b" not in text and "\\x1b[2J" in text


def test_a_warning_escapes_the_tokens_it_quotes(trained: Path, monkeypatch, capsys) -> None:
    import io

    from attnkit.cli import main

    monkeypatch.setattr("sys.stdin", io.StringIO("3 \x1b]0;pwned\x07 4\n"))
    assert main(["translate", "--checkpoint", str(trained)]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b]0;pwned\\x07" in err


@pytest.mark.parametrize("command", ["view", "translate", "experiment"])
@pytest.mark.parametrize("where", ["/proc", "/proc/version"])  # no such file; not a folder
def test_an_unwritable_output_path_is_one_line(
    command: str, where: str, trained: Path, capsys
) -> None:
    """/proc refuses new files even to root: every command that writes says so in one line."""
    argv = {
        "view": ["view", "--checkpoint", str(trained), "3 4", "--out", f"{where}/attnkit.html"],
        "translate": ["translate", "--checkpoint", str(trained), "3 4", "--save-attention",
                      f"{where}/attnkit.png"],
        "experiment": ["experiment", "length", "--quick", "--out", f"{where}/attnkit-length"],
    }[command]  # fmt: skip
    one_line_error(capsys, argv, where + r"/attnkit")


def test_parameters_that_overflow_are_never_saved(tmp_path: Path, monkeypatch, capsys) -> None:
    """An update whose loss was finite but which leaves an infinite parameter: the save that
    follows refuses, naming the update, and no checkpoint of it exists."""
    from attnkit.train import loop

    real = loop.train_step

    def overflowing(t, b, step):  # type: ignore[no-untyped-def]
        loss = real(t, b, step)
        with torch.no_grad():
            next(t.model.parameters()).fill_(float("inf"))
        return loss

    monkeypatch.setattr(loop, "train_step", overflowing)
    argv = [*TRAIN, "--save-every", "1", "--out", str(tmp_path / "out")]
    one_line_error(capsys, argv, r"training diverged: a parameter became NaN or inf at update 1")
    assert not (tmp_path / "out" / "last").exists() and not (tmp_path / "out" / "best").exists()
