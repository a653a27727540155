"""The kernel cache when something else damaged it: a truncated published build (an interrupted
copy, a full disk: ``truncate -s``) is moved aside with one warning and rebuilt, where loading
it once killed every process with SIGBUS (exit 135, no message); and a build lock that nobody
refreshes (from another host, or naming a live but unrelated pid) is taken over within a lease,
where it once made every process wait ATTNKIT_BUILD_WAIT and then run the slow path for good.

A good build is a ten-line C extension compiled once with the C++ compiler directly; builds
inside the tests are fakes that publish it (one test rebuilds for real, through torch, a
second). Loads that could crash run in a child process, under a timeout."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import attnkit.local._build as build
from attnkit.local import _published
from tests._probe_extension import SOURCE, finish

NAME = "attnkit_integrity_probe"
# a child that loads (or builds) the probe; with HOLD > 0 its build is a fake that holds the
# lock for HOLD seconds and then publishes the good file
CHILD = textwrap.dedent(
    """
    import os, shutil, sys, tempfile, time
    from pathlib import Path
    import attnkit.local._build as build
    from attnkit.local import _published
    name, source, good = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    hold, lease = float(sys.argv[4]), float(sys.argv[5])

    def slow_build(name, sources, flags, folder, final):
        time.sleep(hold)
        fd, temporary = tempfile.mkstemp(dir=folder)
        os.close(fd)
        shutil.copyfile(good, temporary)
        _published.record(Path(temporary), final)
        os.replace(temporary, final)
        return _published.load(name, final)

    if hold > 0:
        build._build_and_publish = slow_build
    try:
        m = build.load_or_build(name, [source], [], wait=60, lease=lease)
    except build.BuildError as err:
        print("BuildError:", err)
        raise SystemExit(3)
    print("answer", m.answer())
    """
)
TIMEOUT = 180


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good build of the probe extension NAME (not in any cache)."""
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    folder = tmp_path_factory.mktemp("good")
    source = folder / "probe.cpp"
    source.write_text(SOURCE)
    so = folder / f"{NAME}.so"
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        [cxx, "-shared", "-fPIC", f"-DTORCH_EXTENSION_NAME={NAME}", f"-I{include}", str(source),
         "-o", str(so)],
        check=True, capture_output=True, timeout=TIMEOUT,
    )  # fmt: skip
    return so


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty TORCH_EXTENSIONS_DIR; -> the probe's folder in it."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CXX", raising=False)
    return tmp_path / "cache" / NAME


def _publish(good: Path, folder: Path, *, record: bool = True) -> Path:
    """``good`` published in ``folder`` as attnkit publishes a build (with its record unless
    ``record=False``: a build by an attnkit before records)."""
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{NAME}.so"
    shutil.copyfile(good, final)
    if record:
        _published.record(good, final)
    return final


def _fake_build(good: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace the compiler run by publishing ``good``; -> the names built, in order."""
    built: list[str] = []

    def publish(name: str, sources: object, flags: object, folder: Path, final: Path
                ) -> ModuleType | None:  # fmt: skip
        built.append(name)
        _publish(good, folder)
        return _published.load(name, final)

    monkeypatch.setattr(build, "_build_and_publish", publish)
    return built


def _child(good: Path, *, hold: float = 0, lease: float = build.LEASE) -> subprocess.Popen[str]:
    source = good.parent / "probe.cpp"
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, NAME, str(source), str(good), str(hold), str(lease)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    return finish(proc, TIMEOUT, "the child")


def _truncate(path: Path) -> None:
    """As ``truncate -s`` to half the file, past its headers: loading it is SIGBUS."""
    os.truncate(path, path.stat().st_size // 2)


# -- a damaged published build ------------------------------------------------------------------


@pytest.mark.parametrize("record", [True, False], ids=["with-record", "built-before-records"])
def test_a_truncated_cached_build_is_moved_aside_with_one_warning_and_rebuilt(
    good: Path, cache: Path, record: bool
) -> None:
    _truncate(_publish(good, cache, record=record))
    code, out, err = _finish(_child(good))  # a real build (torch, a second)
    assert code != -signal.SIGBUS, "loading the truncated file killed the process (SIGBUS)"
    assert (code, out.split()) == (0, ["answer", "42"]), err
    warned = [line for line in err.splitlines() if "is damaged" in line]
    assert len(warned) == 1 and "RuntimeWarning" in warned[0] and "built again" in warned[0], err
    assert "compiling" in err
    assert [p.name for p in cache.glob(f".{NAME}.so.broken-*")]  # kept aside, not deleted
    again = _published.load(NAME, cache / f"{NAME}.so")  # the rebuilt file matches its record
    assert again is not None and again.answer() == 42


def test_a_file_that_differs_from_its_record_is_rebuilt_not_loaded(
    good: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    final = _publish(good, cache)
    recorded = _published.record_path(final)
    fields = json.loads(recorded.read_text())
    fields["sha256"] = "0" * 64  # same size, other bytes (a file replaced by another)
    recorded.write_text(json.dumps(fields))
    built = _fake_build(good, monkeypatch)
    with pytest.warns(RuntimeWarning, match="is damaged: its SHA-256 differs"):
        module = build.load_or_build(NAME, [], [], say=False)
    assert module.answer() == 42 and built == [NAME]


def test_a_good_build_from_before_records_is_loaded_and_recorded_once(
    good: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    final = _publish(good, cache, record=False)
    built = _fake_build(good, monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build.load_or_build(NAME, [], [], say=False).answer() == 42
    assert built == [] and _published.record_path(final).is_file()
    assert not list(cache.glob(".*broken*"))

    def no_check(path: Path, size: int) -> str | None:
        raise AssertionError("a recorded file was checked as one without a record")

    monkeypatch.setattr(_published, "_truncated", no_check)
    assert build.load_or_build(NAME, [], [], say=False).answer() == 42


def _read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """What attnkit meets in a read-only cache (root writes through mode bits, so the file
    system's refusals are injected): no folder check, no record written."""

    def no_folder(folder: Path) -> None:
        raise build.BuildError(
            f"the build cache {folder} cannot be written (Read-only file system); "
            "set TORCH_EXTENSIONS_DIR to a writable folder"
        )

    def no_record(path: Path, fingerprint: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(build, "_make_folder", no_folder)
    monkeypatch.setattr(_published, "_write_record", no_record)


@pytest.mark.parametrize("record", [True, False], ids=["with-record", "built-before-records"])
def test_a_read_only_cache_serves_a_good_build(
    good: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, record: bool
) -> None:
    final = _publish(good, cache, record=record)
    _read_only(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build.load_or_build(NAME, [], [], say=False).answer() == 42
    assert final.is_file() and _published.record_path(final).is_file() == record
    assert not (cache / build.LOCK).exists()


# -- a lock that nobody refreshes ---------------------------------------------------------------


def _lock(folder: Path, owner: str, age: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / build.LOCK
    lock.write_text(f"{owner}\n")
    then = time.time() - age
    os.utime(lock, (then, then))
    return lock


@pytest.mark.parametrize(
    ("owner", "age", "lease"),
    [
        (f"4242 {socket.gethostname()}-restored", 3600.0, build.LEASE),  # an old lock
        (f"4242 {socket.gethostname()}-shared", 0.0, 1.0),  # fresh, then never refreshed
        (None, 3600.0, build.LEASE),  # a live unrelated pid of this host (our parent)
    ],
    ids=["other-host-old", "other-host-unrefreshed", "live-unrelated-pid"],
)
def test_a_lock_nobody_refreshes_is_taken_over_within_a_lease(
    good: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
    owner: str | None, age: float, lease: float,
) -> None:  # fmt: skip
    owner = owner or f"{os.getppid()} {socket.gethostname()}"
    _lock(cache, owner, age)
    (cache / ".build-leftover").mkdir()  # the stale holder's private folder
    built = _fake_build(good, monkeypatch)
    started = time.monotonic()
    module = build.load_or_build(NAME, [], [], wait=20, lease=lease, say=False)
    assert module.answer() == 42 and built == [NAME]
    assert time.monotonic() - started < lease + 10  # not the 20 s wait
    assert sorted(p.name for p in cache.iterdir()) == [f"{NAME}.so", f"{NAME}.so.json"]


def test_a_live_holder_that_refreshes_its_lock_is_waited_for(
    good: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = 2.0
    holder = _child(good, hold=4 * lease, lease=lease)  # builds for four leases
    assert holder.stderr is not None
    line = holder.stderr.readline()  # the holder has the lock
    assert "compiling" in line, line
    built = _fake_build(good, monkeypatch)
    module = build.load_or_build(NAME, [], [], wait=60, lease=lease, say=False)
    code, out, err = _finish(holder)
    assert (code, out.split()) == (0, ["answer", "42"]), err
    assert module.answer() == 42 and built == []  # waited, never took the lock over
    assert not (cache / build.LOCK).exists()


def test_a_holder_that_was_taken_over_leaves_the_new_lock_alone(cache: Path) -> None:
    """A holder whose lock was taken over (it was suspended past its lease) does not remove the
    new holder's lock when it finishes."""
    from attnkit.local import _build_lock

    cache.mkdir(parents=True)
    lock = cache / build.LOCK
    first = _build_lock.acquire(lock, lease=60)
    assert isinstance(first, _build_lock.Held)
    os.replace(lock, cache / "aside")  # what a waiter's takeover does
    second = _build_lock.acquire(lock, lease=60)
    assert isinstance(second, _build_lock.Held)
    _build_lock.release(first)
    assert lock.exists()  # still the second holder's
    _build_lock.release(second)
    assert not lock.exists()
