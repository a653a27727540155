"""Issue 32, data loss: `attnkit experiment --out DIR` keeps the run-folder rules of `train`
(§1), the lock is never written through a link (§2), `evaluate --hyps` never overwrites one of
its inputs (§3). Each case is refused with one line, exit 2, and no file changes."""

from __future__ import annotations

import json
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _reliability import TINY, one_line_error, snapshot
from _run_dirs import holding_link, holding_users_file, refused_open

from attnkit import experiments
from attnkit._registry import Lazy
from attnkit.cli import main
from attnkit.experiments.base import REPRODUCED, Experiment, write_json
from attnkit.train.outputs import sha256_of, write_output
from attnkit.train.run_dir import LOCK, MANIFEST, open_experiment

# §1 experiments: open_experiment, the guard of `attnkit experiment NAME --out DIR`


def user_files(out: Path) -> None:
    out.mkdir()
    (out / "notes.txt").write_text("mine")


def a_run(out: Path) -> None:
    """A user's `attnkit train --out DIR/rnnsearch` (the issue's lost run), as files."""
    out.mkdir()
    (out / "rnnsearch" / "best").mkdir(parents=True)
    (out / "rnnsearch" / "best" / "model.safetensors").write_bytes(b"weights")
    (out / "rnnsearch" / "history.json").write_text("[]")


def experiment_output(out: Path, *, hashes: bool = True) -> None:
    """An earlier experiment's output beside a user's file it found there (``kept``), recorded
    with the sha256 of each file; ``hashes=False``: a manifest of an attnkit that recorded
    names only (``"wrote": null`` after a kill), which tells nothing about content."""
    user_files(out)
    (out / "len.json").write_text("{}")
    (out / "rnnsearch").mkdir()
    (out / "rnnsearch" / "history.json").write_text("[]")
    wrote = {n: sha256_of(out / n) for n in ("len.json", "rnnsearch/history.json")}
    manifest = {"experiment": "len", "kept": ["notes.txt"], "wrote": wrote if hashes else None}
    (out / MANIFEST).write_text(json.dumps(manifest))


def earlier(out: Path) -> None:
    experiment_output(out)


def earlier_only(out: Path) -> None:
    """An earlier experiment's output and nothing else."""
    experiment_output(out)
    (out / "notes.txt").unlink()


def names_only(out: Path) -> None:
    experiment_output(out, hashes=False)


def added_later(out: Path) -> None:
    """A file the user put beside an experiment's output after it ended: not attnkit's."""
    earlier(out)
    (out / "mine.txt").write_text("mine")


def edited(out: Path) -> None:
    """An output the user changed after the experiment wrote it: theirs now."""
    earlier(out)
    (out / "len.json").write_text('{"mine": 1}')


named_as_an_output = holding_users_file("len.csv")  # a name the experiment writes
linked_output = holding_link("len.csv")
linked_lock = holding_link(LOCK)


def nothing(out: Path) -> None:
    pass


THEIRS = r"already holds files not written by attnkit \({}\); move them out, or pick another --out"
OUTPUT = r"already holds an earlier experiment's output \({}\); pass --overwrite to replace it"
MINE = ["notes.txt"]
EXPERIMENT_CASES: list[tuple[str, Callable[[Path], None], dict, str | None, list[str]]] = [
    # id, setup, open_experiment kwargs, error (regex) or None, top-level names afterwards
    ("new", nothing, {}, None, []),
    ("empty-out", nothing, {"out": ""}, "--out is empty; name a folder", []),
    ("a-run", a_run, {},
     THEIRS.format("rnnsearch/best/model.safetensors, rnnsearch/history.json"), ["rnnsearch"]),
    ("user-files", user_files, {}, THEIRS.format("notes.txt"), MINE),
    ("earlier-experiment", earlier, {}, THEIRS.format("notes.txt"),
     [*MINE, "len.json", "rnnsearch"]),
    ("earlier-output-only", earlier_only, {}, OUTPUT.format("len.json, rnnsearch"),
     ["len.json", "rnnsearch"]),
    ("overwrite-earlier", earlier, {"overwrite": True}, None, MINE),
    ("overwrite-added-later", added_later, {"overwrite": True}, None, [*MINE, "mine.txt"]),
    ("overwrite-a-run-keeps-it", a_run, {"overwrite": True}, None, ["rnnsearch"]),
    ("overwrite-names-only", names_only, {"overwrite": True},
     r"len\.json is not written by attnkit and the experiment writes that name: move it out",
     []),
    ("overwrite-edited", edited, {"overwrite": True},
     r"len\.json was written by attnkit but has changed since: it is yours now, and "
     "--overwrite never removes it; move it out", []),
    ("overwrite-own-len-csv", named_as_an_output, {"overwrite": True},
     r"len\.csv is not written by attnkit and the experiment writes that name", []),
    ("overwrite-linked-len-csv", linked_output, {"overwrite": True},
     r"len\.csv is a symbolic link; attnkit never writes through one", []),
    ("linked-lock", linked_lock, {}, r"\.attnkit\.lock is a symbolic link; .* remove the link", []),
]  # fmt: skip


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its content (None for a folder, the target for a link)."""

    def content(p: Path) -> bytes | None:
        if p.is_symlink():
            return os.readlink(p).encode()
        return None if p.is_dir() else p.read_bytes()

    return {str(p.relative_to(root)): content(p) for p in root.rglob("*")}


@pytest.mark.parametrize(
    ("setup", "kwargs", "error", "after"),
    [c[1:] for c in EXPERIMENT_CASES],
    ids=[c[0] for c in EXPERIMENT_CASES],
)
def test_open_experiment(tmp_path: Path, setup, kwargs, error, after) -> None:
    out = tmp_path / "out"
    setup(out)
    before = tree(tmp_path)
    kwargs = {"out": out, "name": "len", **kwargs}
    if error is not None:
        refused_open(open_experiment, error, **kwargs)
        assert tree(tmp_path) == before  # a refusal changes nothing at all
        return
    with open_experiment(**kwargs) as path:
        assert path == out and (out / LOCK).read_text() == f"{os.getpid()}\n"
        assert sorted(os.listdir(out)) == sorted([LOCK, MANIFEST, *after])
        write_output(out / "len.csv", "a,b\n")  # what this experiment writes
    assert sorted(os.listdir(out)) == sorted([MANIFEST, *after, "len.csv"])
    now = tree(tmp_path)
    for name in after:  # what it found there is untouched
        kept = {k: v for k, v in before.items() if k.startswith(f"out/{name}")}
        assert kept and {k: now[k] for k in kept} == kept
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest == {"experiment": "len", "kept": sorted(after),
                        "wrote": {"len.csv": sha256_of(out / "len.csv")}, "writing": {},
                        "runs": []}  # fmt: skip


def test_an_experiment_that_fails_midway_leaves_a_folder_overwrite_can_clean(
    tmp_path: Path,
) -> None:
    """Each file is recorded as it is written (test_experiment_folders.py kills a run at every
    step), so an experiment that fails midway leaves what it wrote recorded."""
    user_files(tmp_path / "out")
    with pytest.raises(RuntimeError):
        with open_experiment(tmp_path / "out", "len", overwrite=True) as out:
            assert json.loads((out / MANIFEST).read_text())["wrote"] == {}
            write_output(out / "len.csv", "partial")
            raise RuntimeError("failed")
    assert list(json.loads((out / MANIFEST).read_text())["wrote"]) == ["len.csv"]
    with open_experiment(tmp_path / "out", "len", overwrite=True) as out:
        assert sorted(os.listdir(out)) == sorted([LOCK, MANIFEST, *MINE])


def test_a_second_experiment_on_the_same_folder_fails_at_once(tmp_path: Path) -> None:
    with open_experiment(tmp_path / "out", "len"):
        refused_open(open_experiment, f"in use by attnkit pid {os.getpid()};", tmp_path / "out",
                     "len", overwrite=True)  # fmt: skip


@dataclass
class CoinConfig:
    seed: int = field(default=0, metadata={"help": "unused"})


def run_coin(cfg: CoinConfig, out: Path, say) -> dict:
    return {"verdict": REPRODUCED}


def report_coin(result: dict, out: Path, say) -> list[Path]:
    return [write_json(result, out / "coin.json")]


@pytest.fixture
def coin(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("fake_coin")
    module.EXPERIMENT = Experiment(  # type: ignore[attr-defined]
        "coin", "a coin", "flip a coin", CoinConfig, {}, run_coin, report_coin
    )
    monkeypatch.setitem(sys.modules, "fake_coin", module)
    entry = Lazy("coin", "fake_coin:EXPERIMENT")
    monkeypatch.setitem(experiments.EXPERIMENTS.entries, "coin", entry)


@pytest.mark.parametrize(
    ("setup", "argv", "match"),
    [
        (a_run, ["length", "--quick"], r"out already holds files not written by attnkit \(rnn"),
        (earlier, ["length", "--quick"], r"out already holds files not written by attnkit \(not"),
        (nothing, ["length", "--quick", "--out", ""], "--out is empty; name a folder"),
        (linked_lock, ["length", "--quick"], r"\.attnkit\.lock is a symbolic link"),
    ],
    ids=["a-run", "earlier-experiment", "empty-out", "linked-lock"],
)
def test_experiment_refuses_a_folder_in_use(
    tmp_path: Path, setup, argv, match, capsys, monkeypatch
) -> None:
    """The issue's case: `attnkit experiment length --out runs` beside a user's trained
    `runs/rnnsearch` is refused before any work, and every file stays as it was."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    setup(out)
    before = tree(tmp_path)
    one_line_error(capsys, ["experiment", *argv, *(["--out", str(out)] * ("--out" not in argv))],
                   match)  # fmt: skip
    assert tree(tmp_path) == before


def test_experiment_overwrite_replaces_only_its_own_output(
    coin: None, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "out"
    assert main(["experiment", "coin", "--out", str(out)]) == 0
    (out / "notes.txt").write_text("mine")
    one_line_error(capsys, ["experiment", "coin", "--out", str(out)],
                   r"already holds files not written by attnkit \(notes\.txt\)")
    assert main(["experiment", "coin", "--overwrite", "--out", str(out)]) == 0
    assert sorted(os.listdir(out)) == [MANIFEST, "coin.json", "notes.txt"]
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "manifest",
    ['{"kept": "user", "wrote": null}', '{"kept": ["a"], "wrote": "user notes.txt"}',
     '{"kept": [1], "wrote": null}', '{"kept": {}, "wrote": []}', "not json"],
)  # fmt: skip
def test_a_damaged_manifest_removes_nothing(coin: None, tmp_path: Path, manifest: str) -> None:
    """A manifest attnkit cannot read as lists of names tells it nothing: a string "kept"
    passed ``in`` ("notes.txt" not in "user" is True) and --overwrite deleted the user's
    files as an experiment's."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "user").mkdir()
    (out / MANIFEST).write_text(manifest)
    assert main(["experiment", "coin", "--overwrite", "--out", str(out)]) == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "user").is_dir()


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
