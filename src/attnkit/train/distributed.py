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

Legend: B global batch, b rows of one rank, S source length, T target length, V vocabulary.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from ..data.batching import Batch


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
def process_group(device: str) -> Iterator[DistContext | None]:
    """Initialise the process group when running under torchrun (else yield None) and destroy
    it on the way out. ``device`` is "cpu" or "cuda"; on CUDA each rank takes the GPU of its
    LOCAL_RANK."""
    world = world_from_env()
    if world is None:
        yield None
        return
    if not torch_dist.is_available():
        raise ValueError("this torch build has no torch.distributed; run without torchrun")
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
    torch_dist.init_process_group(backend, rank=world.rank, world_size=world.world_size)
    try:
        yield DistContext(world, backend, dev)
    finally:
        torch_dist.destroy_process_group()


__all__ = ["DistContext", "World", "process_group", "shard", "shard_rows", "world_from_env"]
