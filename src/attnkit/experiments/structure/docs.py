"""The docs half of ``attnkit experiment structure``: HAN (Yang 2016) with attention pooling
against its averaging and max-pooling variants (Yang 2016, Table 2: HN-ATT, HN-AVE, HN-MAX),
feature-wise (multi-dimensional, Shen 2018) pooling, and DiSAN's directional self-attention
encoder with feature-wise pooling, on generated documents whose label one key sentence decides
(attnkit.data.docs).

Every model sees the same documents in the same order: one pass over ``steps · batch``
generated documents (exactly ``steps`` updates of ``batch`` documents), then its accuracy and
the fraction of test documents whose sentence attention peaks on the key sentence are
measured on the same held-out documents. Each run trains through ``attnkit.fit``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from ..base import Say, Tally

TASK = "docs"
# row name -> HAN options
VARIANTS: dict[str, dict[str, Any]] = {
    "han-attention": {"pool": "attention"},
    "han-mean": {"pool": "mean"},
    "han-max": {"pool": "max"},
    "han-multidim": {"pool": "multidim"},
    "han-disan": {"pool": "multidim", "encoder": "disan"},
}
SETTINGS = dict(batch=32, emb=32, hidden=32, attn=32, lr=3e-3, valid=200, test=500)
QUICK_SETTINGS = dict(batch=8, emb=8, hidden=8, attn=8, lr=3e-3, valid=8, test=16)


def fit_config(model: dict[str, Any], seed: int, steps: int, s: dict[str, Any], out: Path) -> Any:
    """The ``attnkit.fit`` config of one HAN variant: one epoch of ``steps`` batches."""
    from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig

    return FitConfig(
        data=DataConfig(
            task=TASK,
            task_seed=seed,
            train_size=steps * s["batch"],
            valid_size=s["valid"],
            test_size=s["test"],
        ),  # fmt: skip
        model=ModelConfig(
            "han", "small", {"emb": s["emb"], "hidden": s["hidden"], "attn": s["attn"], **model}
        ),  # fmt: skip
        train=TrainConfig(
            epochs=1,
            batch_size=s["batch"],
            lr=s["lr"],
            patience=0,
            seed=seed,
            save_every=0,
            progress=False,
        ),  # fmt: skip
        out=out,
        overwrite=True,
    )


def measure(seeds: list[int], steps: int, quick: bool, say: Say) -> list[dict[str, Any]]:
    """One row per (variant, seed): {"task", "model", "seed", "accuracy", "parameters",
    "seconds_per_step", "key_peak"} (key_peak None for mean and max pooling, which have no
    sentence attention)."""
    from ...tasks.docs import measure as score
    from ...train import checkpoint
    from ...train.fit import fit, prepare

    s = QUICK_SETTINGS if quick else SETTINGS
    rows = []
    tally = Tally(len(seeds) * len(VARIANTS), say)
    with tempfile.TemporaryDirectory(prefix="attnkit-structure-") as tmp:
        for seed in seeds:
            data = None
            for name, opts in VARIANTS.items():
                cfg = fit_config(opts, seed, steps, s, Path(tmp) / f"{name}-{seed}")
                data = data or prepare(cfg.data)  # the same documents for every variant
                t0 = time.perf_counter()
                result = fit(cfg, log=lambda line: None, data=data)
                seconds = time.perf_counter() - t0
                ck = checkpoint.load(result.last)
                got = score(ck.model, data.test, ck.src_vocab, ck.tgt_vocab)  # type: ignore[arg-type]
                rows.append({
                    "task": TASK, "model": name, "seed": seed,
                    "accuracy": round(got["accuracy"], 4),
                    "parameters": sum(p.numel() for p in ck.model.parameters()),
                    "seconds_per_step": round(seconds / max(result.steps, 1), 5),
                    "key_peak": round(got["key_peak"], 4) if "key_peak" in got else None,
                })  # fmt: skip
                peak = got.get("key_peak", float("nan"))
                tally(f"docs {name} seed {seed}: accuracy {got['accuracy']:.3f}, "
                      f"key_peak {peak:.3f} ({seconds:.1f}s)")  # fmt: skip
    return rows


__all__ = ["QUICK_SETTINGS", "SETTINGS", "TASK", "VARIANTS", "fit_config", "measure"]
