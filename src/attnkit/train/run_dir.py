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
only the names an earlier experiment recorded as written (in ``DIR/.attnkit-experiment.json``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .checkpoint import find_checkpoint, refuse_foreign, remove, write_text

LOCK = ".attnkit.lock"
CHECKPOINTS = ("best", "last")  # folders, rotated through .NAME.old and .NAME.tmp-PID
RUN_NAMES = (*CHECKPOINTS, "history.json")  # everything a run writes into OUT
MANIFEST = ".attnkit-experiment.json"  # what an experiment found and wrote in its --out


class RunDirError(ValueError):
    """A training output folder that cannot be used as asked; the message says what to do."""


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


def _experiment_entries(out: Path) -> list[str]:
    """Names in ``out`` other than the lock, the manifest and the manifest's temporaries."""
    own = (LOCK, MANIFEST)
    return sorted(n for n in os.listdir(out) if n not in own and not n.startswith(f".{MANIFEST}."))


def _experiment_wrote(out: Path, present: list[str]) -> list[str]:
    """Which of ``present`` an earlier experiment wrote, by its manifest: the names it listed
    when it ended, or (killed before that) every name but those it found there."""
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        kept, wrote = manifest["kept"], manifest.get("wrote")
    except (OSError, ValueError, KeyError, TypeError):
        return []  # no manifest (or a damaged one): nothing is known to be attnkit's
    if not _names(kept) or not (wrote is None or _names(wrote)):
        return []  # a manifest of other types ("kept": "user" passes `in`): trust nothing
    if wrote is None:
        return [n for n in present if n not in kept]
    return [n for n in present if n in wrote]


def _names(value: object) -> bool:
    """Whether ``value`` is what a manifest lists: a JSON list of file names."""
    return isinstance(value, list) and all(isinstance(n, str) for n in value)


def _write_manifest(out: Path, name: str, kept: list[str], wrote: list[str] | None) -> None:
    record = {"experiment": name, "kept": kept, "wrote": wrote}
    write_text(out / MANIFEST, json.dumps(record, indent=1))


@contextlib.contextmanager
def open_experiment(
    out: str | Path | None, name: str, *, overwrite: bool = False
) -> Iterator[Path]:
    """Open ``out`` for experiment ``name``: the run-folder rules of ``open_run`` for a folder
    of several runs and reports. Locked (``.attnkit.lock``) for the duration; refused when it
    holds anything (a run, an earlier experiment's output, your files) unless ``overwrite``,
    which removes only what an earlier experiment wrote there and leaves the rest. What an
    experiment writes is recorded in ``out/.attnkit-experiment.json``: the names it found
    (``kept``) before it starts, the names it wrote when it ends, fails or is interrupted."""
    path = _usable_folder(out)
    with _locked(path):
        present = _experiment_entries(path)
        ours = _experiment_wrote(path, present)
        if present and not overwrite:
            shown = ", ".join(present[:5]) + (", ..." if len(present) > 5 else "")
            what = "an experiment's output" if ours == present else "files"
            raise RunDirError(
                f"{path} already holds {what} ({shown}); pick another --out, or pass "
                "--overwrite to replace what an earlier experiment wrote there"
            )
        for n in ours:  # the lock is ours, so no live experiment is writing any of them
            remove(path / n)
        kept = [n for n in present if n not in ours]
        _write_manifest(path, name, kept, None)
        try:
            yield path
        finally:
            wrote = [n for n in _experiment_entries(path) if n not in kept]
            if wrote:
                _write_manifest(path, name, kept, wrote)
            else:  # refused or failed before writing anything: leave the folder as it was
                (path / MANIFEST).unlink(missing_ok=True)


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
