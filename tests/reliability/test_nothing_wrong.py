"""Issue "Nothing lost, nothing silently wrong", section 3: nothing plausible but wrong.
Each case would once have produced a run or a score that looked fine and was not."""

from __future__ import annotations

import json
import random
from pathlib import Path

from attnkit.cli import main

WORDS = "the a cat dog sees likes small big red blue".split()


def corpus(path: Path, n: int, seed: int, extra: str = "") -> Path:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        src = [rng.choice(WORDS) for _ in range(rng.randint(2, 6))]
        lines.append(f"{extra}{' '.join(src)}\t{' '.join(reversed(src))}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def files_train(tsv: Path, out: Path, *extra: str) -> list[str]:
    return [
        "train", "--train-tsv", str(tsv), "--model", "rnnsearch", "--preset", "tiny",
        "--epochs", "1", "--batch-size", "16", "--no-progress", "--out", str(out), *extra,
    ]  # fmt: skip


def test_resume_keeps_the_checkpoint_vocabulary(tmp_path: Path, capsys) -> None:
    """Resuming on data whose vocabulary differs (new words, other frequencies) trains on the
    checkpoint's vocabulary; the new words are read as <unk>, and the log says so."""
    out = tmp_path / "run"
    assert main(files_train(corpus(tmp_path / "a.tsv", 120, 0), out)) == 0
    before = json.loads((out / "last" / "src_vocab.json").read_text())
    changed = corpus(tmp_path / "b.tsv", 120, 1, extra="zebra zebra quokka ")
    capsys.readouterr()
    assert main(files_train(changed, out, "--resume", "--epochs", "2")) == 0
    err = capsys.readouterr().err
    assert "2 source token(s) of the data are not in the checkpoint's vocabulary" in err
    assert json.loads((out / "last" / "src_vocab.json").read_text()) == before
    assert "zebra" not in before["tokens"]


def test_evaluate_scores_exactly_the_pairs_the_run_held_out(tmp_path: Path, capsys) -> None:
    """The held-out split is a function of the corpus bytes: evaluate needs the same file,
    named on its command line, and refuses one that changed (a shuffled TSV would turn most
    "test" pairs into training pairs)."""
    tsv = corpus(tmp_path / "a.tsv", 120, 0)
    out = tmp_path / "run"
    assert main(files_train(tsv, out)) == 0
    ck = str(out / "best")
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", ck]) == 2
    assert "name the same ones: --train-tsv a.tsv" in capsys.readouterr().err
    assert main(["evaluate", "--checkpoint", ck, "--train-tsv", str(tsv), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 6  # 5% of 120, as held out in training

    lines = tsv.read_text().splitlines()
    random.Random(3).shuffle(lines)
    shuffled = tmp_path / "shuffled.tsv"
    shuffled.write_text("\n".join(lines) + "\n")
    assert main(["evaluate", "--checkpoint", ck, "--train-tsv", str(shuffled)]) == 2
    assert "is not the file this model was trained on" in capsys.readouterr().err


def test_evaluate_never_reads_a_path_stored_in_a_checkpoint(tmp_path: Path, capsys) -> None:
    tsv = corpus(tmp_path / "a.tsv", 120, 0)
    out = tmp_path / "run"
    assert main(files_train(tsv, out)) == 0
    secret = tmp_path / "secret.txt"
    secret.write_text("password\tswordfish\n" * 50)
    cfg = json.loads((out / "best" / "config.json").read_text())
    cfg["meta"]["train_tsv"] = str(secret)  # a tampered checkpoint points elsewhere
    cfg["meta"].pop("sha256")
    (out / "best" / "config.json").write_text(json.dumps(cfg))
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(out / "best"), "--json"]) == 2
    captured = capsys.readouterr()
    assert "name the same ones: --train-tsv secret.txt" in captured.err
    assert "swordfish" not in captured.out + captured.err


def test_evaluate_rejects_meaningless_numbers(trained: Path, capsys) -> None:
    from _reliability import one_line_error

    for argv, match in [
        (["--limit", "-1"], "--limit -1"),
        (["--beam", "0"], "--beam >= 1"),
        (["--split", "tset"], "choose train, valid or test"),
    ]:
        one_line_error(capsys, ["evaluate", "--checkpoint", str(trained), *argv], match)
