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
