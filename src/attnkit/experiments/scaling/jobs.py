"""The scaling experiment's models: attnkit's Transformer trained by ``attnkit.fit`` with
``score="scaled_dot"`` and ``score="dot"`` at each width and seed, stopped early on the
validation loss, then scored (best checkpoint) on the test set, per example, and probed for
its trained queries and keys (see scaling.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from ..base import Say
from .config import SCORES, ScalingConfig, parse_widths, run_name
from .measure import capture, trained_stats


def fit_config(
    cfg: ScalingConfig, heads: int, d_k: int, score: str, seed: int, out: Path
) -> FitConfig:
    """The ``attnkit.fit`` config of one model; the two scores' configs differ only in
    ``score``. An epoch of ``epoch_steps · batch_size`` generated pairs = ``epoch_steps``
    updates, then a validation; at most ``steps / epoch_steps`` epochs, stopped after
    ``patience`` validations without a lower loss (``best/`` keeps the lowest)."""
    dim = heads * d_k
    options = dict(dim=dim, heads=heads, ff=2 * dim, enc_layers=cfg.layers, dec_layers=cfg.layers,
                   dropout=0.0, score=score)  # fmt: skip
    return FitConfig(
        data=DataConfig(
            task=cfg.task,
            task_seed=seed,
            min_len=cfg.min_len,
            max_len=cfg.max_len,
            train_size=cfg.epoch_steps * cfg.batch_size,
            valid_size=cfg.valid_size,
            test_size=cfg.test_size,
        ),
        model=ModelConfig("transformer", "tiny", options),
        train=TrainConfig(
            epochs=cfg.steps // cfg.epoch_steps,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            patience=cfg.patience,
            seed=seed,
            valid_decode=0,
            progress=False,
        ),
        out=out,
        overwrite=True,  # the experiment's own folder: a re-run replaces its models
        threads=cfg.threads,
    )


def train_all(cfg: ScalingConfig, out: Path, say: Say) -> dict[str, float]:
    """Train every (width, score, seed) into ``out/<name>``, ``cfg.jobs`` at a time; seconds
    each."""
    from .. import pool

    configs = {
        run_name(h, d, s, seed): fit_config(cfg, h, d, s, seed, out / run_name(h, d, s, seed))
        for seed in cfg.seed_list
        for h, d in parse_widths(cfg.widths)
        for s in SCORES
    }
    return pool.train_all(configs, jobs=cfg.jobs, steps=cfg.steps, log_dir=out, say=say)


@torch.no_grad()
def example_losses(model: torch.nn.Module, batch: Any) -> list[float]:
    """Each example's mean token cross-entropy, teacher forced (as the valid loss, per example)."""
    model.eval()
    logits = model(batch.src, batch.src_len, batch.tgt_in).logits  # (B, T, V)
    nll = F.cross_entropy(logits.transpose(1, 2), batch.tgt_out, ignore_index=0,
                          reduction="none")  # (B, T)
    return (nll.sum(1) / (batch.tgt_out != 0).sum(1)).tolist()


def evaluate(cfg: ScalingConfig, out: Path) -> list[dict[str, Any]]:
    """Per trained model (best checkpoint): parameters, updates made, best valid loss, the
    test loss of each example, greedy test BLEU and exact match, and the softmax statistics
    of its own q, k scored both ways (b)."""
    from ...data.batching import make_batch
    from ...data.tasks import load_task
    from ...decode import translate
    from ...eval.text import score
    from ...train import checkpoint

    rows = []
    for seed in cfg.seed_list:
        data = load_task(cfg.task, seed=seed, train_size=cfg.epoch_steps * cfg.batch_size,
                         valid_size=cfg.valid_size, test_size=cfg.test_size,
                         min_len=cfg.min_len, max_len=cfg.max_len)  # fmt: skip
        for h, d in parse_widths(cfg.widths):
            for s in SCORES:
                run = out / run_name(h, d, s, seed)
                ck = checkpoint.load(run / "best")
                hist = _history(run, cfg.patience)
                test = score(translate(ck.model, data.test, ck.src_vocab, ck.tgt_vocab).hyps,
                             data.test)  # fmt: skip
                tb = make_batch(data.test, list(range(len(data.test))), ck.src_vocab,
                                ck.tgt_vocab)  # fmt: skip
                b = make_batch(data.valid, list(range(len(data.valid))), ck.src_vocab,
                               ck.tgt_vocab)  # fmt: skip
                stats = trained_stats(capture(ck.model, b.src, b.src_len, b.tgt_in), seed)
                rows.append({
                    "heads": h, "d_k": d, "score": s, "seed": seed,
                    "parameters": sum(p.numel() for p in ck.model.parameters()),
                    "updates": hist["global_step"], "valid_loss": hist["valid_loss"],
                    "censored": hist["censored"],
                    "test_losses": example_losses(ck.model, tb),
                    "test_bleu": round(test.bleu, 2),
                    "test_exact": round(100 * test.exact_match, 2),
                    "qk": stats,
                })  # fmt: skip
    return rows


def _history(run: Path, patience: int) -> dict[str, Any]:
    """The lowest valid loss of ``run/history.json``, the updates made (to the stop) and
    whether the run was censored: cut by the cap before ``patience`` validations passed
    without a lower valid loss."""
    from ..pool import plateau

    hist = json.loads((run / "history.json").read_text("utf-8"))
    rows = hist["history"] if isinstance(hist, dict) else hist
    losses = [r["valid_loss"] for r in rows]
    best = 1 + min(range(len(losses)), key=losses.__getitem__)
    state = json.loads((run / "last" / "train_state.json").read_text("utf-8"))
    return {"valid_loss": min(losses), "global_step": int(state["global_step"]),
            "censored": patience > 0 and not plateau(len(losses), best, patience)}


__all__ = ["evaluate", "example_losses", "train_all", "fit_config"]
