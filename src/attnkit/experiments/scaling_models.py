"""The scaling experiment's models: attnkit's Transformer trained by ``attnkit.fit`` with
``score="scaled_dot"`` and ``score="dot"`` at each width, then scored on the test set and
probed for its trained queries and keys (see scaling.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from .base import Say
from .scaling import SCORES, ScalingConfig, parse_widths, run_name
from .scaling_measure import capture, trained_stats


def train_config(cfg: ScalingConfig, heads: int, d_k: int, score: str, out: Path) -> FitConfig:
    """The ``attnkit.fit`` config of one model; the two scores' configs differ only in
    ``score``. One epoch of ``steps · batch_size`` generated pairs = exactly ``steps`` updates."""
    dim = heads * d_k
    options = dict(dim=dim, heads=heads, ff=2 * dim, enc_layers=cfg.layers, dec_layers=cfg.layers,
                   dropout=0.0, score=score)  # fmt: skip
    return FitConfig(
        data=DataConfig(
            task=cfg.task,
            task_seed=cfg.seed,
            min_len=cfg.min_len,
            max_len=cfg.max_len,
            train_size=cfg.steps * cfg.batch_size,
            valid_size=cfg.valid_size,
            test_size=cfg.test_size,
        ),
        model=ModelConfig("transformer", "tiny", options),
        train=TrainConfig(
            epochs=1,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            patience=0,
            seed=cfg.seed,
            progress=False,
        ),
        out=out,
        overwrite=True,  # the experiment's own folder: a re-run replaces its models
        threads=cfg.threads,
    )


def train_all(cfg: ScalingConfig, out: Path, say: Say) -> dict[str, float]:
    """Train every (width, score) into ``out/<name>``, ``cfg.jobs`` at a time; seconds each."""
    from . import pool

    configs = {
        run_name(h, d, s): train_config(cfg, h, d, s, out / run_name(h, d, s))
        for h, d in parse_widths(cfg.widths)
        for s in SCORES
    }
    return pool.train_all(configs, jobs=cfg.jobs, steps=cfg.steps, log_dir=out, say=say)


def evaluate(cfg: ScalingConfig, out: Path, seed: int) -> list[dict[str, Any]]:
    """Per trained model: parameters, final valid loss / exact (its history), greedy test BLEU
    and exact match, and the softmax statistics of its own q, k scored both ways (b)."""
    from ..data.batching import make_batch
    from ..data.tasks import load_task
    from ..decode import translate
    from ..eval.text import score
    from ..train import checkpoint

    data = load_task(cfg.task, seed=cfg.seed, train_size=cfg.steps * cfg.batch_size,
                     valid_size=cfg.valid_size, test_size=cfg.test_size, min_len=cfg.min_len,
                     max_len=cfg.max_len)  # fmt: skip
    rows = []
    for h, d in parse_widths(cfg.widths):
        for s in SCORES:
            ck = checkpoint.load(out / run_name(h, d, s) / "last")
            hist = _history(out / run_name(h, d, s))
            test = score(translate(ck.model, data.test, ck.src_vocab, ck.tgt_vocab).hyps, data.test)
            b = make_batch(data.valid, list(range(len(data.valid))), ck.src_vocab, ck.tgt_vocab)
            stats = trained_stats(capture(ck.model, b.src, b.src_len, b.tgt_in), seed)
            rows.append({
                "heads": h, "d_k": d, "score": s,
                "parameters": sum(p.numel() for p in ck.model.parameters()),
                "updates": hist["global_step"],
                "valid_loss": hist["valid_loss"], "valid_exact": hist["valid_exact"],
                "test_bleu": round(test.bleu, 2), "test_exact": round(100 * test.exact_match, 2),
                "qk": stats,
            })  # fmt: skip
    return rows


def _history(run: Path) -> dict[str, Any]:
    """The last epoch row of ``run/history.json`` and the updates made."""
    hist = json.loads((run / "history.json").read_text("utf-8"))
    rows = hist["history"] if isinstance(hist, dict) else hist
    state = json.loads((run / "last" / "train_state.json").read_text("utf-8"))
    return {**rows[-1], "global_step": int(state["global_step"])}


__all__ = ["evaluate", "train_all", "train_config"]
