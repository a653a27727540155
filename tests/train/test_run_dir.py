"""``open_run``: an existing run is continued only with resume, replaced only with overwrite
(removing only what attnkit wrote), refused otherwise in one line; one run per folder at a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from _run_dirs import refused_open

from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.train import checkpoint
from attnkit.train.run_dir import LOCK, RunDirError, open_run

pytestmark = pytest.mark.usefixtures("one_thread_module")

torch.manual_seed(0)
MODEL = build_model("rnnencdec", src_vocab=9, tgt_vocab=8, preset="tiny")
VOCAB = Vocab.build([["a"]])


def save(path: Path, resumable: bool) -> None:
    opt = torch.optim.Adam(MODEL.parameters()) if resumable else None
    checkpoint.save(path, MODEL, "rnnencdec", VOCAB, VOCAB, optimizer=opt, train_state={})


# What the folder holds before open_run; "run" is the run folder, the rest of tmp_path is
# "outside" (a sibling file, and the parent of the run).
def nothing(run: Path) -> None:
    pass


def user_files(run: Path) -> None:
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    (run / "data").mkdir()
    (run / "data" / "train.tsv").write_text("a\tb\n")


def full_run(run: Path) -> None:
    user_files(run)
    save(run / "best", resumable=False)
    save(run / "last", resumable=True)
    (run / "history.json").write_text("[]")


def interrupted(run: Path) -> None:
    """Killed between the two renames of ``last``: only ``.last.old`` holds the checkpoint."""
    full_run(run)
    (run / "last").rename(run / ".last.old")
    (run / ".last.tmp-999999999").mkdir()


def only_best(run: Path) -> None:
    """Killed after the first ``best`` was saved and before the first ``last``."""
    user_files(run)
    save(run / "best", resumable=False)


def dead_temporary(run: Path) -> None:
    """Killed while writing the very first checkpoint."""
    user_files(run)
    (run / ".best.tmp-999999999").mkdir()
    (run / ".best.tmp-999999999" / "config.json").write_text("{")


def notes_in_best(run: Path) -> None:
    full_run(run)
    (run / "best" / "notes.txt").write_text("mine too")


def a_file(run: Path) -> None:
    run.write_text("not a folder")


USER = ["data/", "data/train.tsv", "notes.txt"]
RUN = [*USER, "best/", "history.json", "last/"]
ALREADY = r"already holds a run \({}\); pass --resume to continue it or --overwrite to replace it"
CASES: list[tuple[str, Callable[[Path], None], dict, str | None, str | None, list[str]]] = [
    # id, setup, open_run kwargs, error (regex) or None, resume_from, run folder afterwards
    ("empty-out", nothing, {"out": ""}, "--out is empty; name a folder", None, []),
    ("none-out", nothing, {"out": None}, "--out is empty", None, []),
    ("both-flags", full_run, {"resume": True, "overwrite": True}, "contradict", None, RUN),
    ("a-file", a_file, {}, r"run is a file, not a folder; pick another --out", None, []),
    (
        "under-a-file",
        a_file,
        {"out": "run/sub"},
        r"cannot create --out .*run/sub: .*run is a file",
        None,
        [],
    ),
    ("new", nothing, {}, None, None, []),
    ("new-beside-user-files", user_files, {}, None, None, USER),
    ("run-no-flag", full_run, {}, ALREADY.format("best/, history.json, last/"), None, RUN),
    (
        "temporary-no-flag",
        dead_temporary,
        {},
        ALREADY.format(r"\.best\.tmp-999999999/"),
        None,
        [*USER, ".best.tmp-999999999/"],
    ),
    ("resume", full_run, {"resume": True}, None, "last", RUN),
    ("resume-nothing", user_files, {"resume": True}, None, None, USER),
    (
        "resume-interrupted",
        interrupted,
        {"resume": True},
        None,
        ".last.old",
        [*USER, ".last.old/", "best/", "history.json"],
    ),
    ("resume-dead-temporary", dead_temporary, {"resume": True}, None, None, USER),
    (
        "resume-nothing-resumable",
        only_best,
        {"resume": True},
        r"holds a run but no resumable checkpoint .*; pass --overwrite to start it again",
        None,
        [*USER, "best/"],
    ),
    ("overwrite", full_run, {"overwrite": True}, None, None, USER),
    ("overwrite-interrupted", interrupted, {"overwrite": True}, None, None, USER),
    (
        "overwrite-notes-in-best",
        notes_in_best,
        {"overwrite": True},
        r"run/best holds files attnkit did not write \(notes.txt\); move them out of it first",
        None,
        [*RUN, "best/notes.txt"],
    ),
    (
        "resume-notes-in-best",
        notes_in_best,
        {"resume": True},
        "attnkit did not write",
        None,
        [*RUN, "best/notes.txt"],
    ),
]


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its content (None for a folder)."""
    return {
        str(p.relative_to(root)) + ("/" if p.is_dir() else ""): (
            None if p.is_dir() else p.read_bytes()
        )
        for p in root.rglob("*")
    }


def listing(run: Path) -> list[str]:
    """The run folder, without the files of checkpoint folders (user files in them stay)."""
    own = {*checkpoint.FILES, *checkpoint.TRAINING_FILES}
    return sorted(k for k in tree(run) if not (k.count("/") == 1 and k.split("/")[1] in own))


@pytest.mark.parametrize(
    ("setup", "kwargs", "error", "resume_from", "after"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_open_run(tmp_path, setup, kwargs, error, resume_from, after) -> None:
    (tmp_path / "outside.txt").write_text("outside")
    run = tmp_path / "run"
    setup(run)
    before = tree(tmp_path)
    kwargs = {"out": run, **kwargs}
    if isinstance(kwargs["out"], str) and kwargs["out"].startswith("run"):
        kwargs["out"] = tmp_path / kwargs["out"]
    if error is not None:
        refused_open(open_run, error, **kwargs)
        assert tree(tmp_path) == before  # a refusal changes nothing at all
        return
    with open_run(**kwargs) as rd:
        assert rd.path == run and (run / LOCK).read_text() == f"{os.getpid()}\n"
        assert rd.resume_from == (None if resume_from is None else run / resume_from)
        if rd.resume_from is not None:  # what --resume will load is a whole checkpoint
            model = build_model("rnnencdec", src_vocab=9, tgt_vocab=8, preset="tiny")
            checkpoint.load_training(rd.resume_from, model, torch.optim.Adam(model.parameters()))
    assert listing(run) == sorted(after)
    for name, content in before.items():  # user files are untouched wherever they are
        if name == "outside.txt" or name.startswith(("run/notes", "run/data")):
            assert tree(tmp_path)[name] == content


def test_a_second_run_in_the_same_folder_fails_at_once(tmp_path) -> None:
    with open_run(tmp_path / "run"):
        with pytest.raises(RunDirError, match=f"run is in use by attnkit pid {os.getpid()};"):
            with open_run(tmp_path / "run", overwrite=True):
                pytest.fail("opened twice")
        assert (tmp_path / "run" / LOCK).is_file()
    assert sorted(os.listdir(tmp_path / "run")) == []  # the lock is gone with its holder
    with pytest.raises(KeyError), open_run(tmp_path / "run"):
        raise KeyError("a crash inside the run")
    with open_run(tmp_path / "run") as rd:  # released by the crash too
        assert rd.resume_from is None


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_the_lock_of_a_killed_holder_is_released(tmp_path) -> None:
    run = tmp_path / "run"
    code = (
        "import sys, time\nfrom attnkit.train.run_dir import open_run\n"
        f"with open_run({str(run)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        with pytest.raises(RunDirError, match=f"in use by attnkit pid {proc.pid}"):
            with open_run(run, resume=True):
                pytest.fail("opened while held")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert (run / LOCK).read_text() == f"{proc.pid}\n"  # left behind by the killed holder
    with open_run(run) as rd:
        assert rd.resume_from is None
    assert not (run / LOCK).exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write anywhere")
def test_a_folder_it_cannot_write_is_refused(tmp_path) -> None:
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    try:
        refused_open(open_run, "cannot write to --out .*ro: Permission denied", tmp_path / "ro")
        refused_open(open_run, "cannot create --out .*ro/sub: Permission denied",
                     tmp_path / "ro" / "sub")  # fmt: skip
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_a_folder_it_cannot_write_is_refused_even_as_root(tmp_path, monkeypatch) -> None:
    """The same refusals where root could write: the OS's answer is simulated."""
    real_open, real_mkdir = os.open, os.mkdir

    def deny(real: Callable) -> Callable:
        def f(path, *a, **k):  # noqa: ANN001, ANN202
            if str(path).startswith(str(tmp_path / "ro")):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path, *a, **k)

        return f

    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(os, "open", deny(real_open))
    monkeypatch.setattr(os, "mkdir", deny(real_mkdir))
    refused_open(open_run, r"^cannot write to --out .*ro: Permission denied$", tmp_path / "ro")
    refused_open(open_run, r"^cannot create --out .*ro/sub: Permission denied$",
                 tmp_path / "ro" / "sub")  # fmt: skip
