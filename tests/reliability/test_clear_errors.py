"""Issue "Nothing lost, nothing silently wrong", sections 10 to 12: tokens and labels printed
to a terminal are escaped; a bad file or value on the surfaces added later (documents and
series CSV, evaluate, view, bench, experiments) is one line and exit 2, never a traceback or
misleading advice. Each row: how to make the case, what the one line must say."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from _reliability import TINY, one_line_error, snapshot

from attnkit.cli import main

BIG = "100000000000000000000"  # 1e20 as an integer: past every C integer type
HUGE_FIELD = "x" * 140_000  # over csv.field_size_limit(), 131,072 characters


def docs_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("label", "text"), *rows])
    return path


def huge_docs(tmp: Path, trained: Path) -> list[str]:
    rows = [("pos", "good film.")] * 30 + [("neg", HUGE_FIELD)]
    return ["train", "--task", "docs", "--model", "han", "--docs-csv",
            str(docs_csv(tmp / "docs.csv", rows)), "--out", str(tmp / "out")]  # fmt: skip


def huge_series(tmp: Path, trained: Path) -> list[str]:
    path = tmp / "series.csv"
    path.write_text("t,y\n" + "".join(f"{i},{i % 7}\n" for i in range(100)) + f"1,{HUGE_FIELD}\n")
    return ["experiment", "series", "--quick", "--csv", str(path), "--period", "7",
            "--out", str(tmp / "out")]  # fmt: skip


def bogus_tokeniser(tmp: Path, trained: Path) -> list[str]:
    (tmp / "src.txt").write_text("3 4\n5 6\n")
    (tmp / "ref.txt").write_text("3 4\n5 6\n")
    return ["evaluate", "--checkpoint", str(trained), "--src", str(tmp / "src.txt"),
            "--ref", str(tmp / "ref.txt"), "--tokenize", "bogus"]  # fmt: skip


def not_safetensors(tmp: Path, trained: Path) -> list[str]:
    (tmp / "attn.safetensors").write_text("hello, not safetensors\n")
    return ["view", "--weights", str(tmp / "attn.safetensors"), "--tgt-tokens", "a b"]


def one_dim_weights(tmp: Path, trained: Path) -> list[str]:
    from safetensors.torch import save_file

    save_file({"weights": torch.rand(5)}, str(tmp / "w.safetensors"))  # (5,): no (Tq, Tk)
    return ["view", "--weights", str(tmp / "w.safetensors"), "--tgt-tokens", "a b"]


def decode_weights(make: Callable[[Path], str]) -> Callable[[Path, Path], list[str]]:
    def setup(tmp: Path, trained: Path) -> list[str]:
        return ["bench", "--quick", "--scenarios", "decode", "--decode-weights", make(tmp),
                "--out", str(tmp / "out")]  # fmt: skip

    return setup


def written(tmp: Path, name: str, data: bytes | object) -> str:
    path = tmp / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        torch.save(data, path)
    return str(path)


def resumed_with(preset: list[str]) -> Callable[[Path, Path], list[str]]:
    """A run trained with --preset tiny, resumed with ``preset`` (the default: small)."""

    def setup(tmp: Path, trained: Path) -> list[str]:
        base = ["train", "--task", "copy", "--train-size", "48", "--valid-size", "8",
                "--test-size", "8", "--model", "rnnsearch", "--epochs", "1", "--batch-size",
                "16", "--no-progress", "--out", str(tmp / "run")]  # fmt: skip
        assert main([*base, "--preset", "tiny"]) == 0
        return [*base, *preset, "--epochs", "2", "--resume"]

    return setup


CASES: dict[str, tuple[Callable[[Path, Path], list[str]], str]] = {
    # section 11: tracebacks
    "train --docs-csv, a field over the csv limit": (
        huge_docs,
        r"docs\.csv: row 32: a field over 131,072 characters, .*shorten or split that row",
    ),
    "experiment series --csv, a field over the csv limit": (
        huge_series,
        r"series\.csv: row 102: a field over 131,072 characters",
    ),
    "evaluate --tokenize bogus": (
        bogus_tokeniser,
        r"--tokenize 'bogus': sacreBLEU has no such tokeniser; choose one of .*13a",
    ),
    "view --weights, not a safetensors file": (
        not_safetensors,
        r"attn\.safetensors is not a readable safetensors file \(.*\); pass a file written by",
    ),
    "view --weights, a 1-D tensor": (
        one_dim_weights,
        r"w\.safetensors: tensor 'weights' has shape \(5,\); attention weights are \(Tq, Tk\)",
    ),
    "train --emb 1000000000000": (
        lambda tmp, trained: ["train", "--task", "copy", "--emb", "1000000000000",
                              "--out", str(tmp / "out")],  # fmt: skip
        r"rnnsearch with these widths has [\d,]+ parameters: training needs about [\d,.]+ GiB "
        r".*more than the [\d,.]+ GiB of cpu; pass smaller widths",
    ),
    "bench --decode-weights, not a torch file": (
        decode_weights(lambda tmp: written(tmp, "junk.pt", b"junk\n")),
        r"--decode-weights .*junk\.pt is not a file of torch\.save .*delete it to train",
    ),
    "bench --decode-weights, another model's state_dict": (
        decode_weights(lambda tmp: written(tmp, "other.pt", {"a": torch.zeros(2)})),
        r"other\.pt does not hold the bench's small Transformer \(.*Missing key",
    ),
    "bench --decode-weights, a tensor, not a state_dict": (
        decode_weights(lambda tmp: written(tmp, "tensor.pt", torch.zeros(2))),
        r"tensor\.pt does not hold the bench's small Transformer \(Expected state_dict",
    ),
    "bench --decode-weights, a folder": (
        decode_weights(lambda tmp: str(tmp)),
        r"--decode-weights .* is a folder; name a file",
    ),
    "bench --decode-weights, in no folder": (
        decode_weights(lambda tmp: str(tmp / "no" / "w.pt")),
        r"--decode-weights .*w\.pt: no folder .*no; create it",
    ),
    "bench --decode-weights, unwritable": (
        decode_weights(lambda tmp: "/proc/attnkit-w.pt"),
        r"--decode-weights /proc/attnkit-w\.pt: cannot write it",
    ),
    "bench --decode-weights without the decode scenario": (
        lambda tmp, trained: ["bench", "--quick", "--decode-weights", str(tmp / "w.pt")],
        r"--decode-weights goes with --scenarios decode",
    ),
    # section 12: misleading
    "train --seed 1e20": (
        lambda tmp, trained: ["train", *TINY, "--seed", BIG, "--out", str(tmp / "out")],
        rf"--seed {BIG}: a seed is an integer from 0 to 4294967295",
    ),
    "train --task-seed 1e20": (
        lambda tmp, trained: ["train", *TINY, "--task-seed", BIG, "--out", str(tmp / "out")],
        rf"--task-seed {BIG}: a seed is an integer from 0 to 4294967295",
    ),
    "train --threads 1e20": (
        lambda tmp, trained: ["train", *TINY, "--threads", BIG, "--out", str(tmp / "out")],
        rf"--threads {BIG}: out of range; it must lie between -9223372036854775808 and",
    ),
    "experiment --seed 1e20": (
        lambda tmp, trained: ["experiment", "length", "--quick", "--seed", BIG,
                              "--out", str(tmp / "out")],  # fmt: skip
        rf"--seed {BIG}: a seed is an integer from 0 to 4294967295",
    ),
    "train --resume with another --preset": (
        resumed_with(["--preset", "base"]),
        r"the run in .*run was trained with preset tiny; this command says base: "
        r"pass --preset tiny to resume it",
    ),
    "train --resume without the run's --preset": (
        resumed_with([]),
        r"the run in .*run was trained with preset tiny; this command says small",
    ),
    "train --resume with another width": (
        resumed_with(["--preset", "tiny", "--emb", "20"]),
        r"trained with other model options: emb 16 \(this command: 20\)",
    ),
    "train --resume with another --model": (
        resumed_with(["--model", "luong"]),
        r"trained with --model rnnsearch; this command says luong: pass --model rnnsearch",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_file_or_value_is_one_line(
    case: str, trained: Path, tmp_path: Path, capsys
) -> None:
    setup, match = CASES[case]
    argv = setup(tmp_path, trained)
    before = snapshot(tmp_path)
    one_line_error(capsys, argv, match)
    after = snapshot(tmp_path)
    after.pop(os.path.join("run", ".attnkit.lock"), None)  # the lock of the refused resume
    before.pop(os.path.join("run", ".attnkit.lock"), None)
    assert {k: v for k, v in after.items() if not k.startswith("out")} == before
    assert not any(k.startswith("out") and not k.endswith(".attnkit.lock") for k in after)


def on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Standard output (capsys's, in the test body) says it is a terminal."""
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)


def view_translating_to(text: str, trained: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``attnkit view`` on the checkpoint ``trained`` with a target tokeniser whose every
    decoded translation is ``text`` (data may hold any characters); it must succeed."""
    from attnkit.data import source

    real = source.tokenisers_for

    class Evil:
        def decode(self, hyp: list[str]) -> str:
            return text

    monkeypatch.setattr(source, "tokenisers_for", lambda meta: (real(meta)[0], Evil()))
    assert main(["view", "--checkpoint", str(trained), "3 4"]) == 0


def test_view_escapes_the_translation_on_a_terminal(trained: Path, monkeypatch, capsys) -> None:
    """The "translation:" line holds target tokens, which come from data: on a terminal their
    control characters are escaped, as translate does."""
    on_a_terminal(monkeypatch)
    view_translating_to("a\x1b]0;pwned\x07 b\u202ec", trained, monkeypatch)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "translation: a\\x1b]0;pwned\\x07 b\\u202ec" in out


def test_view_prints_the_translation_as_is_to_a_file(trained: Path, monkeypatch, capsys) -> None:
    view_translating_to("a\x1b[31mb", trained, monkeypatch)
    assert "translation: a\x1b[31mb" in capsys.readouterr().out


def test_han_labels_and_words_from_docs_csv_are_escaped_on_a_terminal(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    rows = [("\x1b[31mpos" if i % 2 else "neg\x07", "good \x1b]0;x\x07 film. bad \u202eplot!")
            for i in range(20)]  # fmt: skip
    path = docs_csv(tmp_path / "docs.csv", rows)
    run = tmp_path / "han"
    argv = ["train", "--task", "docs", "--docs-csv", str(path), "--model", "han", "--preset",
            "tiny", "--epochs", "1", "--batch-size", "8", "--no-progress", "--out", str(run)]
    assert main(argv) == 0
    capsys.readouterr()
    on_a_terminal(monkeypatch)
    assert main(["view", "--checkpoint", str(run), "--example", "0", "--docs-csv", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b[31mpos" in out or "neg\\x07" in out  # the label in the title line
    assert "\\x1b(" in out and "\\x07(" in out  # the words, with their weights


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_an_experiment_with_jobs_is_one_line(tmp_path: Path) -> None:
    """A terminal sends SIGINT to the whole process group: the pool's workers (still starting,
    or training) print nothing; the command says "interrupted" and exits 130."""
    argv = [sys.executable, "-m", "attnkit", "experiment", "distance", "--quick", "--jobs", "2",
            "--out", str(tmp_path / "out")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    # a terminal's foreground job: SIGINT at its default (a suite started in the background
    # by a non-interactive shell inherits it ignored, and so would the command)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env,
                            preexec_fn=_default_sigint)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while len(_children(proc.pid)) < 2 and proc.poll() is None:  # the workers started
            assert time.monotonic() < deadline, "the pool never started"
            time.sleep(0.05)
        time.sleep(1.0)  # the workers are importing torch or training
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1:] == ["interrupted"], err
