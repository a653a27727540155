"""Every file an experiment writes into its ``--out``, recorded with its sha256 as it is written.

An experiment's folder (``run_dir.open_experiment``) holds ``.attnkit-experiment.json``:

    {"experiment": NAME,
     "kept":    [names it found there that attnkit did not write],
     "wrote":   {"context.csv": SHA256, "lm-s0/best/model.safetensors": SHA256, ...},
     "writing": {".context.csv.tmp-PID": {"for": "context.csv", "sha256": SHA256 or null}},
     "runs":    ["lm-s0", ...]}      training run folders made for it (``run_dir.open_run``)

A file is attnkit's only while its name is in ``wrote`` (or is the ``for`` of a ``writing``
entry) and its content still has that hash; anything else is the user's, and ``--overwrite``
never removes or replaces it. ``write_output`` / ``open_output`` place each file so that a kill
at any instant leaves a manifest that describes the folder:

    1. list the temporary ``.NAME.tmp-PID`` in ``writing`` (manifest rewritten: tmp + rename)
    2. make its folders, create it (``O_EXCL | O_NOFOLLOW``) and write it whole; record its
       hash in ``writing``
    3. rename it over ``NAME`` (never through a link: the rename replaces the link itself)
    4. move the hash to ``wrote``, drop the ``writing`` entry

Training writes its checkpoints and ``history.json`` by the same four steps (``Placement``,
called by checkpoint.py), with one more for a checkpoint folder, which is renamed whole: before
``last`` is renamed to ``.last.old``, the hashes of its files are recorded under that name too.
So a training run killed inside an experiment leaves only files the manifest names with their
hash (or temporaries it lists), which ``--overwrite`` removes.

The manifest is changed under ``flock`` on the folder, so the processes of a pool can record
their files side by side. A folder is an experiment's only while its ``.attnkit.lock`` is held
(``live_root``): a stale manifest of a killed experiment records nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypedDict

LOCK = ".attnkit.lock"
MANIFEST = ".attnkit-experiment.json"  # what an experiment found and wrote in its --out


Pending = TypedDict("Pending", {"for": str, "sha256": str | None})
"""A temporary being written: the name it will take, and its hash once written whole."""


class RunDirError(ValueError):
    """A training output folder that cannot be used as asked; the message says what to do."""


@dataclass
class Manifest:
    experiment: str
    kept: list[str] = field(default_factory=list)
    wrote: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    writing: dict[str, Pending] = field(default_factory=dict)  # temporary -> its Pending
    runs: list[str] = field(default_factory=list)

    def hashes_of(self, rel: str) -> set[str]:
        """The hashes a file at ``rel`` has when attnkit wrote it (a rename may be under way)."""
        pending = {w["sha256"] for w in self.writing.values() if w["for"] == rel}
        return {h for h in {self.wrote.get(rel), *pending} if h is not None}


def _strs(x: object) -> bool:
    return isinstance(x, list) and all(isinstance(n, str) for n in x)


def parse_manifest(text: str) -> Manifest | None:
    """The manifest in ``text``; None when it is not one of this format (damaged, or of an
    attnkit that recorded no hashes): then no file is known to be attnkit's."""
    try:
        m = json.loads(text)
        name, kept, wrote = m["experiment"], m["kept"], m["wrote"]
        writing, runs = m.get("writing", {}), m.get("runs", [])
    except (ValueError, KeyError, TypeError):
        return None
    pending_ok = isinstance(writing, dict) and all(
        isinstance(w, dict) and isinstance(w.get("for"), str)
        and isinstance(w.get("sha256"), str | None) for w in writing.values())  # fmt: skip
    wrote_ok = isinstance(wrote, dict) and all(isinstance(v, str) for v in wrote.values())
    ok = isinstance(name, str) and _strs(kept) and _strs(runs) and pending_ok and wrote_ok
    if not ok:
        return None
    return Manifest(name, kept, wrote, writing, runs)


def read_manifest(root: Path) -> Manifest | None:
    try:
        return parse_manifest((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def _write_file(path: Path, data: bytes) -> None:
    """Write and fsync one new file (never through a link: ``O_NOFOLLOW``)."""
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644),
              "wb") as f:  # fmt: skip
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    """Make a folder's entries (a rename, a new file) durable: fsync the folder itself."""
    with contextlib.suppress(OSError):  # not every platform can open a folder
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` is alive (``kill(pid, 0)``: another user's counts): a
    temporary named after a dead writer's pid is stale, and may be removed."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def write_manifest(root: Path, m: Manifest) -> None:
    """Replace ``root``'s manifest atomically (a temporary, then rename)."""
    record = {"experiment": m.experiment, "kept": m.kept, "wrote": dict(sorted(m.wrote.items())),
              "writing": m.writing, "runs": sorted(m.runs)}  # fmt: skip
    tmp = root / f".{MANIFEST}.tmp-{os.getpid()}"
    for stale in root.glob(f".{MANIFEST}.tmp-*"):  # of killed writers (and ours, unfinished)
        pid = stale.name.rsplit("-", 1)[1]
        if pid.isdigit() and (int(pid) == os.getpid() or not pid_alive(int(pid))):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)
    _write_file(tmp, json.dumps(record, indent=1).encode("utf-8"))
    os.replace(tmp, root / MANIFEST)
    fsync_dir(root)


@contextlib.contextmanager
def _folder_locked(root: Path) -> Iterator[None]:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def update_manifest(root: Path, change: Callable[[Manifest], Any]) -> Any:
    """Read ``root``'s manifest, apply ``change`` (returns its result), write it back; all under
    the folder's flock. A manifest that does not parse is left alone: ``change`` then sees an
    empty one (nothing is attnkit's) and records nothing."""
    with _folder_locked(root):
        m = read_manifest(root)
        if m is None:  # checked as if nothing were attnkit's, and nothing recorded
            return change(Manifest(""))
        result = change(m)
        write_manifest(root, m)
        return result


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_attnkits(root: Path, m: Manifest, rel: str) -> bool:
    """Whether ``root/rel`` is a plain file (not a link) whose content attnkit recorded."""
    p = root / rel
    hashes = m.hashes_of(rel)
    if not hashes or p.is_symlink() or not p.is_file():
        return False
    return sha256_of(p) in hashes


def held(lock: Path) -> bool:
    """Whether some process holds ``lock`` (the flock of ``run_dir._locked``)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we took
    return False


def live_root(path: Path) -> Path | None:
    """The experiment folder ``path`` lies in: its nearest ancestor holding a manifest and a held
    lock (an experiment running now); None outside one."""
    for a in Path(os.path.abspath(path)).parents:
        if (a / MANIFEST).is_file() and held(a / LOCK):
            return a
    return None


def refuse_links(path: Path, root: Path | None) -> None:
    """Raise when ``path`` or a folder between ``root`` and it is a symbolic link."""
    path = Path(os.path.abspath(path))
    above = [a for a in path.parents if root is not None and a != root and root in a.parents]
    for p in (path, *above):
        if p.is_symlink():
            raise RunDirError(
                f"{p} is a symbolic link; attnkit never writes through one: remove the link "
                "(not its target) or pick another --out"
            )


def not_attnkits(path: Path) -> RunDirError:
    return RunDirError(
        f"{path} is not written by attnkit (or was changed since); it is yours and attnkit "
        "never replaces it: move it out, or pick another --out"
    )


@contextlib.contextmanager
def _placing(path: Path) -> Iterator[Path]:
    """Yield a new empty temporary beside ``path`` to write; on success rename it over ``path``
    and record it (steps 1-4 of the module docstring)."""
    path = Path(path)
    root = live_root(path)
    refuse_links(path, root)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    if root is None:  # a library call outside an experiment: atomic, never through a link
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
        try:
            yield tmp
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return
    rel, tmp_rel = (os.path.relpath(os.path.abspath(p), root) for p in (path, tmp))

    def start(m: Manifest) -> None:
        if os.path.lexists(path) and not is_attnkits(root, m, rel):
            raise not_attnkits(path)
        if os.path.lexists(tmp):
            raise not_attnkits(tmp)
        m.writing[tmp_rel] = {"for": rel, "sha256": None}

    update_manifest(root, start)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # after listing: a folder it names
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
        yield tmp
        sha = sha256_of(tmp)
        update_manifest(root, lambda m: m.writing[tmp_rel].update({"sha256": sha}))
        os.replace(tmp, path)
        fsync_dir(path.parent)

        def done(m: Manifest) -> None:
            m.wrote[rel] = sha
            m.writing.pop(tmp_rel, None)

        update_manifest(root, done)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        update_manifest(root, lambda m: m.writing.pop(tmp_rel, None))
        raise


@dataclass(frozen=True)
class Placement:
    """The manifest records of files written under a temporary name and renamed into place by
    training (checkpoint.py) inside the running experiment at ``root``; outside one (``root``
    None, see ``placement``) every call does nothing. A file is listed before it exists and its
    hash recorded before it takes its name, so a kill at any instant leaves every file either
    a listed temporary or recorded with its hash under the name it has:

        listed({TMP: NAME})     before TMP is created     writing[TMP] = {for: NAME, sha256: null}
        written({TMP: SHA256})  once TMP is whole          writing[TMP].sha256 = SHA256
        moving(SRC, DST)        before a rename SRC -> DST  wrote[DST/F] = wrote[SRC/F], each F
        placed({TMP: NAME})     after the renames           wrote[NAME] = its hash, TMP dropped
    """

    root: Path | None

    def _rel(self, path: Path) -> str:
        return os.path.relpath(os.path.abspath(path), self.root)

    def _update(self, change: Callable[[Manifest], None]) -> None:
        if self.root is not None:
            update_manifest(self.root, change)

    def listed(self, temps: dict[Path, Path]) -> None:
        """Before each temporary (a key) is created: it will become its value."""
        rels = {self._rel(t): self._rel(p) for t, p in temps.items()}

        def change(m: Manifest) -> None:
            for t, p in rels.items():
                m.writing[t] = {"for": p, "sha256": None}

        self._update(change)

    def written(self, hashes: dict[Path, str]) -> None:
        """Once each temporary (a key) is written whole: its sha256."""
        rels = {self._rel(t): h for t, h in hashes.items()}

        def change(m: Manifest) -> None:
            for t, h in rels.items():
                if t in m.writing:
                    m.writing[t]["sha256"] = h

        self._update(change)

    def moving(self, src: Path, dst: Path) -> None:
        """Before the folder ``src`` is renamed to ``dst`` (absent): the hashes of its files
        recorded for their names under ``dst``, which replace any recorded there."""
        s, d = self._rel(src) + "/", self._rel(dst) + "/"

        def change(m: Manifest) -> None:
            for k in [k for k in m.wrote if k.startswith(d)]:
                del m.wrote[k]
            for k, h in list(m.wrote.items()):
                if k.startswith(s):
                    m.wrote[d + k[len(s):]] = h

        self._update(change)

    def placed(self, temps: dict[Path, Path], gone: tuple[Path, ...] = ()) -> None:
        """After each temporary (a key) took its name (a value) and the folders ``gone`` were
        removed or replaced: the hash recorded for the name, and nothing for the temporary
        or for what lay in ``gone``."""
        rels = {self._rel(t): self._rel(p) for t, p in temps.items()}
        folders = tuple(self._rel(g) + "/" for g in gone)

        def change(m: Manifest) -> None:
            for k in [k for k in m.wrote if k.startswith(folders)]:
                del m.wrote[k]
            for t, p in rels.items():
                w = m.writing.pop(t, None)
                if w is not None and w["sha256"] is not None:
                    m.wrote[p] = w["sha256"]

        self._update(change)


def placement(path: Path) -> Placement:
    """The ``Placement`` of files written at ``path``: recorded in the running experiment's
    manifest when ``path`` lies in one (``live_root``), else nowhere."""
    return Placement(live_root(path))


def write_output(path: str | Path, data: bytes | str) -> Path:
    """Write one output file of an experiment (a CSV, JSON, figure, log, data file): whole,
    never through a link, and, inside a running experiment's folder, never over a file attnkit
    did not record (RunDirError), its hash recorded in the manifest. Returns the path."""
    path = Path(path)
    with _placing(path) as tmp:
        _write_file(tmp, data.encode("utf-8") if isinstance(data, str) else data)
    return path


@contextlib.contextmanager
def open_output(path: str | Path) -> Iterator[IO[str]]:
    """``write_output`` for a text written line by line (a training log): the lines go to a
    temporary, which takes ``path``'s name when the block ends."""
    with _placing(Path(path)) as tmp, open(tmp, "w", encoding="utf-8") as f:
        yield f


__all__ = [
    "LOCK",
    "MANIFEST",
    "Manifest",
    "Placement",
    "RunDirError",
    "fsync_dir",
    "held",
    "is_attnkits",
    "live_root",
    "open_output",
    "parse_manifest",
    "pid_alive",
    "placement",
    "read_manifest",
    "refuse_links",
    "sha256_of",
    "update_manifest",
    "write_manifest",
    "write_output",
]
