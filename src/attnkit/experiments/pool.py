"""Several ``attnkit.fit`` runs side by side: the experiments' shared training helper.

``train_all(configs, jobs=..., steps=..., log_dir=..., say=...)`` trains each named
``FitConfig`` (its log lines in ``log_dir/<name>.log``), ``jobs`` at a time in a process pool
of spawned processes (no fork of a process that holds torch threads), saying each run that
ends (with how many of how many, and the time) and every 30 s the steps each running one has
checkpointed; ``jobs=1`` trains them one after the other in this process, saying each as it
starts.
A pool gives the same models as the serial path: each run is seeded by its own config.
A worker whose experiment is gone (SIGKILLed alone) ends at once, recording nothing
(``die_with_parent``).
"""

from __future__ import annotations

import ctypes
import gzip
import json
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from .._alloc import keep_freed_memory
from ..train.checkpoint import find_checkpoint
from ..train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from ..train.fit import fit
from ..train.outputs import open_output, write_output
from ..train.runtime import set_threads
from .base import Pooled, Say, Seeds, Tally, option
from .evidence import journal_run

T = TypeVar("T")


def steps_done(out: Path) -> int:
    """The global step of the last resumable checkpoint in ``out`` (0 when there is none)."""
    last = find_checkpoint(out, "last", resumable=True)
    if last is None:
        return 0
    try:
        return int(json.loads((last / "train_state.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError):
        return 0


def history(run: Path) -> list[dict[str, Any]]:
    """The rows the training loop wrote to ``run/history.json``, one per epoch: ``epoch``,
    ``train_loss``, ``valid_loss``, ``valid_exact``, ``seconds``."""
    return json.loads((run / "history.json").read_text(encoding="utf-8"))


def plateau(epochs: int, best_epoch: int, patience: int) -> bool:
    """Whether a run ended on the plateau rule (the loop's early stopping): its last
    ``patience`` epochs, at least, after ``best_epoch`` (the epoch of the lowest valid loss,
    1-based) brought no lower valid loss. A run cut by the cap of epochs while still
    improving is not on a plateau."""
    return epochs - best_epoch >= patience


PLATEAU_EPS = 0.01
"""design: a run is on its plateau when its last ``patience`` validations lowered its best
valid bpc by less than 0.01 bpc; early stopping firing is the case of no lowering at all.
Fixed with the cap and patience, before any run that trains to them."""


def plateaued(curve: Sequence[float], patience: int, eps: float = PLATEAU_EPS) -> bool:
    """Whether a run's valid bpc, one per validation, ended on its plateau: more than
    ``patience`` validations, and the last ``patience`` of them lowered the best valid bpc by
    less than ``eps``. A run cut by the cap while still improving is not on its plateau."""
    if len(curve) <= patience:
        return False
    return min(curve[:-patience]) - min(curve) < eps


def runs_of(curves: Mapping[str, Sequence[Sequence[float]]], seeds: Sequence[int],
            patience: int, per_epoch: int) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
    """{arm: one summary per seed}: the updates run, the update of the lowest valid bpc
    (the weights measured), that bpc, how the run ended (early stopping, or the cap: the
    ``plateau`` rule) and whether it reached its plateau (``plateaued``). ``curves``: {arm:
    [seed][validation] valid bpc}, one validation per epoch of ``per_epoch`` updates."""
    def one(seed: int, c: Sequence[float]) -> dict[str, Any]:
        best = c.index(min(c))
        ended = "early stopping" if plateau(len(c), best + 1, patience) else "cap"
        return {"seed": seed, "updates": len(c) * per_epoch, "best_update": (best + 1) * per_epoch,
                "best_valid_bpc": min(c), "ended": ended, "plateau": plateaued(c, patience)}

    return {arm: [one(s, c) for s, c in zip(seeds, cs, strict=True)] for arm, cs in curves.items()}


def valid_bpc_curve(run: Path) -> list[float]:
    """A language-model run's learning curve: its valid bpc at each validation (one per
    epoch), from ``run/history.json`` (valid loss in nats per character / ln 2)."""
    return [round(row["valid_loss"] / math.log(2), 4) for row in history(run)]


def stop_of_epochs(run: Path, patience: int) -> tuple[int, bool]:
    """The epochs a run (a folder with ``history.json``) trained before it stopped, and
    whether it was censored: cut by the cap of epochs before ``patience`` validations passed
    without a lower valid loss."""
    losses = [row["valid_loss"] for row in history(run)]
    best = 1 + min(range(len(losses)), key=losses.__getitem__)
    return len(losses), not plateau(len(losses), best, patience)


def fit_logged(config: FitConfig, log_path: Path) -> float:
    """Train ``config`` in this process, its log lines in ``log_path`` (written to
    ``.NAME.tmp-PID`` beside it until the run ends: ``outputs.open_output``); returns seconds."""
    t0 = time.perf_counter()
    with open_output(log_path) as f:
        fit(config, log=lambda line: print(line, file=f, flush=True))
    return time.perf_counter() - t0


def _progress(configs: Mapping[str, FitConfig], steps: int | Mapping[str, int],
              finished: set[str]) -> str:  # fmt: skip
    """"3/12 trained; NAME STEP/TOTAL ...": the runs not ``finished`` that have begun (a run
    ended by early stopping is finished below its total)."""
    total = {n: steps if isinstance(steps, int) else steps[n] for n in configs}
    running = {n: steps_done(Path(c.out)) for n, c in configs.items() if n not in finished}
    shown = "  ".join(f"{n} {s}/{total[n]}" for n, s in running.items() if 0 < s < total[n])
    return f"{len(finished)}/{len(configs)} trained" + (f"; {shown}" if shown else "")


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _watch_parent(parent: int, poll: float = 0.25) -> None:
    """End this process (``os._exit``: no ``finally`` runs, so nothing is recorded) within
    ``poll`` seconds of ``parent`` being gone, seen as a change of ``os.getppid()`` (an orphan
    is re-parented to PID 1 or a subreaper); checked by a daemon thread, so between updates
    and during a validation alike."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os._exit(1)  # nobody waits for this status: the experiment is gone

    threading.Thread(target=watch, name="attnkit-parent-watch", daemon=True).start()


def die_with_parent(parent: int) -> None:
    """A pool worker's initializer: end with the experiment ``parent`` that started it. Left
    running after a ``kill -9`` of the experiment alone, a worker would train its run to the
    end and record it in the folder's manifest as the experiment's, although no experiment
    holds the folder any more. On Linux the kernel sends SIGKILL at the parent's death
    (``prctl(PR_SET_PDEATHSIG)``, fired when the thread that spawned the worker exits: the
    pool spawns its workers in ``submit``, from the experiment's main thread); everywhere a
    thread checks the parent's pid (``_watch_parent``), which also ends a worker whose parent
    died before the request was made. A SIGKILL at any instant leaves the folder's files and
    manifest consistent (outputs.py, checkpoint.py). It also keeps freed memory in the
    worker's heap, as the command line does in its own process
    (``_alloc.keep_freed_memory``)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # gone already, before the request
        os._exit(1)
    _watch_parent(parent)
    keep_freed_memory()  # as the command line does in its own process


class QuietPool(ProcessPoolExecutor):
    """A pool of ``workers`` spawned processes (no fork of a process that holds torch
    threads) that never see Ctrl-C: each starts with SIGINT blocked, so a Ctrl-C on the
    terminal reaches only this process. On Ctrl-C, or any error, in the ``with`` block the
    workers are terminated and pending jobs cancelled: the command exits 130 with one line,
    and no worker prints a traceback. A worker ends, recording nothing, when this process
    dies (``die_with_parent``)."""

    def __init__(self, workers: int) -> None:
        super().__init__(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                         initializer=die_with_parent, initargs=(os.getpid(),))  # fmt: skip

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        # workers are spawned in submit; they inherit the blocked signal (a blocked signal
        # stays pending here, and arrives once unblocked: none is lost)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return super().submit(fn, *args, **kwargs)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool | None:
        if exc_type is None:
            return super().__exit__(exc_type, exc, tb)
        for process in list((getattr(self, "_processes", None) or {}).values()):
            process.terminate()
        self.shutdown(wait=True, cancel_futures=True)
        return None


def train_all(
    configs: Mapping[str, FitConfig],
    *,
    jobs: int,
    steps: int | Mapping[str, int],
    log_dir: Path,
    say: Say,
) -> dict[str, float]:
    """Train every config (``steps`` updates each, or per name: for the progress lines),
    ``jobs`` at a time; returns wall-clock seconds per name. A failed run raises a ValueError
    naming its log."""
    if jobs < 1:
        raise ValueError(f"jobs={jobs}; it must be at least 1")
    logs = {n: log_dir / f"{n}.log" for n in configs}
    tally = Tally(len(configs), say)
    if jobs == 1:
        seconds = {}
        for n, c in configs.items():
            tally.starting(f"training {n}")
            seconds[n] = fit_logged(c, logs[n])
        return seconds
    with QuietPool(min(jobs, len(configs))) as pool:
        futures = {n: pool.submit(fit_logged, c, logs[n]) for n, c in configs.items()}
        names = {fut: n for n, fut in futures.items()}
        pending, last = set(futures.values()), time.perf_counter()
        while pending:
            timeout = max(last + 30 - time.perf_counter(), 0)
            ended, pending = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            for fut in sorted(ended, key=lambda f: list(futures).index(names[f])):
                tally(f"{names[fut]} {'failed' if fut.exception() else 'trained'}")
            if pending and time.perf_counter() - last >= 30:
                last = time.perf_counter()
                over = {n for n, f in futures.items() if f.done()}
                say(f"  [{last - tally.t0:4.0f}s] {_progress(configs, steps, over)}")
        seconds = {}
        for n, fut in futures.items():
            err = fut.exception()
            if err is not None:
                raise ValueError(f"training {n} failed ({err}); see {logs[n]}") from err
            seconds[n] = fut.result()
    return seconds


def run_each(fn: Callable[[Any], T], items: list[Any], jobs: int,
             done: Callable[[Any, T], None]) -> None:  # fmt: skip
    """``fn(item)`` for every item, ``jobs`` at a time in a ``QuietPool`` (``jobs=1``: one after
    the other in this process); ``done(item, result)`` as each result comes, in ``items``'
    order, each also kept in the open ``evidence.journal``. ``fn`` must be a module-level
    function (it is pickled to the workers)."""

    def finished(item: Any, result: T) -> None:
        journal_run(item, result)
        done(item, result)

    if jobs == 1:
        for item in items:
            finished(item, fn(item))
        return
    with QuietPool(min(jobs, len(items))) as pool:  # workers never see Ctrl-C
        futures = [pool.submit(fn, item) for item in items]
        for item, fut in zip(items, futures, strict=True):
            finished(item, fut.result())


class LMSettings(Protocol):
    """The fields of an experiment config that trains character language models on the
    generated text of ``--task lm`` (the context, extrapolation and sparse experiments)."""

    train_size: int
    valid_size: int
    test_size: int
    segment: int  # training length (characters per segment)
    dim: int
    heads: int
    layers: int
    ff: int
    epochs: int
    batch_size: int
    lr: float
    jobs: int
    threads: int


@dataclass
class LMFlags(Seeds, Pooled):
    """The flags the language-model experiments (context, extrapolation, sparse) share, with
    the same defaults; each adds its text sizes, segment length, ``ff`` and batch size."""

    dim: int = option(64, "model width")
    heads: int = option(4, "attention heads")
    layers: int = option(2, "layers")
    epochs: int = option(3, "passes over the training text (no early stopping)")
    lr: float = option(2e-3, "Adam learning rate, constant")
    seeds: int = option(3, "seeds seed, seed+1, ...: each a new text and initialisation")
    seed: int = option(0, "first seed of the text, the initialisation and the batches")


def lm_data(cfg: LMSettings, seed: int, asks: float | None = None) -> DataConfig:
    """The generated text of ``seed`` (data/lm_text.py), cut into segments of ``cfg.segment``;
    ``asks``: the chance a sentence asks its record's name back (None: the text's default)."""
    return DataConfig(task="lm", task_seed=seed, train_size=cfg.train_size,
                      valid_size=cfg.valid_size, test_size=cfg.test_size,
                      segment=cfg.segment, asks=asks)  # fmt: skip


def lm_run(cfg: LMSettings, model: str, seed: int, out: Path, *, patience: int = 0,
           asks: float | None = None, **options: Any) -> FitConfig:  # fmt: skip
    """One language model's run: ``model`` with ``cfg``'s widths (no dropout) and ``options``
    on seed ``seed``'s text, ``cfg.epochs`` epochs of ``cfg.batch_size`` segments at a
    constant ``cfg.lr``, checkpoints in ``out``; no early stopping, or with ``patience`` >= 1
    a stop after ``patience`` validations (one per epoch) without a lower valid loss, so that
    ``cfg.epochs`` is the cap (``out/best`` holds the lowest valid loss's weights)."""
    sizes = dict(dim=cfg.dim, heads=cfg.heads, layers=cfg.layers, ff=cfg.ff, dropout=0.0,
                 **options)  # fmt: skip
    return FitConfig(
        lm_data(cfg, seed, asks),
        ModelConfig(model, None, sizes),
        TrainConfig(epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, patience=patience,
                    seed=seed, valid_decode=0, progress=False),  # fmt: skip
        out=out,
        overwrite=True,
        threads=cfg.threads,
    )


def train_lms(
    cfg: LMSettings, configs: Mapping[str, FitConfig], out: Path, say: Say
) -> tuple[int, dict[str, float]]:
    """Train the language models' runs ``configs`` (``lm_run``), ``cfg.jobs`` at a time,
    their logs in ``out``, then set this process's torch threads to ``cfg.threads`` for the
    measurements; returns the updates of each run and its seconds by name."""
    segs = math.ceil((cfg.train_size - 1) / cfg.segment)
    steps = cfg.epochs * math.ceil(segs / min(cfg.batch_size, segs))
    seconds = train_all(configs, jobs=cfg.jobs, steps=steps, log_dir=out, say=say)
    set_threads(cfg.threads)
    return steps, seconds


def train_lms_to_plateau(
    cfg: LMSettings, configs: Mapping[str, FitConfig], out: Path, say: Say, patience: int
) -> tuple[int, dict[str, float], dict[str, tuple[int, bool]]]:
    """``train_lms`` of runs that stop early (``lm_run(..., patience=...)``), then where each
    stopped: the cap of updates, each run's seconds, and each run's ``stop_of_epochs`` by name."""
    steps, seconds = train_lms(cfg, configs, out, say)
    stops = {name: stop_of_epochs(Path(c.out), patience) for name, c in configs.items()}
    return steps, seconds, stops


def plateau_summary(epochs: int, steps: int, seconds: Mapping[str, float],
                    stops: Mapping[str, tuple[int, bool]], t0: float) -> dict[str, Any]:
    """The training part of a result whose runs stopped early (``train_lms_to_plateau``,
    capped at ``epochs``): the cap and updates per epoch, each run's stopping epoch, the runs
    censored at the cap, each run's seconds and the seconds since ``t0`` (``base.begin``).
    Its report says it with ``base.plateau_text``."""
    return {
        "cap_updates": steps,
        "updates_per_epoch": steps // epochs,
        "stopping_epochs": {name: stop[0] for name, stop in stops.items()},
        "censored_runs": [name for name, stop in stops.items() if stop[1]],
        "train_seconds": {n: round(s, 1) for n, s in seconds.items()},
        "total_seconds": round(time.perf_counter() - t0, 1),
    }


def generator(*key: int) -> torch.Generator:
    """A torch generator seeded by a tuple of ints (seed, stream, step ...), so that every
    batch is a pure function of its key."""
    seed = 0
    for k in key:
        seed = (seed * 1_000_003 + k) % (2**63 - 1)
    return torch.Generator().manual_seed(seed)

# -- Multi30K subsets (heads, softness) ---------------------------------------------------------

MULTI30K = Path("../shared/data/multi30k")  # from the project root, as the tests read it
"""Where the shared Multi30K data sits, from the project root."""
MULTI30K_SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr"}
"""Our split name -> the file stem of Multi30K's split."""


def _multi30k_pairs(source: Path, split: str) -> list[tuple[str, str]]:
    sides = []
    for lang in ("de", "en"):
        with gzip.open(source / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
            sides.append(f.read().splitlines())
    if len(sides[0]) != len(sides[1]):
        raise ValueError(f"{source / split}.de.gz and .en.gz differ in lines "
                         f"({len(sides[0])} vs {len(sides[1])}): the data is damaged")  # fmt: skip
    return list(zip(sides[0], sides[1], strict=True))


def write_multi30k(folder: Path, counts: Mapping[str, int], *, max_words: int = 0,
                   source: Path = MULTI30K, flags: str = "") -> dict[str, int]:  # fmt: skip
    """Write the first ``counts[name]`` pairs of each split (``MULTI30K_SPLITS``: train, val,
    test) of Multi30K task 1 (Elliott et al. 2016; ``{train,val,test_2016_flickr}.{de,en}.gz``,
    line-aligned) with at most ``max_words`` words a side (0: no limit) into ``folder`` as
    ``{train,val,test}.{de,en}``; every seed reads the same sentences. Returns the pairs each
    split kept, and how many it read to find them (``{name}_read``). FileNotFoundError
    when ``source`` is absent; ValueError when a split has fewer such pairs than asked for
    (``flags`` names the options that set the counts, for the message)."""
    if not source.is_dir():
        raise FileNotFoundError(
            f"{source} not found: the Multi30K settings read the shared data beside the "
            "project root (scripts/multi30k.sh fetches it); run from the root of a checkout "
            "that has it"
        )
    folder.mkdir(parents=True, exist_ok=True)
    kept: dict[str, int] = {}
    for name, n in counts.items():
        pairs = _multi30k_pairs(source, MULTI30K_SPLITS[name])
        short = [i for i, (de, en) in enumerate(pairs)
                 if not max_words or max(len(de.split()), len(en.split())) <= max_words]
        if len(short) < n:
            within = f" with at most {max_words} words a side" if max_words else ""
            raise ValueError(f"{source / MULTI30K_SPLITS[name]}.de.gz has {len(short)} pairs"
                             f"{within}, fewer than the {n} asked for; lower "
                             f"{flags or 'the sizes'}")
        take = short[:n]
        for k, lang in enumerate(("de", "en")):
            text = "".join(pairs[i][k] + "\n" for i in take)
            write_output(folder / f"{name}.{lang}", text)
        kept[name] = n
        kept[f"{name}_read"] = take[-1] + 1 if take else 0
    return kept


__all__ = ["PLATEAU_EPS", "LMSettings", "MULTI30K", "MULTI30K_SPLITS", "QuietPool",
           "die_with_parent", "fit_logged", "generator", "history", "lm_data", "lm_run",
           "plateau", "plateau_summary", "plateaued", "run_each", "runs_of", "steps_done",
           "stop_of_epochs", "train_all", "train_lms", "train_lms_to_plateau",
           "valid_bpc_curve", "write_multi30k"]
