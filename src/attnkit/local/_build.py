"""Building a C++ extension so that nothing can hang, half-load or be lost: the plumbing behind
``native.kernel()``.

torch's ``cpp_extension.load`` builds in ``<cache>/<name>/`` under a file lock that it waits on
forever and never checks for a dead owner: a build interrupted once (Ctrl-C, a timeout, an OOM
kill, a closed terminal) leaves the lock behind, and every later process sleeps in front of it.
Here instead:

- the build runs in a private temporary folder, and the finished ``.so`` is published into the
  cache with an atomic rename, after a record of its size and SHA-256: no process ever loads a
  half-written file, and a published file that was damaged later (a truncated copy, a full
  disk) is moved aside with one warning and built again instead of killing the process with
  SIGBUS (``_published``);
- one process builds at a time under ``attnkit.lock``, which names its owner's pid and host
  and whose owner refreshes it (a lease, ``LEASE`` = 30 s): a lock whose owner is gone, or
  that nobody has refreshed for a lease (a lock from another host, one naming an unrelated
  pid), is taken over (``_build_lock``); a live owner is waited for at most ``wait`` seconds
  (``ATTNKIT_BUILD_WAIT``, default 300), after which the caller falls back;
- every failure is a ``BuildError`` whose message says what to do (a read-only or full cache
  names ``TORCH_EXTENSIONS_DIR``; a missing compiler says to install one), and Ctrl-C during
  the build is a ``KeyboardInterrupt``, never swallowed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

from .. import _env
from . import _build_lock, _published
from ._build_lock import LEASE, LOCK

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
    lease: float = LEASE,
    say: bool = True,
) -> ModuleType:
    """The extension ``name`` from the cache, or built now from ``sources`` (C++ compiled with
    ``flags``) and published there. ``lease``: seconds after which a lock nobody refreshed is
    taken over. Raises ``BuildError`` (with what to do) or ``KeyboardInterrupt`` (Ctrl-C
    during the build)."""
    folder = cache_dir(name)
    final = folder / f"{name}.so"
    if wait is None:  # an unreadable ATTNKIT_BUILD_WAIT: a ValueError naming it
        wait = _env.number("ATTNKIT_BUILD_WAIT", WAIT, unit="seconds", zero=True)
    module = _published.load(name, final)  # a published build loads from a read-only cache too
    if module is not None:
        return module
    _make_folder(folder)
    deadline = time.monotonic() + wait
    told_wait = False
    watch = _build_lock.Watch()
    while True:
        module = _published.load(name, final)
        if module is not None:
            return module
        try:
            held = _build_lock.acquire(folder / LOCK, lease, watch)
        except OSError as err:
            raise BuildError(_cache_advice(folder, err)) from err
        if isinstance(held, _build_lock.Held):
            try:
                module = _published.load(name, final)  # published while we took the lock
                if module is not None:
                    return module
                if say:
                    print(f"attnkit: compiling {_what(name)} (once; about 30 s)", file=sys.stderr)
                return _build_and_publish(name, sources, flags, folder, final)
            finally:
                _build_lock.release(held)
        owner = held
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
            _published.record(built, final)  # first the record, so a published file has one
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


__all__ = ["LEASE", "LOCK", "WAIT", "BuildError", "cache_dir", "load_or_build"]
