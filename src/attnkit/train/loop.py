"""The training loop: Adam, teacher forcing, gradient clipping, validation every epoch, the
stopping rules of stopping.py, resumable checkpoints, a tqdm progress bar on a terminal and
progress lines (loss, updates/s, the epoch's ETA) in a log (../_progress.py). Seeded and
deterministic on CPU: a run killed and resumed with ``resume=True`` ends with the same
parameters as one never stopped. Ctrl-C finishes the current update, writes ``last/`` and
``history.json``, then raises KeyboardInterrupt (the CLI exits 130).

    train(...)          epochs of: train_epoch -> validate -> record -> after_epoch rules
    train_step(...)     one update
    validate(...)       valid loss and greedy exact match

The update and the loop over an epoch's updates are the core it shares with classify.py's
``fit_classifier`` (updates.py).

Legend: B batch, T target length, V target vocabulary.
"""

from __future__ import annotations

import json
import math
import random
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from .._progress import Progress, lines_wanted
from ..data.batching import Batch
from ..data.vocab import Vocab
from ..models import Seq2Seq
from ..models.softness import softness_of
from ..tasks.family import Family
from ..tasks.translate import TRANSLATE
from . import checkpoint, stopping
from .config import TrainConfig
from .distributed import DistContext
from .updates import run_updates, update

Log = Callable[[str], None]


@dataclass
class TrainResult:
    epochs_run: int
    steps: int
    best_valid_loss: float
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str = stopping.EPOCHS
    out: Path | None = None
    parameters: int = 0


@dataclass
class LoopState:
    """Everything besides parameters and optimiser that a resumed run needs (train_state.json)."""

    epoch: int = 0  # completed epochs
    step_in_epoch: int = 0
    global_step: int = 0
    best_valid: float = math.inf
    bad_epochs: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


def loss_of(model: Seq2Seq, b: Batch, label_smoothing: float = 0.0) -> tuple[torch.Tensor, Any]:
    """The translate family's training loss (tasks/translate.py), kept here for its callers."""
    return TRANSLATE.loss_of(model, b, label_smoothing)


@torch.no_grad()
def valid_loss(model: torch.nn.Module, data: Sequence[Any], fam: Family = TRANSLATE) -> float:
    """Mean validation loss per unit (target token, example, ...) over ``data``: plain
    cross-entropy for translation (the family without ``fam``), no label smoothing and no
    training-only terms."""
    model.eval()
    total, count = 0.0, 0
    for b in data:
        part, n = fam.eval_loss(model, b)
        total, count = total + part, count + n
    return total / max(count, 1)


def epoch_rng(seed: int, epoch: int) -> random.Random:
    return random.Random(seed * 1_000_003 + epoch)


class Diverged(ValueError):
    """The loss or the parameters stopped being finite: nothing more is saved."""


def diverged(what: str, step: int, cfg: TrainConfig, out: Path, total: int = 0) -> Diverged:
    """Say what stopped being finite, when (of ``total`` updates), and where the last good
    checkpoint is."""
    kept = checkpoint.find_checkpoint(out, "last")
    known = cfg.lr_decay == "none" or total > cfg.warmup  # else the schedule is not set yet
    lr = cfg.lr_at(max(step, 1), total) if known else cfg.lr
    return Diverged(
        f"training diverged: {what} at update {step} (lr {lr:g}); lower "
        "--lr, keep --clip on, or add --warmup. "
        + (f"The last good checkpoint is {kept}" if kept else "No checkpoint was saved")
    )


def all_finite(model: torch.nn.Module) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


@dataclass
class Trainer:
    """The parts one update needs: model (and its DDP wrapper), optimiser, settings."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    cfg: TrainConfig
    dist: DistContext | None = None
    ddp: torch.nn.Module | None = None
    out: Path = Path(".")  # the run folder (for messages)
    family: Family = TRANSLATE
    total_steps: int = 0  # the cap, epochs x batches an epoch (lr_decay's end); set by train


def train_step(t: Trainer, b: Batch, step: int) -> float:
    """Update ``step`` (1-based) on batch ``b``: lr schedule, loss, backward, clipping, Adam.
    Returns the batch's token-mean loss (averaged over ranks)."""
    t.model.train()
    for group in t.opt.param_groups:
        group["lr"] = t.cfg.lr_at(step, t.total_steps)
    ls = t.cfg.label_smoothing
    if t.dist is None or t.ddp is None:
        loss = t.family.loss_of(t.model, b, ls)[0]
    else:
        loss = t.dist.loss(t.ddp, b, ls)
    update(t.model, t.opt, loss, t.cfg.clip)
    return float(loss.detach()) if t.dist is None else t.dist.mean_loss(loss)


@dataclass(frozen=True)
class Validation:
    loss: float
    exact: float | None  # None when no sentence was decoded


def validate(
    t: Trainer,
    valid_batches: Sequence[Any],
    valid_data: list[Any],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
) -> Validation:
    """Valid loss, and the family's score (greedy exact match for translation) on the first
    ``valid_decode`` examples. Under DDP, rank 0's numbers are used by every rank, so all
    stop together."""
    vl = valid_loss(t.model, valid_batches, t.family)
    shown = valid_data if t.cfg.valid_decode < 0 else valid_data[: t.cfg.valid_decode]
    em = t.family.score(t.model, shown, src_vocab, tgt_vocab) if shown else None
    if t.dist is not None:
        vl, em_main = t.dist.from_main(vl, -1.0 if em is None else em)
        em = None if em_main < 0 else em_main
    return Validation(vl, em)


@contextmanager
def deferred_interrupt() -> Iterator[list[bool]]:
    """Ctrl-C sets a flag (checked after each update) instead of raising mid-update; a second
    Ctrl-C raises at once. Outside the main thread signals cannot be caught: nothing changes."""
    flag = [False]

    def handler(signum: int, frame: Any) -> None:
        if flag[0]:
            raise KeyboardInterrupt
        flag[0] = True

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        yield flag
        return
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def stop_agreed(dist: DistContext | None, interrupted: list[bool]) -> bool:
    """Whether to stop after this update for a Ctrl-C (``interrupted``, set by
    ``deferred_interrupt``). Under DDP a signal reaches the ranks at different updates, so
    they agree (``stop_together``). A signal that arrives while the ranks agree stays in
    ``interrupted`` for the next update: writing the agreement back into the flag would
    lose it, and the run would go on to its end."""
    if dist is None:
        return interrupted[0]
    if dist.stop_together(interrupted[0]):
        interrupted[0] = True
        return True
    return False


def train(
    model: torch.nn.Module,
    model_name: str,
    train_data: list[Any],
    valid_data: list[Any],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    cfg: TrainConfig,
    out: str | Path,
    *,
    resume: bool = False,
    resume_from: Path | None = None,
    meta: dict[str, Any] | None = None,
    log: Log | None = None,
    dist: DistContext | None = None,
    family: Family = TRANSLATE,
) -> TrainResult:
    """Train ``model`` and write ``out/best`` (lowest valid loss), ``out/last`` (resumable)
    and ``out/history.json``. ``resume`` continues from ``resume_from`` (default: the last
    checkpoint in ``out``). With ``dist`` (see distributed.py) each global batch is split
    across the ranks and only rank 0 writes files and logs. ``family`` (tasks/family.py; ``fit``
    passes the one it resolved for the data) says how the examples batch, what the loss is and
    how validation scores them (default: translate)."""
    out = Path(out)
    if dist is not None and not family.data_parallel:
        raise ValueError(
            f"data-parallel training (--nproc-per-node, torchrun) supports translation tasks, "
            f"not {family.name} tasks; train in one process"
        )
    softness = softness_of(model)  # models/softness.py; soft where the model has none
    if dist is not None and not softness.data_parallel:  # distributed.py's loss: cross-entropy
        raise ValueError(
            f"data-parallel training (--nproc-per-node, torchrun) takes models trained on plain "
            f"cross-entropy; this one trains with {softness.name} attention's own loss: train it "
            "in one process"
        )
    main = dist is None or dist.is_main
    log = (log or (lambda s: print(s, file=sys.stderr))) if main else (lambda s: None)
    meta = {**(meta or {}), "train": asdict(cfg)}
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    state = LoopState()
    if resume:
        state = _restore(out, resume_from, model, opt, log)
    t = Trainer(model, opt, cfg, dist, None if dist is None else dist.wrap(model), out, family)
    valid_batches = family.batches(valid_data, src_vocab, tgt_vocab, cfg.batch_size, None)

    def save_last() -> None:
        if not all_finite(model):  # every rank holds the same parameters: all raise together
            raise diverged("a parameter became NaN or inf", state.global_step, cfg, out,
                           t.total_steps)  # fmt: skip
        if main:
            checkpoint.save(
                out / "last", model, model_name, src_vocab, tgt_vocab,
                meta=meta, optimizer=opt, train_state=asdict(state),
            )  # fmt: skip

    def save_history() -> None:
        if main:
            checkpoint.write_text(out / "history.json", json.dumps(state.history, indent=1))

    start = time.perf_counter()
    stopped = stopping.EPOCHS if state.epoch >= cfg.epochs else None
    with deferred_interrupt() as interrupted:
        while stopped is None:
            stopped, run_loss = _train_epoch(
                t, state, train_data, src_vocab, tgt_vocab, start, interrupted, save_last, log
            )
            if stopped == stopping.INTERRUPTED:
                save_last()
                save_history()
                log(f"interrupted at step {state.global_step}: saved {out / 'last'}")
                raise KeyboardInterrupt
            v = validate(t, valid_batches, valid_data, src_vocab, tgt_vocab)
            if not math.isfinite(v.loss):
                raise diverged(f"the validation loss is {v.loss}", state.global_step, cfg, out,
                               t.total_steps)  # fmt: skip
            seconds = time.perf_counter() - start
            improved = _record(state, run_loss, v, seconds, log, family.score_name)
            if improved and main:
                checkpoint.save(
                    out / "best", model, model_name, src_vocab, tgt_vocab,
                    meta={**meta, "epoch": state.epoch + 1, "valid_loss": v.loss,
                          "valid_exact": v.exact or 0.0},
                )  # fmt: skip
            if stopped is None:  # the epoch ran to its end
                state.epoch, state.step_in_epoch = state.epoch + 1, 0
                progress = stopping.EpochProgress(state.epoch, state.bad_epochs, v.exact)
                stopped = stopping.after_epoch(cfg, progress)
            save_last()
            save_history()
    return TrainResult(
        len(state.history),
        state.global_step,
        state.best_valid,
        state.history,
        time.perf_counter() - start,
        stopped,
        out,
        sum(p.numel() for p in model.parameters()),
    )


def _restore(
    out: Path,
    resume_from: Path | None,
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    log: Log,
) -> LoopState:
    source = resume_from or checkpoint.find_checkpoint(out, "last", resumable=True)
    if source is None:
        log(f"--resume: nothing to resume in {out}; starting fresh")
        return LoopState()
    raw = checkpoint.load_training(source, model, opt)
    raw.pop("optimizer", None)
    state = LoopState(**{k: raw[k] for k in asdict(LoopState()) if k in raw})
    log(f"resuming from {source} at epoch {state.epoch + 1}, step {state.step_in_epoch}")
    return state


def _train_epoch(
    t: Trainer,
    state: LoopState,
    train_data: list[Any],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    start: float,
    interrupted: list[bool],
    save_last: Callable[[], None],
    log: Log,
) -> tuple[str | None, float]:
    """The updates of epoch ``state.epoch`` from ``state.step_in_epoch`` on. Returns the reason
    to stop early (time limit, interrupted; None when the epoch ran to its end) and the running
    training loss. Progress: a bar on a terminal, else a line to ``log`` every
    ``cfg.report_every`` updates or ``cfg.report_seconds``."""
    cfg, main = t.cfg, t.dist is None or t.dist.is_main
    rng = epoch_rng(cfg.seed, state.epoch)
    train_batches = t.family.batches(train_data, src_vocab, tgt_vocab, cfg.batch_size, rng)
    t.total_steps = cfg.epochs * len(train_batches)  # every epoch has as many batches
    desc = f"epoch {state.epoch + 1}/{cfg.epochs}"
    lines = cfg.progress and main and lines_wanted()
    bar = tqdm(
        total=len(train_batches),
        initial=state.step_in_epoch,
        desc=desc,
        disable=not (cfg.progress and main) or lines,  # no bar in logs: lines instead
        leave=False,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    report = Progress(desc, unit="updates", total=len(train_batches), done=state.step_in_epoch,
                      every=cfg.report_every, seconds=cfg.report_seconds, log=log)  # fmt: skip
    tokens, t0, run_loss = 0, time.perf_counter(), 0.0

    def after(i: int, lv: float, b: Any) -> str | None:
        nonlocal tokens, run_loss
        if not math.isfinite(lv):  # already on the host; under DDP the mean over ranks
            raise diverged(f"the training loss is {lv}", state.global_step + 1, cfg, t.out,
                           t.total_steps)  # fmt: skip
        state.step_in_epoch, state.global_step = i + 1, state.global_step + 1
        run_loss = 0.9 * run_loss + 0.1 * lv if i else lv
        tokens += b.tokens
        bar.set_postfix(loss=f"{run_loss:.3f}", tok_s=f"{tokens / (time.perf_counter() - t0):.0f}")
        bar.update(1)
        if lines:
            report.update(loss=f"{run_loss:.3f}")
        if cfg.save_every and state.global_step % cfg.save_every == 0:
            save_last()
        reason = stopping.within_step(cfg, time.perf_counter() - start)
        if t.dist is not None and cfg.time_limit:  # every rank stops after the same step
            reason = stopping.TIME_LIMIT if t.dist.any(reason is not None) else None
        if stop_agreed(t.dist, interrupted):
            reason = stopping.INTERRUPTED
        return reason

    reason = run_updates(
        state.step_in_epoch,
        len(train_batches),
        train_batches.__getitem__,
        lambda i, b: train_step(t, b, state.global_step + 1),
        after,
    )
    bar.close()
    return reason, run_loss


def _record(
    state: LoopState,
    train_loss: float,
    v: Validation,
    seconds: float,
    log: Log,
    score_name: str = "exact",
) -> bool:
    """Append this epoch's history row; True when the valid loss improved."""
    row = {
        "epoch": state.epoch + 1,
        "train_loss": round(train_loss, 4),
        "valid_loss": round(v.loss, 4),
        "valid_exact": round(v.exact or 0.0, 4),
        "seconds": round(seconds, 1),
    }
    state.history.append(row)
    improved = v.loss < state.best_valid
    if improved:
        state.best_valid, state.bad_epochs = v.loss, 0
    else:
        state.bad_epochs += 1
    exact = f"valid {score_name} {100 * v.exact:.1f}%  " if v.exact is not None else ""
    log(
        f"epoch {row['epoch']}: train loss {row['train_loss']:.3f}  valid loss {v.loss:.3f}  "
        f"{exact}({row['seconds']:.0f}s){'  *' if improved else ''}"
    )
    return improved


__all__ = [
    "LoopState",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "loss_of",
    "train",
    "train_step",
    "valid_loss",
    "validate",
]
