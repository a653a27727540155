"""A training output folder, opened for one run at a time.

    with open_run(out, resume=args.resume, overwrite=args.overwrite) as run:
        ...train, saving run.path / "best" and run.path / "last"...
        (resume from run.resume_from when it is not None)

``open_run`` takes ``OUT/.attnkit.lock`` (``flock``: the OS releases it when its holder dies,
even by SIGKILL), then decides by what OUT holds:

    OUT holds                    neither flag      --resume                --overwrite
    nothing of attnkit's         new run           new run (a warning)     new run
    a run, ``last`` resumable    refused           continue it             attnkit's files removed
    a run, nothing resumable     refused           refused                 attnkit's files removed

``--resume`` on a folder with no run starts one, with a warning naming the folder: a job
script that is re-run after each preemption passes ``--resume`` every time, its first run
included, and a mistyped ``--out`` is seen in that line.

The lock is never opened through a symbolic link (``O_NOFOLLOW``) or a hard link: one there is
refused, leaving its target as it was. Files attnkit did not write are never removed: beside the
run they are left alone, and inside a checkpoint folder (``OUT/best/notes.txt``) they make
``open_run`` refuse, since a save replaces the whole folder. Every refusal is a ``RunDirError``
(a ValueError) of one line saying what to do.

``open_experiment`` applies the same rules to ``attnkit experiment NAME --out DIR``, a folder
of several runs and reports: the same lock, refused unless empty or ``--overwrite``, which removes
only the files an earlier experiment recorded with their sha256 (in
``DIR/.attnkit-experiment.json``, see ``outputs.py``) and that still hold that content. A run
opened inside a running experiment's folder is recorded there: its folder must be new (or one
the experiment made before), and each file training writes is recorded with its hash as it is
placed (checkpoint.py), so the files of a run killed midway are the experiment's too.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .checkpoint import FILES, TRAINING_FILES, find_checkpoint, refuse_foreign, remove
from .outputs import (
    LOCK,
    MANIFEST,
    Manifest,
    RunDirError,
    held,
    is_attnkits,
    live_root,
    read_manifest,
    refuse_links,
    update_manifest,
    write_manifest,
)

CHECKPOINTS = ("best", "last")  # folders, rotated through .NAME.old and .NAME.tmp-PID
RUN_NAMES = (*CHECKPOINTS, "history.json")  # everything a run writes into OUT

@dataclass(frozen=True)
class RunDir:
    path: Path
    resume_from: Path | None  # the resumable checkpoint to continue (``last`` or its backup)


def run_entries(out: Path) -> list[Path]:
    """What attnkit wrote into ``out``: RUN_NAMES, their ``.NAME.old`` backups and
    ``.NAME.tmp-PID`` temporaries."""
    names = "|".join(re.escape(n) for n in RUN_NAMES)
    pattern = re.compile(rf"(?:{names})|\.(?:{names})\.(?:old|tmp-\d+)")
    return sorted(p for p in out.iterdir() if pattern.fullmatch(p.name))


def _usable_folder(out: str | Path | None) -> Path:
    if out is None or not str(out).strip():
        raise RunDirError("--out is empty; name a folder for the run, e.g. --out runs/NAME")
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise RunDirError(f"--out {path} is a file, not a folder; pick another --out")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next(p for p in path.parents if p.exists())
        raise RunDirError(f"cannot create --out {path}: {blocker} is a file") from None
    except OSError as err:
        raise RunDirError(f"cannot create --out {path}: {err.strerror}") from None
    return path


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold ``out/.attnkit.lock`` (holding our pid) for the duration; fail at once if held."""
    lock = out / LOCK
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP:  # writing through it would change the link's target
                raise RunDirError(
                    f"{lock} is a symbolic link; attnkit never writes through one: remove "
                    "the link (not its target) and run again"
                ) from None
            raise RunDirError(f"cannot write to --out {out}: {err.strerror}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:  # a hard link: another name's data
            os.close(fd)
            raise RunDirError(
                f"{lock} is not a lock file of attnkit's (a hard link or not a regular file); "
                "remove it and run again"
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunDirError(
                f"{out} is in use by attnkit pid {pid}; wait for that run to end "
                "or pick another --out"
            ) from None
        with contextlib.suppress(FileNotFoundError):
            if os.fstat(fd).st_ino == os.stat(lock).st_ino:
                break  # the file we locked is still the lock, not one its holder unlinked
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.unlink(lock)  # before unlocking: whoever opened it meanwhile sees the inode change
        os.close(fd)


def _refuse_foreign(out: Path) -> None:
    for name in CHECKPOINTS:
        refuse_foreign(out / name, RunDirError)


@contextlib.contextmanager
def open_run(
    out: str | Path | None, *, resume: bool = False, overwrite: bool = False
) -> Iterator[RunDir]:
    """Open ``out`` for one training run (see the module docstring): locked, checked, cleaned
    of dead temporaries, and with ``resume_from`` set when ``resume`` finds a checkpoint."""
    if resume and overwrite:
        raise RunDirError("--resume and --overwrite contradict each other; pass one of them")
    _claim(out)
    path = _usable_folder(out)
    with _locked(path):
        found = run_entries(path)
        if found and not (resume or overwrite):
            shown = ", ".join(p.name + ("/" if p.is_dir() else "") for p in found)
            raise RunDirError(
                f"{path} already holds a run ({shown}); pass --resume to continue it "
                "or --overwrite to replace it"
            )
        _refuse_foreign(path)
        for p in found:  # the lock is ours, so no live process is writing any of them
            if overwrite or ".tmp-" in p.name:
                remove(p)
        resume_from = find_checkpoint(path, "last", resumable=True) if resume else None
        if resume and resume_from is None and run_entries(path):
            raise RunDirError(
                f"{path} holds a run but no resumable checkpoint ({path / 'last'} is missing "
                "or incomplete); pass --overwrite to start it again"
            )
        yield RunDir(path, resume_from)


def _claim(out: str | Path | None) -> None:
    """Inside a running experiment's folder (``outputs.live_root``), record ``out`` as a run
    folder of the experiment; refused when it exists with files the experiment did not make."""
    if out is None or not str(out).strip():
        return
    path = Path(out)
    root = live_root(path)
    if root is None:
        return
    refuse_links(path, root)
    rel = os.path.relpath(os.path.abspath(path), root)

    def claim(m: Manifest) -> None:
        if rel in m.runs:
            return
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise RunDirError(
                f"{path} holds files not written by attnkit, where the experiment trains a run; "
                "move it out, or pick another --out"
            )
        m.runs.append(rel)

    update_manifest(root, claim)


def _experiment_entries(out: Path) -> list[str]:
    """Names in ``out`` other than the lock, the manifest and the manifest's temporaries."""
    own = (LOCK, MANIFEST)
    return sorted(n for n in os.listdir(out) if n not in own and not n.startswith(f".{MANIFEST}."))


def _files_under(out: Path, names: list[str]) -> list[str]:
    """Every file (and link, and empty folder) under ``out/NAME`` for ``names``, relative."""
    found = []
    for n in names:
        p = out / n
        if p.is_dir() and not p.is_symlink():
            inner = [os.path.relpath(os.path.join(d, f), out)
                     for d, dirs, files in os.walk(p) for f in files + [x for x in dirs
                     if os.path.islink(os.path.join(d, x))]]  # fmt: skip
            found += inner or [n]
        else:
            found.append(n)
    return sorted(found)


def _run_names(run: str) -> set[str]:
    """What training writes into the run folder ``run`` (relative paths): its history, the
    files of its checkpoints, and its lock (left behind by a run that was killed)."""
    ckpt = FILES + TRAINING_FILES
    return {f"{run}/history.json", f"{run}/{LOCK}",
            *(f"{run}/{c}/{f}" for c in CHECKPOINTS for f in ckpt)}  # fmt: skip


def _sort_out(out: Path, m: Manifest | None, names: list[str]) -> tuple[list[str], list[str]]:
    """The files under ``names`` split into attnkit's (recorded with a matching hash, a
    temporary it listed, or what training wrote into a run folder it made) and the user's."""
    runs: set[str] = set()
    if m is not None:
        runs = {r for run in m.runs for r in _run_names(run)}
    ours: list[str] = []
    theirs: list[str] = []
    for rel in _files_under(out, names):
        mine = m is not None and (is_attnkits(out, m, rel) or rel in m.writing or rel in runs
                                  or (out / rel).is_dir() and rel in _folders_of(m))  # fmt: skip
        (ours if mine and not (out / rel).is_symlink() else theirs).append(rel)
    return ours, theirs


def _folders_of(m: Manifest) -> set[str]:
    """The folders attnkit made for the files its manifest names (written or being written)."""
    named = {*m.wrote, *m.writing, *(w["for"] for w in m.writing.values())}
    return {str(p) for rel in named for p in Path(rel).parents if str(p) != "."}


def _remove_file(out: Path, rel: str) -> None:
    """Remove ``out/rel`` (when there) and the folders it leaves empty, up to ``out``."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(out / rel)
    parent = (out / rel).parent
    while parent != out and parent.is_dir() and not parent.is_symlink() and not any(
        parent.iterdir()
    ):
        os.rmdir(parent)
        parent = parent.parent


def _shown(names: list[str]) -> str:
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")


def _check_experiment(path: Path, name: str, m: Manifest | None, overwrite: bool) -> None:
    """Refuse (one line) a folder whose files the experiment may not touch or write over."""
    present = _experiment_entries(path)
    if m is not None:
        named = {*m.wrote, *(w["for"] for w in m.writing.values())}
        changed = sorted(r for r in named if os.path.lexists(path / r)
                         and not is_attnkits(path, m, r))  # fmt: skip
        if changed:
            raise RunDirError(
                f"{path / changed[0]} was written by attnkit but has changed since: it is yours "
                "now, and --overwrite never removes it; move it out of the folder, or pick "
                "another --out"
            )
    ours, theirs = _sort_out(path, m, present)
    if present and not overwrite:
        if theirs:
            raise RunDirError(
                f"{path} already holds files not written by attnkit ({_shown(theirs)}); move "
                "them out, or pick another --out (--overwrite never removes them)"
            )
        raise RunDirError(
            f"{path} already holds an earlier experiment's output ({_shown(present)}); pass "
            "--overwrite to replace it, or pick another --out"
        )
    for out_name in (f"{name}.{ext}" for ext in ("csv", "json", "png")):
        p = path / out_name
        refuse_links(p, path)
        if out_name in theirs:
            raise RunDirError(
                f"{p} is not written by attnkit and the experiment writes that name: move it "
                "out, or pick another --out (--overwrite never replaces it)"
            )


@contextlib.contextmanager
def open_experiment(
    out: str | Path | None, name: str, *, overwrite: bool = False
) -> Iterator[Path]:
    """Open ``out`` for experiment ``name``: the run-folder rules of ``open_run`` for a folder
    of several runs and reports. Locked (``.attnkit.lock``) for the duration; refused when it
    holds anything (a run, an earlier experiment's output, your files) unless ``overwrite``,
    which removes only the files an earlier experiment recorded with their sha256 and still
    hold that content (``outputs.py``), and leaves the rest. Refused, even with ``overwrite``,
    when a recorded file has changed since (it is yours now) or when a file of yours, or a
    link, has a name the experiment writes."""
    path = _usable_folder(out)
    with _locked(path):
        m = read_manifest(path)
        _check_experiment(path, name, m, overwrite)
        runs: list[str] = []
        if m is not None:  # the lock is ours, so no live experiment is writing any of them
            placed = {*m.wrote, *(w["for"] for w in m.writing.values())}
            locks = {f"{r}/{LOCK}" for r in m.runs if not held(path / r / LOCK)}  # of killed runs
            for rel in sorted({*m.writing, *locks,
                               *(r for r in placed if is_attnkits(path, m, r))}):  # fmt: skip
                if not (path / rel).is_symlink() and not (path / rel).is_dir():
                    _remove_file(path, rel)  # and the folders it made, once empty
            runs = [r for r in m.runs if (path / r).is_dir()]
        kept = [n for n in _experiment_entries(path) if n not in runs]
        write_manifest(path, Manifest(name, kept, runs=runs))
        try:
            yield path
        finally:
            m = read_manifest(path)
            if m is not None and not (m.wrote or m.writing or m.runs):
                (path / MANIFEST).unlink(missing_ok=True)  # wrote nothing: as it was


__all__ = [
    "CHECKPOINTS",
    "LOCK",
    "MANIFEST",
    "RUN_NAMES",
    "RunDir",
    "RunDirError",
    "open_experiment",
    "open_run",
    "run_entries",
]
