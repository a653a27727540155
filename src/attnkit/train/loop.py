"""The training loop: Adam, teacher forcing, gradient clipping, validation every epoch, early
stopping, resumable checkpoints, a tqdm progress bar. Seeded and deterministic on CPU: a run
killed and resumed with ``resume=True`` ends with the same parameters as one never stopped.

Legend: B batch, T target length, V target vocabulary.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..data.batching import Batch, batches
from ..data.example import Example
from ..data.vocab import Vocab
from ..decode import translate
from ..eval.text import exact_match
from ..models import Seq2Seq
from . import checkpoint
from .distributed import DistContext


@dataclass
class TrainConfig:
    epochs: int = 20
    batch_size: int = 64
    lr: float = 1e-3
    clip: float = 1.0  # max gradient norm; 0 = no clipping
    patience: int = 3  # epochs without a better valid loss before stopping; 0 = never stop
    seed: int = 0
    save_every: int = 0  # also checkpoint every N steps (for --resume); 0 = at epoch ends only
    time_limit: float = 0.0  # seconds; stop after the step that crosses it; 0 = none
    target_exact: float = 0.0  # stop once valid exact match reaches it; 0 = never
    warmup: int = 0  # linear warm-up steps, then lr * sqrt(warmup / step); 0 = constant lr
    label_smoothing: float = 0.0  # of the training loss; valid loss is plain cross-entropy
    valid_decode: int = -1  # valid sentences greedy-decoded per epoch (-1 all, 0 none)
    progress: bool = True
    sleep_per_step: float = 0.0  # testing aid: slow training down so it can be interrupted

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(
                f"epochs={self.epochs}, batch_size={self.batch_size}; both must be >= 1"
            )
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr}; it must be positive")
        if min(self.clip, self.patience, self.save_every, self.time_limit, self.warmup) < 0:
            raise ValueError(
                "clip, patience, save_every, time_limit and warmup must not be negative"
            )
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"label_smoothing={self.label_smoothing}; it must be in [0, 1)")
        if self.valid_decode < -1:
            raise ValueError(f"valid_decode={self.valid_decode}; use -1 (all), 0 or a count")

    def lr_at(self, step: int) -> float:
        """Learning rate of step 1, 2, ...: constant, or with ``warmup`` steps rising
        linearly to ``lr`` and then falling as 1/sqrt(step) (Vaswani 2017, eq. 3, with the
        peak given directly instead of through d_model)."""
        if not self.warmup:
            return self.lr
        return self.lr * min(step / self.warmup, math.sqrt(self.warmup / max(step, 1)))


@dataclass
class TrainResult:
    epochs_run: int
    steps: int
    best_valid_loss: float
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str = "epochs"


def loss_of(model: Seq2Seq, b: Batch, label_smoothing: float = 0.0) -> tuple[torch.Tensor, Any]:
    b = b.to(next(model.parameters()).device)
    out = model(b.src, b.src_len, b.tgt_in)
    logits = out.logits  # (B, T, V)
    loss = F.cross_entropy(
        logits.flatten(0, 1),
        b.tgt_out.flatten(),
        ignore_index=0,
        label_smoothing=label_smoothing,
    )
    return loss, out


@torch.no_grad()
def valid_loss(model: Seq2Seq, data: list[Batch]) -> float:
    model.eval()
    total, count = 0.0, 0
    device = next(model.parameters()).device
    for b in data:
        b = b.to(device)
        out = model(b.src, b.src_len, b.tgt_in)
        total += float(
            F.cross_entropy(
                out.logits.flatten(0, 1), b.tgt_out.flatten(), ignore_index=0, reduction="sum"
            )
        )
        count += b.tokens
    return total / max(count, 1)


def epoch_rng(seed: int, epoch: int) -> random.Random:
    return random.Random(seed * 1_000_003 + epoch)


def train(
    model: Seq2Seq,
    model_name: str,
    train_data: list[Example],
    valid_data: list[Example],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    cfg: TrainConfig,
    out: str | Path,
    *,
    resume: bool = False,
    meta: dict[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
    dist: DistContext | None = None,
) -> TrainResult:
    """Train ``model`` and write ``out/best`` (lowest valid loss) and ``out/last`` (resumable).
    With ``dist`` (see distributed.py) each global batch is split across the ranks and only
    rank 0 writes files and logs."""
    out = Path(out)
    main = dist is None or dist.is_main
    log = (log or (lambda s: print(s, file=sys.stderr))) if main else (lambda s: None)
    meta = {**(meta or {}), "train": asdict(cfg)}
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    state: dict[str, Any] = {
        "epoch": 0,
        "step_in_epoch": 0,
        "global_step": 0,
        "best_valid": math.inf,
        "bad_epochs": 0,
        "history": [],
    }
    if resume:
        if (out / "last").exists() or (out / ".last.old").exists():
            state = checkpoint.load_training(out / "last", model, opt)
            state.pop("optimizer", None)
            log(
                f"resuming from {out / 'last'} at epoch {state['epoch'] + 1}, "
                f"step {state['step_in_epoch']}"
            )
        else:
            log(f"--resume: nothing to resume in {out}; starting fresh")
    valid_batches = batches(valid_data, src_vocab, tgt_vocab, cfg.batch_size)
    ddp = None if dist is None else dist.wrap(model)

    def save_last() -> None:
        if not main:
            return
        checkpoint.save(
            out / "last",
            model,
            model_name,
            src_vocab,
            tgt_vocab,
            meta=meta,
            optimizer=opt,
            train_state=state,
        )

    start = time.perf_counter()
    stopped = "epochs"
    while state["epoch"] < cfg.epochs and stopped == "epochs":
        epoch = state["epoch"]
        train_batches = batches(
            train_data, src_vocab, tgt_vocab, cfg.batch_size, epoch_rng(cfg.seed, epoch)
        )
        bar = tqdm(
            total=len(train_batches),
            initial=state["step_in_epoch"],
            desc=f"epoch {epoch + 1}/{cfg.epochs}",
            disable=not (cfg.progress and main and sys.stderr.isatty()),  # no bar in logs
            leave=False,
            file=sys.stderr,
            dynamic_ncols=True,
        )
        tok, t0, run_loss = 0, time.perf_counter(), 0.0
        for i in range(state["step_in_epoch"], len(train_batches)):
            b = train_batches[i]
            model.train()
            for group in opt.param_groups:
                group["lr"] = cfg.lr_at(state["global_step"] + 1)
            ls = cfg.label_smoothing
            loss = (
                loss_of(model, b, ls)[0] if dist is None or ddp is None else dist.loss(ddp, b, ls)
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            opt.step()
            state["step_in_epoch"] = i + 1
            state["global_step"] += 1
            tok += b.tokens
            lv = float(loss.detach()) if dist is None else dist.mean_loss(loss)
            run_loss = 0.9 * run_loss + 0.1 * lv if i else lv
            bar.set_postfix(loss=f"{run_loss:.3f}", tok_s=f"{tok / (time.perf_counter() - t0):.0f}")
            bar.update(1)
            if cfg.sleep_per_step:
                time.sleep(cfg.sleep_per_step)
            if cfg.save_every and state["global_step"] % cfg.save_every == 0:
                save_last()
            over = bool(cfg.time_limit) and time.perf_counter() - start > cfg.time_limit
            if dist is not None and cfg.time_limit:
                over = dist.any(over)  # every rank stops after the same step
            if over:
                stopped = "time limit"
                break
        bar.close()
        vl = valid_loss(model, valid_batches)
        shown = valid_data if cfg.valid_decode < 0 else valid_data[: cfg.valid_decode]
        hyps = translate(model, shown, src_vocab, tgt_vocab, batch_size=256).hyps
        em = exact_match(hyps, [e.tgt for e in shown]) if shown else 0.0
        if dist is not None:  # rank 0's scores decide for all, so every rank stops together
            vl, em = dist.from_main(vl, em)
        row = {
            "epoch": epoch + 1,
            "train_loss": round(run_loss, 4),
            "valid_loss": round(vl, 4),
            "valid_exact": round(em, 4),
            "seconds": round(time.perf_counter() - start, 1),
        }
        state["history"].append(row)
        improved = vl < state["best_valid"]
        if improved:
            state["best_valid"], state["bad_epochs"] = vl, 0
            if main:
                checkpoint.save(
                    out / "best",
                    model,
                    model_name,
                    src_vocab,
                    tgt_vocab,
                    meta={**meta, "epoch": epoch + 1, "valid_loss": vl, "valid_exact": em},
                )
        else:
            state["bad_epochs"] += 1
        exact = f"valid exact {100 * em:.1f}%  " if shown else ""
        log(
            f"epoch {epoch + 1}: train loss {run_loss:.3f}  valid loss {vl:.3f}  "
            f"{exact}({row['seconds']:.0f}s){'  *' if improved else ''}"
        )
        if stopped == "epochs":
            state["epoch"], state["step_in_epoch"] = epoch + 1, 0
        if stopped == "epochs" and cfg.patience and state["bad_epochs"] >= cfg.patience:
            stopped = "early stopping"
        if stopped == "epochs" and cfg.target_exact and shown and em >= cfg.target_exact:
            stopped = "target exact match"
        save_last()
    if main:
        checkpoint.write_text(out / "history.json", json.dumps(state["history"], indent=1))
    return TrainResult(
        len(state["history"]),
        state["global_step"],
        state["best_valid"],
        state["history"],
        time.perf_counter() - start,
        stopped,
    )


__all__ = ["TrainConfig", "TrainResult", "train"]
