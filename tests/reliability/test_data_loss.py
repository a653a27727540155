"""Issue 32, data loss: `attnkit experiment --out DIR` keeps the run-folder rules of `train`
(§1), the lock is never written through a link (§2), `evaluate --hyps` never overwrites one of
its inputs (§3). Each case is refused with one line, exit 2, and no file changes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from _reliability import TINY, one_line_error, snapshot

from attnkit.cli import main
from attnkit.train.run_dir import LOCK

# §2 the lock is never written through a link


def symlinked(lock: Path, precious: Path) -> None:
    lock.symlink_to(precious)


def hard_linked(lock: Path, precious: Path) -> None:
    os.link(precious, lock)


@pytest.mark.parametrize(
    ("link", "match"),
    [
        (symlinked, r"run/\.attnkit\.lock is a symbolic link; attnkit never writes through one"),
        (hard_linked, r"run/\.attnkit\.lock is not a lock file of attnkit's \(a hard link"),
    ],
    ids=["symlink", "hard-link"],
)
def test_the_lock_is_never_written_through_a_link(tmp_path: Path, link, match, capsys) -> None:
    """`ln -s $PWD/precious.txt runs/x/.attnkit.lock; attnkit train --out runs/x` truncated
    precious.txt and wrote a pid into it; now the run is refused and the target stays."""
    precious = tmp_path / "precious.txt"
    precious.write_text("precious")
    (tmp_path / "run").mkdir()
    link(tmp_path / "run" / LOCK, precious)
    before = snapshot(tmp_path)
    one_line_error(capsys, ["train", *TINY, "--out", str(tmp_path / "run")], match)
    assert precious.read_text() == "precious"
    assert snapshot(tmp_path) == before
    assert sorted(os.listdir(tmp_path / "run")) == [LOCK]


# §3 evaluate never writes over one of its inputs


def evaluate_inputs(where: Path) -> dict[str, Path]:
    where.mkdir(exist_ok=True)
    files = {n: where / f"{n}.txt" for n in ("src", "ref", "ref2")}
    for path in files.values():
        path.write_text("3 4\n5 6\n")
    (where / "link.txt").symlink_to(files["ref"])
    return files


HYPS_CASES = [
    # id, --hyps (relative to the inputs' folder, or "CK/..." in the checkpoint), error
    ("the-reference", "ref.txt", r"--hyps .*ref.txt is the same file as --ref .*ref.txt;"),
    ("the-source", "src.txt", r"--hyps .*src.txt is the same file as --src .*src.txt;"),
    ("a-second-reference", "ref2.txt", r"is the same file as --ref .*ref2.txt; .*pick another"),
    ("a-link-to-the-reference", "link.txt", r"--hyps .*link.txt is the same file as --ref"),
    ("a-file-of-the-checkpoint", "CK/best/config.json", r"is inside --checkpoint .*; writing"),
]


@pytest.mark.parametrize(("hyps", "match"), [c[1:] for c in HYPS_CASES],
                         ids=[c[0] for c in HYPS_CASES])  # fmt: skip
def test_evaluate_never_writes_over_an_input(
    copy_of: Callable[[], Path], tmp_path: Path, hyps: str, match: str, capsys
) -> None:
    """`evaluate --src src.txt --ref ref.txt --hyps ref.txt` overwrote the reference, exit 0."""
    run = copy_of()
    files = evaluate_inputs(tmp_path / "files")
    hyps_path = run / hyps[3:] if hyps.startswith("CK/") else tmp_path / "files" / hyps
    before = snapshot(tmp_path)
    refs = ["--ref", str(files["ref"]), "--ref", str(files["ref2"])]
    argv = ["evaluate", "--checkpoint", str(run), "--src", str(files["src"]), *refs,
            "--hyps", str(hyps_path)]  # fmt: skip
    one_line_error(capsys, argv, match)
    assert snapshot(tmp_path) == before


def test_evaluate_writes_hyps_beside_its_inputs(trained: Path, tmp_path: Path) -> None:
    """The check refuses only the inputs: a new file, or one that is not an input, is written."""
    files = evaluate_inputs(tmp_path)
    (tmp_path / "old-hyps.txt").write_text("old")
    for hyps in ("new-hyps.txt", "old-hyps.txt"):
        argv = ["evaluate", "--checkpoint", str(trained), "--src", str(files["src"]),
                "--ref", str(files["ref"]), "--hyps", str(tmp_path / hyps)]  # fmt: skip
        assert main(argv) == 0
        assert (tmp_path / hyps).read_text().count("\n") == 2
    assert files["ref"].read_text() == "3 4\n5 6\n"
