"""``attnkit train --nproc-per-node N ...``: start N ranks of a data-parallel run on this machine.

The ranks are what ``torchrun --standalone --nproc_per_node=N -m attnkit train ...`` starts
(the same environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
TORCHELASTIC_RUN_ID; see distributed.py), started by torch's elastic agent
(``torch.distributed.launcher.api.elastic_launch``) inside this process instead of torchrun's,
so that how the job ends is said by attnkit, in one line:

    Ctrl-C, SIGTERM     the agent passes the signal to the ranks (each stops after the same
                        update, rank 0 saves ``last/``); then ``interrupted`` (or ``stopped by
                        SIGTERM``), exit 130 (143), where torchrun prints the traceback of its
                        ``SignalException``
    a rank fails        ``rank R failed (exit code C): ITS LAST ERROR LINE``, exit 2 (1 when
                        a rank died by a signal), where torchrun prints a ``ChildFailedError``
                        report

A rank says its error line to the launcher through the error file torch's agent names in its
environment (``TORCHELASTIC_ERROR_FILE``, which ``record_error`` writes in torch's format), so
torchrun's own report shows that line too. The agent's log lines (torch's
``torch.distributed.elastic`` loggers) are kept to errors while it runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

RESTARTS = 0  # a failed rank ends the job: attnkit's runs continue with --resume, not a restart


def record_error(line: str) -> None:
    """In a rank started by torch's elastic agent (this launcher or torchrun), write ``line``
    to the agent's error file, where it reads why the rank failed; elsewhere nothing."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    with contextlib.suppress(OSError):
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"message": line, "timestamp": int(time.time())}, f)


def without_launch_flag(argv: Sequence[str]) -> list[str]:
    """``argv`` without ``--nproc-per-node N`` (or ``--nproc-per-node=N``): the ranks' own."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc-per-node":
            skip = True
        elif not a.startswith("--nproc-per-node="):
            out.append(a)
    return out


@contextlib.contextmanager
def _quiet_agent() -> Iterator[None]:
    """The elastic agent's loggers at CRITICAL (each sets its own level, WARNING by default:
    a line per signal, per rank it closes, and an ERROR line per rank that failed)."""
    names = [n for n in logging.root.manager.loggerDict if n.startswith("torch.distributed")]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _failure_line(failures: dict[int, Any]) -> tuple[str, int]:
    """The one line for the rank that failed first, and the exit code: 2 for a rank that said
    its error, 1 for one that died by a signal or said nothing. ``failures`` are torch's
    ``ProcessFailure`` by rank, times in whole seconds: a rank killed by a signal comes first
    (its peers then say they lost it, and the agent stops them with SIGTERM, which comes
    last), then the earliest."""

    def first(kv: tuple[int, Any]) -> tuple[int, int, int]:
        code = kv[1].exitcode
        cause = 0 if code < 0 and code != -signal.SIGTERM else 2 if code < 0 else 1
        return cause, kv[1].timestamp, kv[0]

    rank, f = min(failures.items(), key=first)
    if f.exitcode < 0:
        try:
            name: object = signal.Signals(-f.exitcode).name
        except ValueError:
            name = f"signal {-f.exitcode}"
        return f"rank {rank} was killed by {name}; restart the job with --resume", 1
    if os.path.isfile(f.error_file):  # written by ``record_error``
        said = str(f.message).strip().splitlines() or [""]
        line = re.sub(r"^attnkit [\w-]+: error: ", "", said[-1])  # the prefix is said once
        return f"rank {rank} failed (exit code {f.exitcode}): {line}", 2
    return (f"rank {rank} failed (exit code {f.exitcode}) without an error line; its output "
            "is above"), 1  # fmt: skip


def launch(nproc: int, argv: Sequence[str]) -> int:
    """Run ``python -m attnkit ARGV`` as ``nproc`` ranks on this machine (a standalone
    rendezvous on a free local port) and wait for them; returns the exit code, having printed
    at most one line to standard error (see the module docstring)."""
    if nproc < 1:
        raise ValueError(f"--nproc-per-node {nproc}; it must be at least 1")
    if "WORLD_SIZE" in os.environ:
        raise ValueError(
            "--nproc-per-node starts the ranks itself, but this process is one already "
            "(WORLD_SIZE is set): drop --nproc-per-node under torchrun, or unset WORLD_SIZE"
        )
    with tempfile.TemporaryDirectory(prefix="attnkit-launch-") as logs:
        return _run(nproc, argv, logs)


LAUNCHER_PID = "ATTNKIT_LAUNCHER_PID"
"""The environment variable that tells a rank the pid of the process that started it (the
agent runs in this process): a rank whose parent is another process by the time it asks for
its parent-death signal was orphaned before it could ask, and stops (distributed.py)."""


@contextlib.contextmanager
def _launcher_pid_for_ranks() -> Iterator[None]:
    """``ATTNKIT_LAUNCHER_PID`` = this process's pid in the environment the ranks inherit, for
    the duration of the launch."""
    before = os.environ.get(LAUNCHER_PID)
    os.environ[LAUNCHER_PID] = str(os.getpid())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(LAUNCHER_PID, None)
        else:
            os.environ[LAUNCHER_PID] = before


def _run(nproc: int, argv: Sequence[str], logs: str) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=str(uuid.uuid4()),
        rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=RESTARTS,
        monitor_interval=0.1, start_method="spawn", logs_specs=_logs_specs(logs),
    )  # fmt: skip
    with _quiet_agent(), _launcher_pid_for_ranks():
        try:
            elastic_launch(config, sys.executable)("-m", "attnkit", *argv)
        except SignalException as err:
            sig = signal.Signals(err.sigval)
            print("interrupted" if sig == signal.SIGINT else f"stopped by {sig.name}",
                  file=sys.stderr)  # fmt: skip
            return 128 + int(sig)
        except ChildFailedError as err:
            line, code = _failure_line(dict(err.failures))
            print(f"attnkit {argv[0]}: error: {line}", file=sys.stderr)
            return code
    return 0


def _logs_specs(folder: str) -> Any:
    """Where the agent keeps its per-rank files (the error files): a temporary folder,
    with each rank's output going to this terminal as it is (no redirection)."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs

    return DefaultLogsSpecs(log_dir=folder)


__all__ = ["launch", "record_error", "without_launch_flag"]
