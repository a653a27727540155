"""Attention over the past in forecasting: a seq2seq forecaster that attends over its input
window against the same forecaster without attention and the seasonal-naive forecast.

The claim (the study notes on attention for time series; cf. Qin et al. 2017, "A Dual-Stage
Attention-Based RNN for Time Series Prediction", and Lai et al. 2018, LSTNet, whose
"recurrent-skip" reads the value one season ago): attention lets an encoder-decoder read the
relevant past directly, so (1) it forecasts better than the same network without attention,
measured by MASE (Hyndman & Koehler 2006), and (2) its weight peaks at the seasonal lags:
the lag of the largest weight is a multiple of the true period.

Task ``series`` (attnkit.data.series): seasonal series with trend and noise, periods 12, 16
and 24 in turn, windows of 48 past values -> the next 12, split by time; or one real series
from a CSV file (``--csv FILE --column C --period P``, all its windows). Both models
(attnkit.models.forecaster, attention ``dot`` vs ``none``) are trained by ``attnkit.fit``
with the same width, data, batches, learning rate and number of updates, for each of
``runs`` seeds (data and initialisation).

Checks (thresholds fixed from the claim before any run):
* MASE: the mean over seeds of the attention model's test MASE is below the no-attention
  model's;
* peak lag: for each forecast step, the share of test windows whose peak weight lies at a
  multiple of the period ±1 step; the check holds when that share is at least HIT_SHARE (a
  majority) for more than MOST of the steps (chance is about 3/p, 12-25 % here).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from .base import Experiment, report_of
from .base import verdict as verdict_text
from .pool import train_all

MODELS = ("attention", "none")  # the forecaster's attention setting (score name, or none)
HIT_SHARE = 0.5  # a step peaks at the season when most of its windows do
MOST = 0.5  # ... for more than half of the steps


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass
class SeriesConfig:
    runs: int = _opt(3, "seeds seed, seed+1, ...: each a new data set and initialisation")
    steps: int = _opt(1000, "updates per model, the shared budget")
    batch_size: int = _opt(32, "windows per update")
    hidden: int = _opt(32, "recurrent width of both models")
    cell: str = _opt("gru", "gru | lstm")
    score: str = _opt("dot", "the attention model's score: dot, general, additive")
    read: str = _opt(
        "value", "what attention reads: value (the past value x_j) | state ([h_j; x_j])"
    )
    lr: float = _opt(3e-3, "Adam learning rate")
    valid_size: int = _opt(200, "validation windows")
    test_size: int = _opt(1000, "test windows")
    csv: str = _opt("", "a real series: CSV file with a header row (default: generated)")
    column: str = _opt(
        "", "with --csv: the column, a header name or 0-based index (default the last)"
    )
    period: int = _opt(0, "with --csv: the series' seasonal period (required)")
    seed: int = _opt(0, "first seed")
    jobs: int = _opt(2, "models trained at once, in a process pool")
    threads: int = _opt(1, "torch threads per training process")

    def __post_init__(self) -> None:
        for name in ("runs", "steps", "batch_size", "hidden", "valid_size", "test_size",
                     "jobs", "threads"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)}; it must "
                                 "be at least 1")  # fmt: skip
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"--lr {self.lr}; it must be a positive number")
        if self.score == "none":
            raise ValueError("--score none is the baseline already; pick dot, general, additive")
        ModelConfig("forecaster", "small", {"cell": self.cell, "attention": self.score,
                                            "read": self.read})  # fmt: skip
        if self.csv and self.period < 2:
            raise ValueError("--csv needs --period P (>= 2): the series' seasonal period")
        if not self.csv and (self.period or self.column):
            raise ValueError("--period and --column go with --csv FILE")

    @property
    def seeds(self) -> list[int]:
        return [self.seed + i for i in range(self.runs)]


QUICK = dict(runs=1, steps=3, batch_size=8, hidden=4, valid_size=8, test_size=16, jobs=1)


def attention_of(cfg: SeriesConfig, model: str) -> str:
    return cfg.score if model == "attention" else "none"


def train_config(cfg: SeriesConfig, model: str, seed: int, out: Path, epochs: int = 1) -> FitConfig:
    """The ``attnkit.fit`` config of one model and seed; the two models differ only in their
    attention. Generated data: one epoch of ``steps · batch_size`` windows = ``steps``
    updates."""
    return FitConfig(
        data=DataConfig(
            task="series",
            task_seed=seed,
            train_size=cfg.steps * cfg.batch_size,
            valid_size=cfg.valid_size,
            test_size=cfg.test_size,
        ),
        model=ModelConfig("forecaster", "small", {
            "hidden": cfg.hidden, "cell": cfg.cell, "attention": attention_of(cfg, model),
            "read": cfg.read}),
        train=TrainConfig(epochs=epochs, batch_size=cfg.batch_size, lr=cfg.lr, patience=0,
                          save_every=max(cfg.steps // 5, 1), seed=seed, progress=False,
                          valid_decode=0),
        out=out,
        overwrite=True,  # the experiment's own folder: a re-run replaces its models
        threads=cfg.threads,
    )  # fmt: skip


def train_argv(cfg: SeriesConfig, model: str, seed: int, out: Path) -> list[str]:
    """The ``attnkit train`` command that trains the same model (generated data)."""
    args: list[Any] = [
        "train", "--task", "series", "--task-seed", seed,
        "--train-size", cfg.steps * cfg.batch_size, "--valid-size", cfg.valid_size,
        "--test-size", cfg.test_size, "--model", "forecaster",
        "--opt", f"hidden={cfg.hidden}", "--opt", f"cell={cfg.cell}",
        "--opt", f"attention={attention_of(cfg, model)}", "--opt", f"read={cfg.read}",
        "--batch-size", cfg.batch_size, "--lr", cfg.lr, "--epochs", 1, "--patience", 0,
        "--save-every", max(cfg.steps // 5, 1), "--valid-decode", 0, "--seed", seed,
        "--threads", cfg.threads, "--no-progress", "--overwrite", "--out", out,
    ]  # fmt: skip
    return [str(a) for a in args]


def hits_by_step(weights: np.ndarray, periods: np.ndarray) -> list[float]:
    """For each forecast step, the share of windows whose peak weight lies at a multiple of
    the window's period, ±1 step. weights (N, K, W), periods (N,) -> K shares."""
    from ..viz.forecast import peak_lags

    r = peak_lags(weights) % periods[:, None]  # (N, K)
    hit = np.minimum(r, periods[:, None] - r) <= 1  # (N, K)
    return [float(x) for x in hit.mean(axis=0)]


def weight_by_lag(weights: np.ndarray, periods: np.ndarray) -> dict[str, list[float]]:
    """Mean attention weight at each lag 1 .. W+K-1 (over steps and windows), per period."""
    n, k, w = weights.shape
    out = {}
    for p in sorted(set(periods.tolist())):
        total, count = np.zeros(w + k), np.zeros(w + k)
        for h in range(1, k + 1):
            lags = w - 1 + h - np.arange(w)  # (W,)
            total[lags] += weights[periods == p, h - 1].sum(axis=0)
            count[lags] += int((periods == p).sum())
        out[str(p)] = [float(x) for x in (total[1:] / np.maximum(count[1:], 1))]
    return out


def verdict(numbers: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Failed checks and the checks' numbers, from ``{"mase": {"attention": [per seed],
    "none": [...], ...}, "hits_by_step": [share per step]}``."""
    att, none = (float(np.mean(numbers["mase"][m])) for m in MODELS)
    hits = numbers["hits_by_step"]
    steps_ok = sum(h >= HIT_SHARE for h in hits) / len(hits)
    checks = {
        "mase_attention": round(att, 4),
        "mase_none": round(none, 4),
        "attention_beats_none": att < none,
        "steps_peaking_at_season": round(steps_ok, 4),
        "peaks_at_season": steps_ok > MOST,
        "thresholds": {"hit_share": HIT_SHARE, "most_steps": MOST},
    }
    reasons = []
    if not att < none:
        reasons.append(f"attention MASE {att:.3f} is not below no-attention MASE {none:.3f}")
    if not steps_ok > MOST:
        reasons.append(f"only {steps_ok:.0%} of the forecast steps peak at a multiple of the "
                       f"period in >= {HIT_SHARE:.0%} of windows (need > {MOST:.0%})")  # fmt: skip
    return reasons, checks


def csv_data(cfg: SeriesConfig, seed: int) -> Any:
    """The ``Prepared`` data of a real series: all its windows, split by time. Its spec names
    the file (by name only) and its sha256 but no task, so ``attnkit evaluate``/``view``
    refuse these checkpoints rather than score them on generated data."""
    from ..data.series import read_csv, split
    from ..data.source import sha256_of
    from ..data.vocab import Vocab
    from ..train.fit import Prepared

    splits = split([read_csv(cfg.csv, cfg.column, cfg.period)], (None, None, None), seed)
    if not (splits.train and splits.valid and splits.test):
        raise ValueError(f"{cfg.csv}: too short for windows of 48+12 values in each of its "
                         "train (70 %), valid and test (15 % each) parts")  # fmt: skip
    spec = {"series_csv": Path(cfg.csv).name, "sha256": {"series_csv": sha256_of(cfg.csv)},
            "column": cfg.column, "period": cfg.period}  # fmt: skip
    return Prepared(splits, Vocab.build([]), Vocab.build([]), spec)  # type: ignore[arg-type]


def train_models(cfg: SeriesConfig, out: Path, say: Any) -> tuple[dict[str, float], dict[int, Any]]:
    """Train every (model, seed) into ``out/<model>-s<seed>``; returns seconds per run and the
    test windows of each seed."""
    from ..data.tasks import load_task

    configs, tests, seconds = {}, {}, {}
    for s in cfg.seeds:
        if cfg.csv:
            data = csv_data(cfg, s)
            epochs = math.ceil(cfg.steps / math.ceil(len(data.splits.train) / cfg.batch_size))
            for m in MODELS:
                name = f"{m}-s{s}"
                c = train_config(cfg, m, s, out / name, epochs)
                t0 = time.perf_counter()
                _fit_with(c, data, out / f"{name}.log")
                seconds[name] = time.perf_counter() - t0
            tests[s] = data.splits.test
            continue
        configs.update({f"{m}-s{s}": train_config(cfg, m, s, out / f"{m}-s{s}") for m in MODELS})
        tests[s] = load_task("series", seed=s, train_size=cfg.steps * cfg.batch_size,
                             valid_size=cfg.valid_size, test_size=cfg.test_size).test  # fmt: skip
    if configs:
        seconds = train_all(configs, jobs=cfg.jobs, steps=cfg.steps, log_dir=out, say=say)
    return seconds, tests


def _fit_with(config: FitConfig, data: Any, log_path: Path) -> None:
    from ..train.fit import fit

    with open(log_path, "w", encoding="utf-8") as f:
        fit(config, log=lambda line: print(line, file=f, flush=True), data=data)


def run_experiment(cfg: SeriesConfig, out: Path, say: Any = print) -> dict[str, Any]:
    """Train, forecast the test windows, score MASE and where attention peaks."""
    from ..data.series import HORIZON
    from ..eval.forecast import scores, seasonal_naive
    from ..families.forecast import arrays, predict
    from ..train import checkpoint

    what = cfg.csv or "generated series (periods 12, 16, 24)"
    say(f"series experiment: {what}; {cfg.steps} updates of {cfg.batch_size} for the forecaster "
        f"with {cfg.score} attention and without, seeds {cfg.seeds}; output in {out}/")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    seconds, tests = train_models(cfg, out, say)
    table: dict[str, dict[str, list[float]]] = {m: {} for m in (*MODELS, "naive")}
    params, hits, by_lag = {}, [], []
    for s, test in tests.items():
        future, past, period = arrays(test)
        rows = {"naive": scores(future, seasonal_naive(past, period, HORIZON), past, period)}
        for m in MODELS:
            ck = checkpoint.load(out / f"{m}-s{s}" / "last")
            params[m] = sum(p.numel() for p in ck.model.parameters())
            forecast, weights = predict(ck.model, test)
            rows[m] = scores(future, forecast, past, period)
            if weights is not None:
                hits.append(hits_by_step(weights, period))
                by_lag.append(weight_by_lag(weights, period))
        for m, r in rows.items():
            for k, v in r.items():
                table[m].setdefault(k, []).append(round(v, 4))
    numbers = {"mase": {m: table[m]["mase"] for m in table},
               "hits_by_step": [round(float(x), 4) for x in np.mean(hits, axis=0)]}  # fmt: skip
    reasons, checks = verdict(numbers)
    lag_mean = {p: [round(float(np.mean([b[p][i] for b in by_lag])), 5)
                    for i in range(len(by_lag[0][p]))] for p in by_lag[0]}  # fmt: skip
    return {
        "config": asdict(cfg),
        "seeds": cfg.seeds,
        "parameters": params,
        "updates": cfg.steps,
        "train_commands": {} if cfg.csv else {
            f"{m}-s{s}": " ".join(["attnkit", *train_argv(cfg, m, s, out / f"{m}-s{s}")])
            for s in cfg.seeds for m in MODELS},
        "train_seconds": {n: round(v, 1) for n, v in seconds.items()},
        "total_seconds": round(time.perf_counter() - t0, 1),
        "test_windows": len(next(iter(tests.values()))),
        "scores": table,
        "hits_by_step": numbers["hits_by_step"],
        "weight_by_lag": lag_mean,
        "checks": checks,
        "verdict": verdict_text(reasons),
    }  # fmt: skip


EXPERIMENT = Experiment(
    name="series",
    help="forecasting: attention over the input window vs none vs seasonal naive (MASE)",
    typical="a few min idle (122 s of CPU); 16.5 min on a busy 2-core CPU",
    description="Train the forecaster with and without attention (same width, data and "
    "updates, several seeds) on seasonal series with trend and noise (or --csv FILE), score "
    "MASE/MAE/RMSE on the test windows beside the seasonal-naive forecast, and check that "
    "attention beats no attention on MASE and that its peak weight lies at a multiple of the "
    "period. Writes OUT/series.{csv,json,png}, an example heatmap and the checkpoints.",
    config=SeriesConfig,
    quick=QUICK,
    run=run_experiment,
    report=report_of("series_report"),
)

__all__ = [
    "EXPERIMENT",
    "MODELS",
    "QUICK",
    "SeriesConfig",
    "hits_by_step",
    "run_experiment",
    "train_argv",
    "train_config",
    "verdict",
    "weight_by_lag",
]
