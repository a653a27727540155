"""A distributed run never hangs in silence: a leaked WORLD_SIZE says what it waits for and
gives up, a stopped rank is one line within ATTNKIT_COLLECTIVE_TIMEOUT (not gloo's 30 minutes),
the ranks stop when torchrun is killed, and a signal stops every rank after the same update.

Every process started here is bounded by a timeout and killed in a ``finally``."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as torch_dist
from _reliability import one_line_error

from attnkit.cli import main
from attnkit.train.distributed import World, peer_lost

SRC = str(Path(__file__).parents[2] / "src")
TINY = [
    "--task", "copy", "--train-size", "8", "--valid-size", "4", "--test-size", "4",
    "--min-len", "2", "--max-len", "5", "--preset", "tiny", "--epochs", "1", "--no-progress",
]  # fmt: skip
# long enough never to end during a test (50 updates an epoch), a progress line every update
LONG = [
    "--task", "copy", "--train-size", "400", "--valid-size", "8", "--test-size", "8",
    "--min-len", "2", "--max-len", "9", "--preset", "tiny", "--batch-size", "8",
    "--epochs", "50", "--patience", "0", "--save-every", "0", "--report-every", "1",
]  # fmt: skip
DIST_VARS = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "ATTNKIT_RENDEZVOUS_TIMEOUT", "ATTNKIT_COLLECTIVE_TIMEOUT",
)  # fmt: skip

needs_gloo = pytest.mark.skipif(
    not (torch_dist.is_available() and torch_dist.is_gloo_available()),
    reason="torch.distributed with the gloo backend is not available in this torch build",
)
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
START = 300  # seconds torchrun may take to reach its first update: seconds on an idle machine,
# minutes at low priority on busy shared cores; it bounds only a start that never comes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DIST_VARS}
    return {**env, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1", **extra}


def leaked_env(rank: int, port: int, timeout: str) -> dict[str, str]:
    """The variables a shell keeps after `export`ing a distributed job's, no torchrun."""
    return clean_env(WORLD_SIZE="2", RANK=str(rank), MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port), ATTNKIT_RENDEZVOUS_TIMEOUT=timeout)  # fmt: skip


def attnkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "attnkit", *args]


# --- a leaked WORLD_SIZE -------------------------------------------------------------------


@needs_gloo
@pytest.mark.parametrize("rank", [0, 1])
def test_a_leaked_world_size_says_what_it_waits_for_and_gives_up(tmp_path: Path, rank: int):
    """Rank 0 hosts the store and waits for clients; rank 1 finds nothing at MASTER_PORT.
    Either way: one line saying what it waits for and how to run alone, then one error line
    after ATTNKIT_RENDEZVOUS_TIMEOUT, exit 2, nothing else (no C++ stack of torch's retries),
    and no run folder made."""
    out = tmp_path / "run"
    env = leaked_env(rank, free_port(), "3")
    proc = subprocess.run(attnkit("train", *TINY, "--out", str(out)), env=env,
                          capture_output=True, text=True, timeout=90)  # fmt: skip
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 2, proc.stderr[-3000:]
    waiting, error = lines
    assert waiting.startswith("waiting up to 3 s for 1 more process (WORLD_SIZE=2, RANK="), waiting
    assert "not started by torchrun: unset WORLD_SIZE and RANK" in waiting
    assert error.startswith("attnkit train: error: no distributed rendezvous after 3 s"), error
    assert "unset WORLD_SIZE and RANK if you did not mean a distributed run" in error
    assert not out.exists()


@needs_gloo
def test_the_waiting_line_comes_at_once_not_after_the_wait(tmp_path: Path):
    """The line is printed when the wait starts: the process is still waiting when it is read."""
    env = leaked_env(0, free_port(), "120")
    proc = subprocess.Popen(attnkit("train", *TINY, "--out", str(tmp_path / "run")), env=env,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "no line within 60 s of the start"
        line = proc.stderr.readline()
        assert line.startswith("waiting up to 120 s for 1 more process"), line
        assert proc.poll() is None  # still waiting: the line came first
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"MASTER_PORT": "29500"}, r"MASTER_ADDR is not set; .*unset WORLD_SIZE and RANK"),
        ({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "http"}, r"MASTER_PORT='http' is not a port"),
    ],
)
def test_a_leaked_world_size_without_a_master_is_one_line(
    tmp_path, capsys, monkeypatch, extra, match
):
    for k in DIST_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    for k, v in extra.items():
        monkeypatch.setenv(k, v)
    one_line_error(capsys, ["train", *TINY, "--out", str(tmp_path / "run")], match)


@pytest.mark.parametrize("name", ["ATTNKIT_RENDEZVOUS_TIMEOUT", "ATTNKIT_COLLECTIVE_TIMEOUT"])
def test_a_timeout_that_is_no_number_is_one_line(monkeypatch, capsys, name):
    monkeypatch.setenv(name, "soon")
    assert main(["info"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"attnkit: error: {name}='soon'; give a positive number of seconds"]


def test_gloo_timeouts_and_lost_peers_are_said_in_one_line():
    """gloo's own messages (torch 2.13), turned into the line each rank prints."""
    w = World(0, 2, 0)
    timed_out = RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
                             "10000ms for recv operation to complete")  # fmt: skip
    closed = RuntimeError("[gloo/transport/tcp/pair.cc:553] Connection closed by peer "
                          "[127.0.0.1]:24211. This is typically caused by a remote")  # fmt: skip
    t = peer_lost(timed_out, w, 300)
    assert isinstance(t, TimeoutError) and "rank 1 stopped answering for 300 s" in str(t)
    assert "ATTNKIT_COLLECTIVE_TIMEOUT" in str(t)
    c = peer_lost(closed, w, 300)
    assert isinstance(c, ConnectionError) and "rank 1 left the job mid-run" in str(c)
    assert peer_lost(RuntimeError("CUDA out of memory"), w, 300) is None


# --- under torchrun ------------------------------------------------------------------------


@contextmanager
def two_ranks(tmp_path: Path, cmd: list[str], **popen: Any) -> Iterator[subprocess.Popen[str]]:
    """``cmd`` starting two ranks training LONG, in a session of its own (as from a terminal),
    once the first update is done; every process it started is killed on the way out."""
    log = (tmp_path / "stderr").open("w")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True,
                            start_new_session=True, **popen)  # fmt: skip
    ranks: list[int] = []
    try:
        wait_for(lambda: len(rank_pids(proc.pid)) == 2, START, "two ranks")
        ranks = rank_pids(proc.pid)
        wait_for(lambda: "updates" in stderr(tmp_path), START, "the first update")
        yield proc
    finally:
        for pid in [proc.pid, *ranks, *rank_pids(proc.pid)]:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        proc.wait(timeout=30)
        log.close()


def torchrun(tmp_path: Path, out: Path, **extra: str) -> Any:
    """torchrun with two ranks training LONG (``two_ranks``)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "attnkit", "train", *LONG, "--out", str(out)]  # fmt: skip
    return two_ranks(tmp_path, cmd, env=clean_env(**extra))


def stderr(tmp_path: Path) -> str:
    return (tmp_path / "stderr").read_text()


def wait_for(ready: Callable[[], object], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {seconds} s")
        time.sleep(0.2)


def rank_pids(parent: int) -> list[int]:
    """The live children of ``parent``, by rank."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and alive(int(entry.name)):
            try:
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                env = (entry / "environ").read_bytes().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            if ppid == parent:
                rank = [v for v in env if v.startswith(b"RANK=")]
                found[int(rank[0][5:]) if rank else -1] = int(entry.name)
    return [found[r] for r in sorted(found)]


def alive(pid: int) -> bool:
    """Running or stopped, not gone and not a zombie (one re-parented to a PID 1 that does
    not reap may stay a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@linux
@needs_gloo
@pytest.mark.slow
def test_a_stopped_rank_is_one_line_within_the_collective_timeout(tmp_path: Path):
    """SIGSTOP of one rank: the other says so in one line after ATTNKIT_COLLECTIVE_TIMEOUT
    (gloo alone would wait 30 minutes without a word)."""
    # 30 s: above the ranks' natural skew at low priority on busy cores (5 s was not)
    with torchrun(tmp_path, tmp_path / "run", ATTNKIT_COLLECTIVE_TIMEOUT="30") as proc:
        r0, r1 = rank_pids(proc.pid)
        os.kill(r1, signal.SIGSTOP)
        wait_for(lambda: "stopped answering" in stderr(tmp_path), 120, "word of the stopped rank")
        # the stopped rank, continued, would find its own wait over and say so too (its peer
        # has left): end it as a user would end a stopped job, which no signal handler sees
        os.kill(r1, signal.SIGKILL)
        proc.wait(timeout=120)
    err = stderr(tmp_path)
    # the rank's own line; torchrun's ChildFailedError report, printed by torchrun's process,
    # quotes it again from the rank's error file (docs/reliability.md)
    said = [line for line in err.splitlines()
            if "stopped answering" in line and line.startswith("attnkit train")]
    assert said == [
        "attnkit train: error: rank 0 of 2: rank 1 stopped answering for 30 s (stopped with "
        "SIGSTOP or Ctrl-Z, hung, or its machine went away): continue it (kill -CONT PID) or "
        "stop the job and restart it with --resume; ATTNKIT_COLLECTIVE_TIMEOUT sets the wait"
    ], err[-3000:]
    assert not re.search(r"File .*attnkit", err), err[-3000:]  # no traceback of a rank


@linux
@needs_gloo
@pytest.mark.slow
def test_killing_torchrun_stops_its_ranks_and_frees_the_run(tmp_path: Path):
    """kill -9 of torchrun (its ranks run in sessions of their own, so nothing else reaches
    them): the ranks stop within seconds, save last/, and the run's lock is free."""
    out = tmp_path / "run"
    with torchrun(tmp_path, out) as proc:
        ranks = rank_pids(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        wait_for(lambda: not any(alive(p) for p in ranks), 120, "end of the orphaned ranks")
    with (out / ".attnkit.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while a rank holds it
    state = json.loads((out / "last" / "train_state.json").read_text())
    assert state["global_step"] > 0
    assert "interrupted at step" in stderr(tmp_path)


@linux
@needs_gloo
@pytest.mark.slow
def test_a_signal_to_one_rank_stops_every_rank_after_the_same_update(tmp_path: Path):
    """Ctrl-C reaches the ranks at different updates (here: only rank 1); they agree on the
    update after which they stop, rank 0 saves last/ at it, and each says `interrupted` and
    exits 130 without a traceback (torchrun's own report of the exit codes follows)."""
    out = tmp_path / "run"
    with torchrun(tmp_path, out) as proc:
        ranks = rank_pids(proc.pid)
        os.kill(ranks[1], signal.SIGINT)
        proc.wait(timeout=120)
    err = stderr(tmp_path)
    assert err.splitlines().count("interrupted") == 2, err[-3000:]
    step = re.findall(r"interrupted at step (\d+): saved", err)
    assert len(step) == 1, err[-3000:]
    state = json.loads((out / "last" / "train_state.json").read_text())
    assert state["global_step"] == int(step[0])
    assert "Connection closed" not in err and not re.search(r"File .*attnkit", err), err[-3000:]
    assert "exitcode  : 130" in err  # torchrun's summary: the ranks' own exit status


# --- under attnkit's own launcher (`attnkit train --nproc-per-node 2`) ----------------------


def _default_sigint() -> None:
    """A terminal's foreground job: SIGINT at its default (a suite started in the background
    by a non-interactive shell inherits it ignored, and so would the command)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def launched(tmp_path: Path, out: Path) -> Any:
    """`attnkit train --nproc-per-node 2` training LONG (``two_ranks``), SIGINT at its default
    as in a terminal's foreground job."""
    cmd = attnkit("train", "--nproc-per-node", "2", *LONG, "--out", str(out))
    return two_ranks(tmp_path, cmd, env=clean_env(), preexec_fn=_default_sigint)


@linux
@needs_gloo
@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code", "said"), [(signal.SIGINT, 130, "interrupted"),
                                                   (signal.SIGTERM, 143, "stopped by SIGTERM")])
def test_a_signal_to_the_launcher_stops_the_ranks_and_is_one_line(
    tmp_path: Path, sig: signal.Signals, code: int, said: str
) -> None:
    """Ctrl-C (SIGINT to the terminal's process group: the launcher alone, the ranks run in
    sessions of their own) or SIGTERM: the ranks stop after the same update with last/ saved,
    and the launcher ends with one line and 130 (143), where torchrun printed the traceback
    of its SignalException."""
    out = tmp_path / "run"
    with launched(tmp_path, out) as proc:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=120)
    err = stderr(tmp_path)
    assert proc.returncode == code, err[-3000:]
    assert "Traceback" not in err and "SignalException" not in err, err[-3000:]
    assert "ChildFailedError" not in err and "torch/distributed" not in err, err[-3000:]
    assert err.splitlines()[-1] == said, err[-3000:]
    step = re.findall(r"interrupted at step (\d+): saved", err)
    assert len(step) == 1, err[-3000:]
    state = json.loads((out / "last" / "train_state.json").read_text())
    assert state["global_step"] == int(step[0])


@linux
@needs_gloo
@pytest.mark.slow
def test_a_rank_killed_under_the_launcher_is_one_line(tmp_path: Path) -> None:
    """`kill -9` of rank 1: one line naming it, exit 1, no ChildFailedError report."""
    with launched(tmp_path, tmp_path / "run") as proc:
        os.kill(rank_pids(proc.pid)[1], signal.SIGKILL)
        proc.wait(timeout=120)
    err = stderr(tmp_path)
    assert proc.returncode == 1, err[-3000:]
    assert err.splitlines()[-1] == ("attnkit train: error: rank 1 was killed by SIGKILL; "
                                    "restart the job with --resume"), err[-3000:]  # fmt: skip
    assert "Traceback" not in err and "ChildFailedError" not in err, err[-3000:]
    assert "torch/distributed" not in err, err[-3000:]


@needs_gloo
@pytest.mark.slow  # two ranks start and fail: 10 s and more
def test_a_rank_that_fails_under_the_launcher_is_one_line_with_its_error(tmp_path: Path) -> None:
    """A rank's own one-line error (here: a language model, which data-parallel training does
    not take) comes back as one line naming the rank and that error, exit 2."""
    cmd = attnkit("train", "--nproc-per-node", "2", "--task", "lm", "--train-size", "300",
                  "--valid-size", "100", "--test-size", "100", "--preset", "tiny",
                  "--epochs", "1", "--no-progress", "--out", str(tmp_path / "run"))  # fmt: skip
    proc = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=START)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert re.fullmatch(r"attnkit train: error: rank [01] failed \(exit code 2\): data-parallel "
                        r"training \(--nproc-per-node, torchrun\) supports translation tasks, "
                        r"not lm tasks; train in one process", lines[-1]), lines[-1]  # fmt: skip
    assert "Traceback" not in proc.stderr and "ChildFailedError" not in proc.stderr
    assert "torch/distributed" not in proc.stderr, proc.stderr[-3000:]


def test_the_ranks_get_the_command_without_the_launch_flag() -> None:
    from attnkit.train.launch import without_launch_flag

    argv = ["train", "--nproc-per-node", "2", "--out", "r", "--nproc-per-node=3", "--epochs", "1"]
    assert without_launch_flag(argv) == ["train", "--out", "r", "--epochs", "1"]


def test_the_launch_flag_inside_a_rank_is_one_line(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    argv = ["train", "--nproc-per-node", "2", *TINY, "--out", str(tmp_path / "run")]
    one_line_error(capsys, argv, r"drop --nproc-per-node under torchrun")
    assert not (tmp_path / "run").exists()


def test_the_launchers_line_names_the_first_failed_rank_and_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What torch's agent reports (a ``ProcessFailure`` per failed rank, its message read from
    the error file ``record_error`` wrote), turned into the launcher's one line."""
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    from attnkit.train.launch import _failure_line, record_error

    said = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(said))
    record_error("attnkit train: error: --out r is in use by attnkit pid 7; wait for it")
    first = ProcessFailure(local_rank=1, pid=11, exitcode=2, error_file=str(said))
    first.timestamp = 100
    other = ProcessFailure(local_rank=0, pid=10, exitcode=2, error_file=str(said))
    other.timestamp = 101
    assert _failure_line({0: other, 1: first}) == (
        "rank 1 failed (exit code 2): --out r is in use by attnkit pid 7; wait for it", 2)
    later = ProcessFailure(local_rank=1, pid=10, exitcode=-9, error_file=str(tmp_path / "none"))
    later.timestamp = 101
    assert _failure_line({0: first, 1: later}) == (
        "rank 1 was killed by SIGKILL; restart the job with --resume", 1)
    stopped = ProcessFailure(local_rank=0, pid=10, exitcode=-15, error_file=str(tmp_path / "-"))
    stopped.timestamp = 99  # stopped by the agent once rank 1 was lost: not the cause
    assert _failure_line({0: stopped, 1: later})[0].startswith("rank 1 was killed by SIGKILL")
    silent = ProcessFailure(local_rank=0, pid=10, exitcode=1, error_file=str(tmp_path / "none"))
    assert _failure_line({0: silent})[0].endswith("without an error line; its output is above")


def _watch_parent_in_a_child(launcher: str | None) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter that asks for its parent-death signal as a rank does, its parent
    being this test's process; ``launcher``: what ATTNKIT_LAUNCHER_PID says."""
    env = {k: v for k, v in os.environ.items() if k != "ATTNKIT_LAUNCHER_PID"}
    env["PYTHONPATH"] = SRC
    if launcher is not None:
        env["ATTNKIT_LAUNCHER_PID"] = launcher
    code = ("from attnkit.train.distributed import _watch_parent\n"
            "try:\n    print('parent', _watch_parent())\n"
            "except ValueError as err:\n    print('refused:', err)\n")  # fmt: skip
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def test_a_rank_whose_launcher_is_not_its_parent_stops_at_start() -> None:
    """Under ``attnkit train --nproc-per-node`` the launcher names its pid: a rank whose parent
    is any other process (re-parented to a subreaper before it could ask for the parent-death
    signal, where a parent of pid 1 is not what it sees) stops at once with one line."""
    ours = str(os.getpid())
    assert _watch_parent_in_a_child(ours).stdout.strip() == f"parent {ours}"
    assert _watch_parent_in_a_child(None).stdout.strip() == f"parent {ours}"
    other = _watch_parent_in_a_child(str(os.getppid()))  # a live process that is not its parent
    assert other.stdout.strip() == (
        "refused: the attnkit launcher that started this rank has exited; nothing to do"
    ), other.stdout + other.stderr


def test_the_launcher_names_its_pid_to_the_ranks_for_the_launch_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from attnkit.train import launch

    monkeypatch.delenv("ATTNKIT_LAUNCHER_PID", raising=False)
    with launch._launcher_pid_for_ranks():
        assert os.environ["ATTNKIT_LAUNCHER_PID"] == str(os.getpid())
    assert "ATTNKIT_LAUNCHER_PID" not in os.environ
