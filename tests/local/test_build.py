"""Building the kernel can never hang, half-load or swallow Ctrl-C (``attnkit.local._build``):
a lock left by a killed builder is taken over, two first uses at once build once, a read-only
cache or a missing compiler is a clear error (and a fallback with a warning in ``native``),
SIGINT during a build interrupts it and the next run completes.

The builds here compile a ten-line C extension (a second each, not the kernel's 30 s), in a
temporary ``TORCH_EXTENSIONS_DIR``; a slow compiler is a ``CXX`` wrapper that sleeps first.
Every process runs under a timeout, so a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import attnkit.local._build as build
import attnkit.local.native as native
from tests._probe_extension import SOURCE, finish

NAME = "attnkit_build_probe"
RUN = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from attnkit.local._build import BuildError, load_or_build
    try:
        m = load_or_build(sys.argv[1], [Path(sys.argv[2])], [], wait=float(sys.argv[3]))
    except BuildError as err:
        print("BuildError:", err)
        raise SystemExit(3)
    print("answer", m.answer())
    """
)
TIMEOUT = 120


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(root))
    monkeypatch.setenv("ATTNKIT_NATIVE", "1")
    monkeypatch.delenv("CXX", raising=False)
    return root


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "probe.cpp"
    path.write_text(SOURCE)
    return path


def _slow_cxx(tmp_path: Path, seconds: float) -> str:
    """A C++ compiler that sleeps before compiling: a build long enough to interrupt."""
    script = tmp_path / f"slow-cxx-{seconds}"
    script.write_text(f'#!/bin/sh\nsleep {seconds}\nexec c++ "$@"\n')
    script.chmod(0o755)
    return str(script)


def _start(source: Path, cxx: str | None = None, wait: float = 60) -> subprocess.Popen[str]:
    env = dict(os.environ)
    if cxx is not None:
        env["CXX"] = cxx
    return subprocess.Popen(
        [sys.executable, "-c", RUN, NAME, str(source), str(wait)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,  # its own process group, as a terminal's job: Ctrl-C reaches all
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    return finish(proc, TIMEOUT, "the build")


def _wait_for_compiling(proc: subprocess.Popen[str]) -> None:
    assert proc.stderr is not None
    line = proc.stderr.readline()  # blocks until the builder says it compiles
    assert "compiling" in line, line


def _signal_while_compiling(
    source: Path, tmp_path: Path, sig: signal.Signals
) -> subprocess.Popen[str]:
    """A first use with a slow compiler, sent ``sig`` to its whole process group (as a
    terminal sends it) half a second after it says it compiles."""
    proc = _start(source, cxx=_slow_cxx(tmp_path, 60))
    _wait_for_compiling(proc)
    time.sleep(0.5)
    os.killpg(proc.pid, sig)
    return proc


def _next_run_builds_and_loads(cache: Path, source: Path) -> None:
    """The next run after an interrupted or killed build completes, leaving only the
    published file."""
    code, out, err = _finish(_start(source))
    assert (code, out.split()) == (0, ["answer", "42"]), err
    _clean(cache / NAME)


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout)


def _clean(folder: Path) -> None:
    """Only the published extension and its record are left: no lock, no private build
    folder."""
    assert sorted(p.name for p in folder.iterdir()) == [f"{NAME}.so", f"{NAME}.so.json"]


def test_builds_once_then_loads_the_published_file(cache: Path, source: Path) -> None:
    code, out, err = _finish(_start(source))
    assert (code, out.split()) == (0, ["answer", "42"]), err
    assert "compiling" in err
    _clean(cache / NAME)
    code, out, err = _finish(_start(source))
    assert (code, out.split(), err) == (0, ["answer", "42"], "")  # loaded, not compiled again


def test_a_stale_lock_left_by_a_killed_builder_is_taken_over(cache: Path, source: Path) -> None:
    folder = cache / NAME
    folder.mkdir(parents=True)
    (folder / build.LOCK).write_text(f"{_dead_pid()} {os.uname().nodename}\n")
    (folder / ".build-leftover").mkdir()  # the killed builder's private folder
    _next_run_builds_and_loads(cache, source)


def test_sigkill_during_the_build_then_the_next_run_completes(
    cache: Path, source: Path, tmp_path: Path
) -> None:
    # an OOM kill, a closed terminal's SIGKILL
    proc = _signal_while_compiling(source, tmp_path, signal.SIGKILL)
    proc.communicate(timeout=TIMEOUT)
    assert (cache / NAME / build.LOCK).exists()  # it left its lock behind
    _next_run_builds_and_loads(cache, source)


def test_sigint_during_the_build_interrupts_it_and_the_next_run_completes(
    cache: Path, source: Path, tmp_path: Path
) -> None:
    proc = _signal_while_compiling(source, tmp_path, signal.SIGINT)  # Ctrl-C in a terminal
    code, out, err = _finish(proc)
    assert code != 0 and "KeyboardInterrupt" in err, (code, out, err)  # not swallowed
    assert "BuildError" not in out and "answer" not in out
    assert not (cache / NAME / build.LOCK).exists()
    _next_run_builds_and_loads(cache, source)


@pytest.mark.slow  # suite: pytest -m slow (.ci/run runs it)
def test_two_first_uses_at_once_build_once_and_both_load(
    cache: Path, source: Path, tmp_path: Path
) -> None:
    cxx = _slow_cxx(tmp_path, 3)
    first, second = _start(source, cxx), _start(source, cxx)
    results = [_finish(first), _finish(second)]
    assert [(code, out.split()) for code, out, _ in results] == [(0, ["answer", "42"])] * 2
    said = sorted(err.split(",")[0].split(" ")[1] for _, _, err in results)
    assert said == ["compiling", "waiting"], [err for _, _, err in results]  # one built
    _clean(cache / NAME)


def test_a_live_builder_is_waited_for_a_bounded_time(cache: Path, source: Path) -> None:
    folder = cache / NAME
    folder.mkdir(parents=True)
    (folder / build.LOCK).write_text(f"{os.getpid()} {os.uname().nodename}\n")  # alive: us
    started = time.monotonic()
    code, out, err = _finish(_start(source, wait=1))
    assert code == 3 and "not waiting longer" in out and "ATTNKIT_BUILD_WAIT" in out, out
    assert time.monotonic() - started < 30


def _read_only(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # root writes through any mode bits: use a folder nobody can create
        return Path("/proc/attnkit-no-such-cache")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


def test_a_read_only_cache_is_a_clear_error(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(_read_only(tmp_path)))
    with pytest.raises(build.BuildError, match="cannot be written.*TORCH_EXTENSIONS_DIR"):
        build.load_or_build(NAME, [source], [], say=False)


def test_the_kernel_falls_back_with_one_warning_on_a_read_only_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(_read_only(tmp_path)))
    monkeypatch.setattr(native, "USE", True)
    monkeypatch.setattr(native, "_state", {})
    with pytest.warns(RuntimeWarning, match="cannot be written.*TORCH_EXTENSIONS_DIR.*SDPA tiles"):
        assert native.kernel() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native.kernel() is None  # warned once, not retried


def test_a_missing_compiler_says_to_install_one(
    cache: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CXX", "/no/such/c++")
    with pytest.raises(build.BuildError, match="no C\\+\\+ compiler.*install one"):
        build.load_or_build(NAME, [source], [], say=False)
    assert not (cache / NAME / build.LOCK).exists()


def test_a_damaged_published_file_is_rebuilt(cache: Path, source: Path) -> None:
    folder = cache / NAME
    folder.mkdir(parents=True)
    (folder / f"{NAME}.so").write_bytes(b"not an ELF file")
    code, out, err = _finish(_start(source))
    assert (code, out.split()) == (0, ["answer", "42"]), err
    assert "compiling" in err
