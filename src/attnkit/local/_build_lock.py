"""The build lock: one process builds an extension at a time, and a lock that nobody holds any
more stops the others for about a lease at most. The plumbing behind ``_build.load_or_build``.

``attnkit.lock`` in the cache folder is created with ``O_EXCL`` and names its holder
(``pid host``). The holder keeps a lease on it: a thread touches the lock's mtime every
``lease / 6`` seconds for as long as it holds it. A waiter takes the lock over when

- its holder is on this host and its pid is not running (a killed build): at once;
- it has not been refreshed for a whole lease (``LEASE``, 30 s): its mtime is older than that,
  or this waiter has watched it unchanged for that long (so that a host whose clock runs ahead
  cannot keep it forever). That is a lock from another host (a cache shared with, or restored
  from, another container), one naming a live but unrelated pid (pids are reused), or one left
  by an attnkit that predates leases and is still building after a lease (then two processes
  build; each publishes with an atomic rename, so that costs time only).

A takeover is atomic: the stale lock is renamed aside and then checked; when what was renamed
is not the lock judged stale (another waiter took it over first and wrote a fresh one, or the
holder refreshed it meanwhile), it is put back. A genuinely building process keeps its lease,
so it is never disturbed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

LOCK = "attnkit.lock"
"""The lock file's name inside the build cache folder (torch's own is ``lock``)."""
LEASE = 30.0
"""Seconds a lock stays valid without being refreshed; its holder refreshes it six times as
often."""
_STARTING = 5.0  # seconds an unreadable lock counts as one being written just now


@dataclass
class Watch:
    """What a waiter has seen of the lock: which lock (file and mtime) and since when
    (``time.monotonic()``)."""

    seen: tuple[int, int, int] | None = None
    since: float = 0.0

    def unrefreshed(self, st: os.stat_result) -> float:
        """Seconds the lock ``st`` has gone without a refresh: its mtime's age, or how long this
        waiter has seen it unchanged, whichever is longer."""
        key = (st.st_dev, st.st_ino, st.st_mtime_ns)
        now = time.monotonic()
        if key != self.seen:
            self.seen, self.since = key, now
        return max(time.time() - st.st_mtime, now - self.since)


@dataclass
class Held:
    """A lock this process holds, with the thread that refreshes its lease."""

    path: Path
    fd: int
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


def acquire(lock: Path, lease: float = LEASE, watch: Watch | None = None) -> Held | str:
    """Take the lock (-> ``Held``, refreshed until ``release``), or -> a description of its
    live owner. A stale lock (see the module) is taken over. Raises OSError when the folder
    cannot take a lock (read-only, full)."""
    watch = watch if watch is not None else Watch()
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            try:
                judged = os.lstat(lock)
            except FileNotFoundError:
                continue  # released just now
            owner = _owner(lock, judged, lease, watch)
            if owner is not None:
                return owner
            _take_over(lock, judged)
            continue
        try:
            os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                lock.unlink()
            raise
        held = Held(lock, fd)
        held.thread = threading.Thread(
            target=_refresh, args=(held, lease / 6), name="attnkit-build-lease", daemon=True
        )
        held.thread.start()
        return held
    return "unknown"  # three races lost in a row: treat as held, wait for the publisher


def release(held: Held) -> None:
    """Stop refreshing and remove the lock, unless it is no longer ours (taken over)."""
    held.stop.set()
    if held.thread is not None:
        held.thread.join()
    try:
        mine, there = os.fstat(held.fd), os.lstat(held.path)
        if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
            held.path.unlink()
    except OSError:
        pass
    finally:
        os.close(held.fd)


def _refresh(held: Held, every: float) -> None:
    while not held.stop.wait(every):
        with contextlib.suppress(OSError):  # the next refresh tries again
            if os.utime in os.supports_fd:
                os.utime(held.fd)
            else:
                os.utime(held.path, follow_symlinks=False)


def _owner(lock: Path, st: os.stat_result, lease: float, watch: Watch) -> str | None:
    """'N' or 'N on HOST' naming the lock's live owner, or None when the lock is stale."""
    if stat.S_ISLNK(st.st_mode):
        return None  # never ours: take it over rather than follow it
    unrefreshed = watch.unrefreshed(st)
    try:
        pid_text, _, host = lock.read_text().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return None if unrefreshed > min(_STARTING, lease) else "a starting process"
    host = host.strip()
    if host and host != socket.gethostname():
        owner = f"{pid} on {host}"  # its pid cannot be checked here: only its lease tells
    elif pid == os.getpid():
        return None  # this very process, in an earlier build that was interrupted
    elif not _alive(pid):
        return None
    else:
        owner = f"{pid}"
    return None if unrefreshed > lease else owner


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


def _take_over(lock: Path, judged: os.stat_result) -> None:
    """Remove the stale lock ``judged``: renamed aside first, then put back if what was renamed
    is another lock (a waiter's fresh one) or the same one refreshed since it was judged."""
    aside = lock.with_name(f"{lock.name}.stale-{os.getpid()}")
    try:
        os.replace(lock, aside)
        moved = os.lstat(aside)
    except FileNotFoundError:
        return
    same = (moved.st_dev, moved.st_ino, moved.st_mtime_ns)
    if same != (judged.st_dev, judged.st_ino, judged.st_mtime_ns):
        with contextlib.suppress(OSError):  # fails only when a fresh lock is there already
            os.link(aside, lock, follow_symlinks=False)
    with contextlib.suppress(OSError):
        aside.unlink()
    if same == (judged.st_dev, judged.st_ino, judged.st_mtime_ns):
        _remove_leftovers(lock.parent)


def _remove_leftovers(folder: Path) -> None:
    """Private build folders of builds whose lock was stale (killed, or on another host)."""
    for old in folder.glob(".build-*"):
        shutil.rmtree(old, ignore_errors=True)


__all__ = ["LEASE", "LOCK", "Held", "Watch", "acquire", "release"]
