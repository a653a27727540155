"""Data-parallel training across processes started by ``torchrun``.

``torchrun --nproc_per_node=2 -m attnkit train ...`` starts two processes with RANK,
WORLD_SIZE and LOCAL_RANK in their environment. Each builds the same global batches (same
data, same seed), keeps its own slice of rows, and DistributedDataParallel averages the
gradients. The loss of rank r is normalised by the token count of the *global* batch and
multiplied by the world size W:

    L_r = W · Σ_{t ∈ slice r} CE_t / N_global
    DDP gradient = (1/W) Σ_r ∇L_r = ∇(Σ_t CE_t / N_global)

which is exactly the gradient of the single-process loss of the same global batch (token-mean
cross-entropy), whatever the ranks' token counts. The global batch size stays what the user
asked for. gloo on CPU, nccl on CUDA (one GPU per process, chosen by LOCAL_RANK).

A distributed run never waits in silence (docs/reliability.md):

- the rendezvous is bounded (``ATTNKIT_RENDEZVOUS_TIMEOUT``, 60 s), and a process started
  without torchrun but with WORLD_SIZE > 1 in its environment (leaked from another shell) says
  at once what it waits for and how to run alone;
- each collective is bounded (``ATTNKIT_COLLECTIVE_TIMEOUT``, 300 s, instead of gloo's 30
  minutes): a rank stopped (SIGSTOP), hung or gone is one line naming it;
- a rank started by torchrun stops when torchrun dies (even by SIGKILL: the ranks run in
  sessions of their own, so nothing else would reach them): the parent-death signal SIGTERM
  on Linux, and a check after every update that the parent is still the one that started it;
- under torchrun SIGTERM means what Ctrl-C means (finish the update, save ``last/``, exit
  130), and the ranks agree on the update after which they stop (loop.py).

Legend: B global batch, b rows of one rank, S source length, T target length, V vocabulary.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as torch_dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from .. import _env
from ..data.batching import Batch

TORCHRUN_VARIABLES = ("TORCHELASTIC_RUN_ID", "LOCAL_RANK")
"""Set by torchrun in every rank; WORLD_SIZE > 1 without them is the signature of variables
leaked from another shell (or a hand-made launch)."""


@dataclass(frozen=True)
class World:
    """Where this process sits among the ranks of a torchrun job."""

    rank: int
    world_size: int
    local_rank: int


def world_from_env(env: Mapping[str, str] | None = None) -> World | None:
    """The torchrun job this process belongs to, or None when it was not started by torchrun
    (no WORLD_SIZE) or is the only process (WORLD_SIZE=1)."""
    env = os.environ if env is None else env
    if "WORLD_SIZE" not in env:
        return None
    try:
        world = World(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", "0")))
    except (KeyError, ValueError) as err:
        raise ValueError(
            f"WORLD_SIZE is set but RANK/LOCAL_RANK are missing or not integers ({err}); "
            "start distributed runs with `torchrun --nproc_per_node=N -m attnkit train ...`"
        ) from err
    if not 0 <= world.rank < world.world_size:
        raise ValueError(f"RANK={world.rank} is outside 0..WORLD_SIZE-1={world.world_size - 1}")
    return world if world.world_size > 1 else None


def shard_rows(n: int, rank: int, world_size: int) -> range:
    """Rows of a batch of ``n`` that ``rank`` keeps: contiguous, sizes differing by at most one
    (the first ``n % world_size`` ranks get one more). Empty when n < world_size for late ranks."""
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (rank < extra))


def shard(b: Batch, rank: int, world_size: int) -> Batch:
    """This rank's rows of a global batch. The padded width is kept, so every example is
    computed exactly as in the unsharded batch."""
    rows = shard_rows(len(b.index), rank, world_size)
    sl = slice(rows.start, rows.stop)
    return Batch(b.src[sl], b.src_len[sl], b.tgt_in[sl], b.tgt_out[sl], b.index[sl])  # (b, ·)


@dataclass
class DistContext:
    """An initialised process group and this process's place and device in it."""

    world: World
    backend: str
    device: torch.device
    parent: int | None = None  # pid of the torchrun that started this rank (None: no torchrun)

    @property
    def rank(self) -> int:
        return self.world.rank

    @property
    def world_size(self) -> int:
        return self.world.world_size

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes checkpoints, history and logs."""
        return self.world.rank == 0

    def wrap(self, model: nn.Module) -> nn.Module:
        """DDP around ``model`` (its parameters are broadcast from rank 0)."""
        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    def loss(self, ddp_model: nn.Module, b: Batch, label_smoothing: float = 0.0) -> Tensor:
        """This rank's share of the token-mean loss of the global batch ``b``; see the module
        docstring. A rank left without rows still takes part in the gradient all-reduce."""
        n_global = max(b.tokens, 1)
        part = shard(b, self.rank, self.world_size)
        weight = self.world_size / n_global
        if len(part.index) == 0:  # fewer rows than ranks: run row 0 at weight 0, so that DDP
            part, weight = shard(b, 0, len(b.index)), 0.0  # sees a forward and a backward
        part = part.to(self.device)
        logits = ddp_model(part.src, part.src_len, part.tgt_in).logits  # (b, T, V)
        total = F.cross_entropy(
            logits.flatten(0, 1),
            part.tgt_out.flatten(),
            ignore_index=0,
            reduction="sum",
            label_smoothing=label_smoothing,
        )
        return total * weight

    def mean_loss(self, loss: Tensor) -> float:
        """The global batch's token-mean loss from each rank's ``loss`` (for logging)."""
        t = loss.detach().clone()
        torch_dist.all_reduce(t)
        return float(t) / self.world_size

    def any(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on some rank (keeps stopping in step)."""
        t = torch.tensor([int(flag)], device=self.device)
        torch_dist.all_reduce(t, op=torch_dist.ReduceOp.MAX)
        return bool(t.item())

    def orphaned(self) -> bool:
        """Whether the torchrun that started this rank is gone (this process was re-parented):
        without it nobody would stop the ranks, which run in sessions of their own."""
        return self.parent is not None and os.getppid() != self.parent

    def stop_together(self, stop: bool) -> bool:
        """True on every rank when some rank wants to stop after this update (Ctrl-C, SIGTERM,
        torchrun gone): all ranks then leave after the same update, none waits in a
        collective for a rank that has left."""
        return self.any(stop or self.orphaned())

    def from_main(self, *values: float) -> list[float]:
        """Rank 0's ``values`` on every rank (validation scores decide early stopping)."""
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        torch_dist.broadcast(t, src=0)
        return [float(v) for v in t.tolist()]


def backend_for(device: str) -> str:
    if device.startswith("cuda"):
        if not torch_dist.is_nccl_available():
            raise ValueError("distributed CUDA training needs NCCL; this torch has none")
        return "nccl"
    if not torch_dist.is_gloo_available():
        raise ValueError("distributed CPU training needs gloo; this torch has none")
    return "gloo"


@contextmanager
def process_group(
    device: str, log: Callable[[str], None] | None = None
) -> Iterator[DistContext | None]:
    """Initialise the process group when WORLD_SIZE > 1 (else yield None) and destroy it on
    the way out. ``device`` is "cpu" or "cuda"; on CUDA each rank takes the GPU of its
    LOCAL_RANK. ``log`` (default: standard error) hears what a process started without
    torchrun waits for. The rendezvous and every collective are bounded; running out of time,
    or a rank that left, is a ``TimeoutError`` / ``ConnectionError`` of one line."""
    world = world_from_env()
    if world is None:
        yield None
        return
    if not torch_dist.is_available():
        raise ValueError("this torch build has no torch.distributed; run without torchrun")
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    backend = backend_for(device)
    if device.startswith("cuda"):
        if world.local_rank >= torch.cuda.device_count():
            raise ValueError(
                f"LOCAL_RANK={world.local_rank} but only {torch.cuda.device_count()} GPU(s); "
                "start at most that many processes per node"
            )
        dev = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    parent = _watch_parent() if "TORCHELASTIC_RUN_ID" in os.environ else None
    collective = _env.collective_timeout()
    _rendezvous(world, backend, os.environ, _env.rendezvous_timeout(), log)
    _set_collective_timeout(collective)
    sigterm = _sigterm_as_interrupt() if parent is not None else None
    try:
        yield DistContext(world, backend, dev, parent)
    except RuntimeError as err:  # gloo says a timeout or a lost peer with a RuntimeError
        lost = peer_lost(err, world, collective)
        if lost is None:
            raise
        raise lost from err
    finally:
        if sigterm is not None:
            signal.signal(signal.SIGTERM, sigterm)
        torch_dist.destroy_process_group()


def leaked(env: Mapping[str, str]) -> bool:
    """WORLD_SIZE without torchrun's own variables: set by hand, or leaked from a shell that
    once ran a distributed job."""
    return not any(name in env for name in TORCHRUN_VARIABLES)


def waiting_line(world: World, env: Mapping[str, str], seconds: float) -> str:
    """What a process started without torchrun says before it waits for its peers."""
    where = f"MASTER_ADDR={env.get('MASTER_ADDR')}, MASTER_PORT={env.get('MASTER_PORT')}"
    others = world.world_size - 1
    return (
        f"waiting up to {seconds:g} s for {others} more process{'es' * (others > 1)} "
        f"(WORLD_SIZE={world.world_size}, RANK={world.rank}, {where}); {_leaked_hint()}"
    )


def _leaked_hint() -> str:
    return (
        "neither TORCHELASTIC_RUN_ID nor LOCAL_RANK is set, so this was not started by torchrun: "
        "unset WORLD_SIZE and RANK if you did not mean a distributed run"
    )


def _master(env: Mapping[str, str]) -> tuple[str, int]:
    """MASTER_ADDR and MASTER_PORT, named when missing or not a port."""
    hint = f"; {_leaked_hint()}" if leaked(env) else ""
    addr, port = env.get("MASTER_ADDR", "").strip(), env.get("MASTER_PORT", "").strip()
    if not addr or not port:
        missing = " and ".join(
            n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if not v
        )
        raise ValueError(f"WORLD_SIZE={env['WORLD_SIZE']} but {missing} is not set{hint}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"MASTER_PORT={port!r} is not a port number (1 to 65535){hint}")
    return addr, int(port)


def _rendezvous(
    world: World,
    backend: str,
    env: Mapping[str, str],
    seconds: float,
    log: Callable[[str], None],
) -> None:
    """init_process_group, given up after ``seconds`` with one line. A rank that connects to
    another's store first waits for its port to open (torch's own connection attempts write a
    C++ stack to standard error at every retry)."""
    addr, port = _master(env)
    hint = (
        _leaked_hint() if leaked(env) else "start every rank, or raise ATTNKIT_RENDEZVOUS_TIMEOUT"
    )
    if leaked(env):
        log(waiting_line(world, env, seconds))
    deadline = time.monotonic() + seconds
    hosts_store = world.rank == 0 and env.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    gave_up = (
        f"no distributed rendezvous after {seconds:g} s: RANK={world.rank} of "
        f"WORLD_SIZE={world.world_size} waited at {addr}:{port}"
    )
    if not hosts_store and not _port_opens(addr, port, deadline):
        raise TimeoutError(f"{gave_up}, where nothing listens; {hint}")
    left = max(deadline - time.monotonic(), 1.0)
    try:
        torch_dist.init_process_group(
            backend, rank=world.rank, world_size=world.world_size, timeout=timedelta(seconds=left)
        )
    except torch_dist.DistError as err:  # DistStoreError, DistNetworkError: said in one line
        said = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise TimeoutError(f"{gave_up} ({said}); {hint}") from err


def _port_opens(addr: str, port: int, deadline: float) -> bool:
    """Whether a TCP connection to ``addr:port`` succeeds before ``deadline`` (monotonic)."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            with socket.create_connection((addr, port), timeout=min(left, 1.0)):
                return True
        except OSError:
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0.0)))


def _set_collective_timeout(seconds: float) -> None:
    """Every later collective of the default group waits at most ``seconds`` (the rendezvous
    ran under its own, shorter timeout)."""
    from torch.distributed import distributed_c10d

    set_timeout = getattr(distributed_c10d, "_set_pg_timeout", None)
    if set_timeout is None:  # torch without it: collectives keep the rendezvous timeout
        return
    set_timeout(timedelta(seconds=seconds))


def peer_lost(err: BaseException, world: World, seconds: float) -> OSError | None:
    """The one-line error for a collective that timed out or lost a peer (gloo's messages),
    else None."""
    text = str(err)
    who = f"rank {1 - world.rank}" if world.world_size == 2 else "another rank"
    me = f"rank {world.rank} of {world.world_size}"
    if "Timed out" in text or "timed out" in text:
        return TimeoutError(
            f"{me}: {who} stopped answering for {seconds:g} s (stopped with SIGSTOP or "
            "Ctrl-Z, hung, or its machine went away): continue it (kill -CONT PID) or stop the "
            "job and restart it with --resume; ATTNKIT_COLLECTIVE_TIMEOUT sets the wait"
        )
    if "Connection closed by peer" in text or "Connection reset by peer" in text:
        return ConnectionError(
            f"{me}: {who} left the job mid-run (its own error, if any, is above): "
            "restart the job with --resume"
        )
    return None


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _watch_parent() -> int:
    """Ask Linux to send SIGTERM when our parent (torchrun) dies, and return its pid. Also
    stops at once when torchrun died before the request was made (we were re-parented): seen
    as a parent of pid 1 or a change of parent, and, under ``attnkit train --nproc-per-node``
    (which names its pid in ``ATTNKIT_LAUNCHER_PID``), as any parent but the launcher, which
    also catches a re-parenting to a subreaper before this process first looked."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    launcher = os.environ.get("ATTNKIT_LAUNCHER_PID", "")
    if launcher.isdigit() and os.getppid() != int(launcher):
        raise ValueError("the attnkit launcher that started this rank has exited; nothing to do")
    if parent == 1 or os.getppid() != parent:
        raise ValueError("torchrun, which started this rank, has exited; nothing to do")
    return parent


def _sigterm_as_interrupt() -> signal.Handlers | Callable[..., object] | int | None:
    """Under torchrun, SIGTERM (torchrun passing on a signal, or the parent-death signal) is
    handled as Ctrl-C is: the current SIGINT handler runs (loop.py: finish the update, save,
    exit 130). Only the first SIGTERM counts: Linux sends the parent-death signal again each
    time the rank passes from a dying thread of torchrun to the next, and a second Ctrl-C
    would stop at once, in the middle of saving ``last/`` (SIGKILL still stops a rank at
    once). Returns the previous SIGTERM handler; outside the main thread nothing changes."""
    seen = [False]

    def first_only(signum: int, frame: object) -> None:
        if not seen[0]:
            seen[0] = True
            signal.raise_signal(signal.SIGINT)

    try:
        return signal.signal(signal.SIGTERM, first_only)
    except ValueError:  # not the main thread
        return None


__all__ = [
    "DistContext", "World", "leaked", "peer_lost", "process_group", "shard", "shard_rows",
    "waiting_line", "world_from_env",
]  # fmt: skip
