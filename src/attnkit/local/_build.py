"""Building a C++ extension so that nothing can hang, half-load or be lost: the plumbing behind
``native.kernel()``.

torch's ``cpp_extension.load`` builds in ``<cache>/<name>/`` under a file lock that it waits on
forever and never checks for a dead owner: a build interrupted once (Ctrl-C, a timeout, an OOM
kill, a closed terminal) leaves the lock behind, and every later process sleeps in front of it.
Here instead:

- the build runs in a private temporary folder, and the finished ``.so`` is published into the
  cache with an atomic rename: no process ever loads a half-written file;
- one process builds at a time under ``attnkit.lock``, which records its owner's pid and host;
  a lock whose owner is gone is taken over, and a live owner is waited for at most ``wait``
  seconds (``ATTNKIT_BUILD_WAIT``, default 300), after which the caller falls back;
- every failure is a ``BuildError`` whose message says what to do (a read-only or full cache
  names ``TORCH_EXTENSIONS_DIR``; a missing compiler says to install one), and Ctrl-C during
  the build is a ``KeyboardInterrupt``, never swallowed.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

from .. import _env

LOCK = "attnkit.lock"
"""The lock file's name inside the build cache folder (torch's own is ``lock``)."""
WAIT = 300.0
"""Seconds to wait for another live process's build before falling back, unless
ATTNKIT_BUILD_WAIT says otherwise (read at each build: a value it cannot read is a
ValueError naming it)."""
_POLL = 0.2


class BuildError(RuntimeError):
    """The extension could not be built or loaded; the message says why and what to do."""


def cache_dir(name: str) -> Path:
    """``<TORCH_EXTENSIONS_DIR or torch's default root>/<name>``, where torch's own builder puts
    it (a build made by an earlier attnkit is found and loaded)."""
    from torch.utils import cpp_extension

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    return Path(root) / name


def load_or_build(
    name: str,
    sources: Sequence[Path],
    flags: Sequence[str],
    *,
    wait: float | None = None,
    say: bool = True,
) -> ModuleType:
    """The extension ``name`` from the cache, or built now from ``sources`` (C++ compiled with
    ``flags``) and published there. Raises ``BuildError`` (with what to do) or
    ``KeyboardInterrupt`` (Ctrl-C during the build)."""
    folder = cache_dir(name)
    final = folder / f"{name}.so"
    if wait is None:  # an unreadable ATTNKIT_BUILD_WAIT: a ValueError naming it
        wait = _env.number("ATTNKIT_BUILD_WAIT", WAIT, unit="seconds", zero=True)
    module = _try_import(name, final)  # a published build loads from a read-only cache too
    if module is not None:
        return module
    _make_folder(folder)
    deadline = time.monotonic() + wait
    told_wait = False
    while True:
        module = _try_import(name, final)
        if module is not None:
            return module
        owner = _acquire(folder / LOCK)
        if owner is None:  # the lock is ours
            try:
                module = _try_import(name, final)  # published while we took the lock
                if module is not None:
                    return module
                if say:
                    print(f"attnkit: compiling {_what(name)} (once; about 30 s)", file=sys.stderr)
                return _build_and_publish(name, sources, flags, folder, final)
            finally:
                _release(folder / LOCK)
        if time.monotonic() > deadline:
            raise BuildError(
                f"process {owner} has been building {_what(name)} for over {wait:.0f} s; "
                f"not waiting longer (set ATTNKIT_BUILD_WAIT to wait longer, or delete "
                f"{folder / LOCK} if that process is stuck)"
            )
        if say and not told_wait:
            print(f"attnkit: waiting for process {owner}, which is compiling {_what(name)}",
                  file=sys.stderr)  # fmt: skip
            told_wait = True
        time.sleep(_POLL)


def _what(name: str) -> str:
    return "the banded flash kernel" if "band_flash" in name else f"the extension {name}"


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-")  # noqa: SIM115
        probe.close()
    except OSError as err:
        raise BuildError(_cache_advice(folder, err)) from err


def _cache_advice(folder: Path, err: OSError) -> str:
    why = err.strerror or str(err)
    if err.errno == errno.ENOSPC:
        return (f"the build cache {folder} is on a full disk ({why}); free some space or set "
                "TORCH_EXTENSIONS_DIR to a folder on another disk")  # fmt: skip
    return (f"the build cache {folder} cannot be written ({why}); set TORCH_EXTENSIONS_DIR to "
            "a writable folder")  # fmt: skip


def _try_import(name: str, path: Path) -> ModuleType | None:
    """The published extension, or None when there is none. A file that cannot be loaded (a
    build for another torch, a damaged file) is moved aside so that it is rebuilt."""
    if not path.is_file():
        return None
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"no loader for {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    except ImportError:
        with contextlib.suppress(OSError):
            path.replace(path.with_name(f".{path.name}.broken-{os.getpid()}"))
        return None


# -- the lock -----------------------------------------------------------------------------------


def _acquire(lock: Path) -> str | None:
    """Take the lock (-> None), or -> a description of its live owner. A lock left by a process
    that is gone (same host, pid not running) or that cannot be read is taken over."""
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            owner = _owner(lock)
            if owner is not None:
                return owner
            _take_over(lock)
            continue
        except OSError as err:
            raise BuildError(_cache_advice(lock.parent, err)) from err
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()} {socket.gethostname()}\n")
        return None
    return "unknown"  # three races lost in a row: treat as held, wait for the publisher


def _owner(lock: Path) -> str | None:
    """'pid N' of the lock's live owner, or None when the owner is gone (or unreadable). An
    owner on another host (a shared cache) counts as live: its pid cannot be checked here."""
    try:
        if lock.is_symlink():
            return None  # never ours: take it over rather than follow it
        pid_text, _, host = lock.read_text().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return None if _age(lock) > 5.0 else "a starting process"  # being written just now
    host = host.strip()
    if host and host != socket.gethostname():
        return f"{pid} on {host}"
    if pid == os.getpid():
        return None  # this very process, in an earlier build that was interrupted
    return f"{pid}" if _alive(pid) else None


def _age(path: Path) -> float:
    try:
        return time.time() - path.lstat().st_mtime
    except OSError:
        return 0.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    try:  # a zombie (exited, not yet reaped by its parent) holds no lock
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _take_over(lock: Path) -> None:
    """Remove a stale lock: renamed aside first, so two processes taking it over at once do not
    remove each other's fresh lock, then deleted."""
    aside = lock.with_name(f"{lock.name}.stale-{os.getpid()}")
    try:
        os.replace(lock, aside)
    except FileNotFoundError:
        return
    with contextlib.suppress(OSError):
        aside.unlink()
    _remove_leftovers(lock.parent)


def _release(lock: Path) -> None:
    with contextlib.suppress(OSError):
        if lock.read_text().split(" ", 1)[0] == str(os.getpid()):
            lock.unlink()


def _remove_leftovers(folder: Path) -> None:
    """Private build folders of builds that were killed (their owner's lock was stale)."""
    for old in folder.glob(".build-*"):
        shutil.rmtree(old, ignore_errors=True)


# -- the build ----------------------------------------------------------------------------------


def _build_and_publish(
    name: str, sources: Sequence[Path], flags: Sequence[str], folder: Path, final: Path
) -> ModuleType:
    from torch.utils import cpp_extension

    _check_compiler()
    try:
        private = Path(tempfile.mkdtemp(prefix=".build-", dir=folder))
    except OSError as err:
        raise BuildError(_cache_advice(folder, err)) from err
    try:
        # each build is in a fresh folder: torch's in-process versioning (which renames a
        # second build of the same name to name_v1) has nothing to track here
        cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(name, None)
        with _interrupts() as interrupted:
            try:
                module = cpp_extension.load(
                    name, [str(s) for s in sources], extra_cflags=list(flags),
                    build_directory=str(private), verbose=False,
                )  # fmt: skip
            except (OSError, RuntimeError, ImportError, subprocess.CalledProcessError) as err:
                if interrupted or _killed_by_signal(err):
                    raise KeyboardInterrupt from err
                raise BuildError(_build_advice(folder, err)) from err
        built = Path(module.__file__ or private / f"{name}.so")
        try:
            os.replace(built, final)  # atomic: other processes see no file or the whole file
        except OSError as err:
            raise BuildError(_cache_advice(folder, err)) from err
        return module
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _check_compiler() -> None:
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx.split()[0]) is None:
        raise BuildError(
            f"no C++ compiler ({cxx!r} is not on PATH); install one (e.g. apt-get install g++) "
            "or set CXX to one"
        )


def _build_advice(folder: Path, err: BaseException) -> str:
    text = str(err)
    if "No space left on device" in text or getattr(err, "errno", None) == errno.ENOSPC:
        return _cache_advice(folder, OSError(errno.ENOSPC, "No space left on device"))
    lines = [line.strip() for line in text.splitlines() if "error" in line.lower()]
    first = (lines or text.strip().splitlines()[:1] or [type(err).__name__])[0][:200]
    return f"{first} (compiler errors; set ATTNKIT_NATIVE=0 to skip the build)"


def _killed_by_signal(err: BaseException) -> bool:
    """The build's compiler was stopped by SIGINT or SIGTERM (a Ctrl-C reaches the whole
    process group), which torch reports as a failed build."""
    seen: BaseException | None = err
    while seen is not None:
        code = getattr(seen, "returncode", None)
        if isinstance(code, int) and code in (-signal.SIGINT, -signal.SIGTERM, 130, 143):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextlib.contextmanager
def _interrupts() -> Iterator[list[int]]:
    """Record a SIGINT arriving during the block (it still raises KeyboardInterrupt as usual);
    the list is non-empty after one came, even if torch turned it into another error."""
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: object) -> None:
        seen.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


__all__ = ["LOCK", "WAIT", "BuildError", "cache_dir", "load_or_build"]
