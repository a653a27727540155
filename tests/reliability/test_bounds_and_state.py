"""Issue 32, sections 6 to 9: nothing silently wrong (a checkpoint of NaN weights, ``--resume``
on a folder with no run) and bounded work (a huge ``--max-len``, a 20,000-word sentence for
``view``, ``bench`` sizes whose inputs alone would take tens of GB)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from _reliability import TINY, one_line_error, snapshot
from safetensors.torch import load_file, save_file

import attnkit
from attnkit.cli import main

# ---- section 6: a weight that is NaN or inf is one line naming it, for every command loading it


def poison(value: float) -> Callable[[Path], str]:
    """Set one entry of the first tensor of ``ck/model.safetensors`` to ``value``; its name."""

    def apply(ck: Path) -> str:
        tensors = load_file(str(ck / "model.safetensors"))
        key = sorted(tensors)[0]
        tensors[key].view(-1)[0] = value
        save_file(tensors, str(ck / "model.safetensors"))
        return key

    return apply


POISONS = {"NaN": poison(float("nan")), "inf": poison(float("inf")), "-inf": poison(-float("inf"))}


def loading(command: str, ck: Path, tmp_path: Path) -> list[str]:
    return {
        "translate": ["translate", "--checkpoint", str(ck)],
        "evaluate": ["evaluate", "--checkpoint", str(ck), "--limit", "2"],
        "view": ["view", "--checkpoint", str(ck), "s3 s4", "--out", str(tmp_path / "v.html")],
    }[command]


@pytest.mark.parametrize("value", sorted(POISONS))
@pytest.mark.parametrize("command", ["translate", "evaluate", "view"])
def test_a_checkpoint_with_non_finite_weights_is_one_line(
    value: str, command: str, copy_of: Callable[[], Path], capsys, monkeypatch, tmp_path: Path
) -> None:
    """Once: translate printed an empty line per input with exit 0."""
    run = copy_of()
    key = POISONS[value](run / "best")
    before = snapshot(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("s3 s4\n"))
    bad = "NaN" if value == "NaN" else "inf"
    match = rf"model\.safetensors: {re.escape(key)} holds {bad} values; .*use an earlier checkpoint"
    one_line_error(capsys, loading(command, run / "best", tmp_path), match)
    assert snapshot(tmp_path) == before  # nothing written, nothing changed


@pytest.mark.parametrize("folder", ["absent", "empty", "holding other files"])
def test_resume_on_a_folder_with_no_run_says_it_starts_a_new_one(
    folder: str, tmp_path: Path, capsys
) -> None:
    """A restart script passes --resume every time, its first run included: the run starts, and
    one warning line names the folder (a mistyped --out is seen there)."""
    out = tmp_path / "run"
    if folder != "absent":
        out.mkdir()
    if folder == "holding other files":
        (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["train", *TINY, "--out", str(out), "--resume"]) == 0
    err = capsys.readouterr().err
    warning = f"warning: --resume: no run in {out} to resume; starting a new run"
    assert err.splitlines().count(warning) == 1, err
    assert (out / "best").is_dir() and (out / "last").is_dir()
    if folder == "holding other files":
        assert (out / "notes.txt").read_text() == "mine"


def test_resume_on_a_run_does_not_warn(copy_of: Callable[[], Path], capsys) -> None:
    run = copy_of()
    capsys.readouterr()
    assert main(["train", *TINY, "--out", str(run), "--resume", "--epochs", "2"]) == 0
    assert "no run in" not in capsys.readouterr().err


# ---- section 7: an absurd --max-len is refused at once, before any folder is made


def attnkit_in_subprocess(argv: list[str], cwd: Path, timeout: float) -> tuple[int, str, float]:
    """The real command in a fresh process, killed after ``timeout`` s (a hang fails the test
    instead of stalling the suite): exit code, stderr, seconds."""
    src = str(Path(attnkit.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "attnkit", *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    return proc.returncode, proc.stderr, time.monotonic() - start


MAX_LEN = {
    "train": ["train", "--task", "copy", "--preset", "tiny", "--epochs", "1", "--no-progress",
              "--max-len", "100000", "--out", "run"],
    "train, reverse": ["train", "--task", "reverse", "--preset", "tiny", "--min-len", "2000",
                       "--max-len", "2000", "--out", "run"],
    "experiment length --quick": ["experiment", "length", "--quick", "--max-len", "100000",
                                  "--out", "run"],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(MAX_LEN))
def test_an_absurd_max_len_is_refused_in_seconds(case: str, tmp_path: Path) -> None:
    """Once: 600 s and 6.5 GB counting the possible sequences with huge integers."""
    argv = MAX_LEN[case]
    code, err, seconds = attnkit_in_subprocess(argv, tmp_path, timeout=120)
    assert code == 2 and "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith(f"attnkit {argv[0]}: error:")]
    assert len(errors) == 1, err
    assert re.search(r"--max-len \d+: generated copy/reverse/sort sequences go up to 1000 tokens"
                     r".*pass --max-len 1000 or less", errors[0]), errors[0]  # fmt: skip
    assert seconds < 60, f"{seconds:.0f} s"
    assert list(tmp_path.iterdir()) == []  # refused before any folder was made


def test_the_count_of_possible_sequences_stops_at_the_size_asked() -> None:
    """At the largest --max-len, 10**3 + ... + 10**1000 is never summed: milliseconds."""
    from attnkit.data.synthetic import MAX_LEN as LONGEST
    from attnkit.data.synthetic import generate

    start = time.monotonic()
    assert len(generate("copy", 3, 0, min_len=LONGEST - 1, max_len=LONGEST)) == 3
    assert time.monotonic() - start < 5
    with pytest.raises(ValueError, match="only 8 distinct sequences of length 3..3 over 2"):
        generate("copy", 9, 0, min_len=3, max_len=3, symbols=2)


# ---- section 8: view --checkpoint bounds its sentence as translate does

WORDS_20K = " ".join(["s3", "s4", "s5", "s6"] * 5000)
VIEW = {
    "20,000 words, default limit": (
        [WORDS_20K],
        r"the sentence has 20,000 tokens, over --max-input-len 1000: split it, raise "
        r"--max-input-len, or pass --truncate",
    ),
    "over a given limit": (["s3 s4 s5", "--max-input-len", "2"], r"3 tokens, over .* 2: split"),
    "--max-input-len 0": (["s3", "--max-input-len", "0"], r"--max-input-len 0: .*at least 1"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(VIEW))
def test_view_refuses_a_sentence_over_max_input_len(
    case: str, trained: Path, tmp_path: Path, capsys
) -> None:
    """Once: 4 minutes, 5.8 GB and an allocation traceback for 20,000 words."""
    extra, match = VIEW[case]
    before = snapshot(tmp_path)
    start = time.monotonic()
    argv = ["view", "--checkpoint", str(trained), *extra, "--out", str(tmp_path / "v.html")]
    one_line_error(capsys, argv, match)
    assert time.monotonic() - start < 30
    assert snapshot(tmp_path) == before


def test_view_truncates_when_asked(trained: Path, tmp_path: Path, capsys) -> None:
    page = tmp_path / "v.html"
    argv = ["view", "--checkpoint", str(trained), WORDS_20K, "--max-input-len", "10",
            "--truncate", "--out", str(page)]  # fmt: skip
    assert main(argv) == 0
    assert "warning: the sentence was cut to 10 of 20,000 tokens" in capsys.readouterr().err
    assert page.is_file()


# ---- section 9: bench counts the inputs against --memory-limit and skips what cannot fit


def test_bench_skips_sizes_whose_inputs_exceed_the_memory_limit(tmp_path: Path, capsys) -> None:
    """Once: --sizes 10000000 allocated a 20.5 GB input (and was OOM-killed at 22 GB), since
    the limit counted only the n x n tensors of the dense variants."""
    start = time.monotonic()
    argv = ["bench", "--quick", "--sizes", "10000000", "--out", str(tmp_path / "b")]
    assert main(argv) == 0
    assert time.monotonic() - start < 60
    out = capsys.readouterr().out
    # q, k, v and the output: 4 x (1, 8, 10**7, 64) float32 = 76 GiB, over the default 8 GiB
    assert re.search(r"global +fwd +10000000 attnkit .*skipped: needs > 76 GiB", out), out
    assert re.search(r"local +fwd\+bwd +10000000 attnkit .*skipped: needs > 153 GiB", out), out
    rows = json.loads((tmp_path / "b" / "bench.json").read_text())["rows"]
    assert rows and all("ms" not in r and r["skipped"] for r in rows)


def test_bench_still_measures_what_fits(tmp_path: Path, capsys) -> None:
    argv = ["bench", "--quick", "--sizes", "256", "--scenarios", "local", "--modes", "fwd",
            "--variants", "attnkit", "--out", str(tmp_path / "b")]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads((tmp_path / "b" / "bench.json").read_text())["rows"]
    assert [r.get("skipped") for r in rows] == [None] and rows[0]["ms"] > 0
