"""Attention over the past in forecasting: an encoder-decoder forecaster that attends over its
input window against the same encoder-decoder without attention, as Qin et al. (2017)
compare them; beside them, unchecked, a forecaster handed the seasonal lag and seasonal
naive.

The claim (Qin et al. 2017, "A Dual-Stage Attention-Based Recurrent Neural Network for Time
Series Prediction", IJCAI, Table 2): an encoder-decoder with temporal attention over the
encoder states (their "Attention RNN", Bahdanau et al.'s attention over time) predicts with a
lower error than the same encoder-decoder without attention ("Encoder-Decoder"): on SML 2010
MAE 1.77 vs 1.91, RMSE 2.33 vs 2.52 (128 units). Checked here: the direction, on MASE (a
scaled MAE, Hyndman & Koehler 2006); the paper states no margin, so none is checked.

Task ``series`` (attnkit.data.series): seasonal series with trend and noise, periods 12, 16
and 24 in turn, windows of 48 past values -> the next 12, split by time; or one real series
from a CSV file (``--csv FILE --column C --period P``, all its windows). Compared, the
forecaster (attnkit.models.forecaster) of one width with ``dot`` attention over the window
and with ``attention="none"`` (the last state carries the window); reported beside them and
not checked: ``attention="seasonal"`` (no attention, but its output is handed the value one
season back, x_{W+k−m⌈k/m⌉}, with the true period m: an oracle of the series' structure),
seasonal naive, and the window-mean forecast (what a model that learnt nothing predicts).
The three networks train by ``attnkit.fit`` on the same data and batches, each stopped early
on its validation loss (``--patience`` validations of ``--epoch-steps`` updates) under the same
cap ``--steps``, for each of ``--runs`` seeds.

Checks (fixed from the claim before the verdict's seeds ran; evidence.py's contract):
* (claim) MASE of the encoder-decoder without attention − MASE of attention > 0: the
  t-interval over the per-seed gaps (each seed's mean over its test windows, the same
  windows for both arms: paired);
* (design, each compared arm) it learnt: the t-interval over seeds of the window-mean
  forecast's MASE − the arm's lies wholly above 0; an arm at the floor cannot show a gap;
* (design, each compared arm) trained to a plateau: the cap is at least 3× the median
  stopping point of its runs (a run that reaches the cap counts as the cap there, and is
  reported as censored).
The oracle's and seasonal naive's gaps to attention, and the share of forecasts whose peak
weight lies at a multiple of the period ±1 step, are reported with their intervals but judge
nothing: the paper compares neither, and sets no rate for where attention peaks.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..._checks import check_ranges
from ...train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from .. import evidence as ev
from ..base import Experiment, Pooled, begin, check_schedule, open_output, option
from ..pool import train_all

COMPARED = ("attention", "none")  # the claim's arms: attention over the window, and without
MODELS = (*COMPARED, "seasonal")  # trained; "seasonal" is handed the lag (reported, unchecked)
ARM_NAMES = {"attention": "attention", "none": "encoder-decoder without attention",
             "seasonal": "seasonal-lag oracle", "naive": "seasonal naive",
             "mean": "window mean"}  # fmt: skip


@dataclass
class SeriesConfig(Pooled):
    runs: int = option(5, "seeds seed, seed+1, ...: each a new data set and initialisation")
    steps: int = option(18000, "cap on the updates per model, the same for every model")
    epoch_steps: int = option(250, "updates between two validations (generated data)")
    patience: int = option(3, "validations without a lower valid loss before stopping")
    batch_size: int = option(32, "windows per update")
    hidden: int = option(32, "recurrent width of both models")
    cell: str = option("gru", "gru | lstm")
    score: str = option("dot", "the attention model's score: dot, general, additive")
    read: str = option(
        "value", "what attention reads: value (the past value x_j) | state ([h_j; x_j])"
    )
    lr: float = option(3e-3, "Adam learning rate")
    valid_size: int = option(200, "validation windows")
    test_size: int = option(1000, "test windows")
    csv: str = option("", "a real series: CSV file with a header row (default: generated)")
    column: str = option(
        "", "with --csv: the column, a header name or 0-based index (default the last)"
    )
    period: int = option(0, "with --csv: the series' seasonal period (required)")
    seed: int = option(10, "first seed (0-5 were used to choose the attention model)")

    def __post_init__(self) -> None:
        check_ranges(self, fractions=(), as_flags=True, positive=(
            "runs", "steps", "epoch_steps", "batch_size", "hidden", "valid_size", "test_size",
            "jobs", "threads"
        ))  # fmt: skip
        check_schedule(self)
        if self.score in ("none", "seasonal"):
            raise ValueError(f"--score {self.score} has no attention; pick dot, general, "
                             "additive (the models without attention train beside it)")  # fmt: skip
        ModelConfig("forecaster", "small", {"cell": self.cell, "attention": self.score,
                                            "read": self.read})  # fmt: skip
        if self.runs < 2:
            raise ValueError(f"--runs {self.runs}: an interval over seeds needs 2 at least "
                             "(5 for a verdict)")  # fmt: skip
        if self.csv and self.period < 2:
            raise ValueError("--csv needs --period P (>= 2): the series' seasonal period")
        if not self.csv and (self.period or self.column):
            raise ValueError("--period and --column go with --csv FILE")

    @property
    def seeds(self) -> list[int]:
        return [self.seed + i for i in range(self.runs)]


QUICK = dict(runs=2, steps=4, epoch_steps=2, batch_size=8, hidden=4, valid_size=8,
             test_size=16, jobs=1)  # fmt: skip


def attention_of(cfg: SeriesConfig, model: str) -> str:
    """The forecaster's ``attention`` option of a model of ``MODELS``."""
    return cfg.score if model == "attention" else model


def fit_config(
    cfg: SeriesConfig, model: str, seed: int, out: Path, epochs: int | None = None
) -> FitConfig:
    """The ``attnkit.fit`` config of one model and seed; the models differ only in their
    attention. Generated data: an epoch of ``epoch_steps · batch_size`` windows =
    ``epoch_steps`` updates, then a validation; at most ``steps / epoch_steps`` epochs (a CSV
    series: ``epochs`` of its windows), stopped after ``patience`` without a lower loss."""
    epochs = cfg.steps // cfg.epoch_steps if epochs is None else epochs
    return FitConfig(
        data=DataConfig(
            task="series",
            task_seed=seed,
            train_size=cfg.epoch_steps * cfg.batch_size,
            valid_size=cfg.valid_size,
            test_size=cfg.test_size,
        ),
        model=ModelConfig("forecaster", "small", {
            "hidden": cfg.hidden, "cell": cfg.cell, "attention": attention_of(cfg, model),
            "read": cfg.read}),
        train=TrainConfig(epochs=epochs, batch_size=cfg.batch_size, lr=cfg.lr,
                          patience=cfg.patience, seed=seed, progress=False, valid_decode=0),
        out=out,
        overwrite=True,  # the experiment's own folder: a re-run replaces its models
        threads=cfg.threads,
    )  # fmt: skip


def train_argv(cfg: SeriesConfig, model: str, seed: int, out: Path) -> list[str]:
    """The ``attnkit train`` command that trains the same model (generated data)."""
    args: list[Any] = [
        "train", "--task", "series", "--task-seed", seed,
        "--train-size", cfg.epoch_steps * cfg.batch_size, "--valid-size", cfg.valid_size,
        "--test-size", cfg.test_size, "--model", "forecaster",
        "--opt", f"hidden={cfg.hidden}", "--opt", f"cell={cfg.cell}",
        "--opt", f"attention={attention_of(cfg, model)}", "--opt", f"read={cfg.read}",
        "--batch-size", cfg.batch_size, "--lr", cfg.lr, "--epochs", cfg.steps // cfg.epoch_steps,
        "--patience", cfg.patience, "--valid-decode", 0, "--seed", seed,
        "--threads", cfg.threads, "--no-progress", "--overwrite", "--out", out,
    ]  # fmt: skip
    return [str(a) for a in args]


def _hits(weights: np.ndarray, periods: np.ndarray) -> np.ndarray:
    """Whether each forecast's peak weight lies at a multiple of its window's period, ±1
    step. weights (N, K, W), periods (N,) -> (N, K) booleans."""
    from ...viz.forecast import peak_lags

    r = peak_lags(weights) % periods[:, None]  # (N, K)
    return np.minimum(r, periods[:, None] - r) <= 1  # (N, K)


def hits_by_step(weights: np.ndarray, periods: np.ndarray) -> list[float]:
    """For each forecast step, the share of windows whose peak weight lies at a multiple of
    the window's period, ±1 step. weights (N, K, W), periods (N,) -> K shares."""
    return [float(x) for x in _hits(weights, periods).mean(axis=0)]


def hit_by_window(weights: np.ndarray, periods: np.ndarray) -> np.ndarray:
    """For each window, the share of its forecast steps whose peak weight lies at a multiple
    of its period, ±1 step. weights (N, K, W), periods (N,) -> (N,)."""
    return _hits(weights, periods).mean(axis=1)  # (N,)


def stop_of(run: Path, patience: int) -> tuple[int, bool]:
    """The updates a run made before it stopped, and whether it was censored: cut by the cap
    before its validation loss stayed ``patience`` validations without a new best."""
    import json

    from ..pool import history, plateau

    state = json.loads((run / "last" / "train_state.json").read_text("utf-8"))
    losses = [row["valid_loss"] for row in history(run)]
    best = 1 + min(range(len(losses)), key=losses.__getitem__)
    return int(state["global_step"]), patience > 0 and not plateau(len(losses), best, patience)


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


def mase_by_window(
    future: np.ndarray, forecast: np.ndarray, past: np.ndarray, period: np.ndarray
) -> np.ndarray:
    """Each window's MASE (the terms that ``attnkit.eval.forecast.mase`` averages): mean_k
    |y_k − ŷ_k| / naive_scale(past, m). future, forecast (N, K), past (N, W) -> (N,)."""
    from ...eval.forecast import naive_scale

    return np.abs(future - forecast).mean(axis=1) / naive_scale(past, period)  # (N,)


def seed_means(rows: list[list[float]]) -> list[float]:
    """Each seed's mean over its windows: rows [[per window] per seed] -> [per seed]."""
    return [float(np.mean(r)) for r in rows]


def gap_of(numbers: dict[str, Any], a: str, b: str) -> ev.Interval:
    """MASE of ``a`` − MASE of ``b``: the t-interval over the per-seed gaps (paired: each
    seed scores both on the same windows)."""
    m = numbers["mase"]
    return ev.t_interval([x - y for x, y in zip(seed_means(m[a]), seed_means(m[b]), strict=True)])


def learnt(numbers: dict[str, Any], arm: str) -> ev.Check:
    """The design check that ``arm`` learnt (``ev.off_floor``): the window-mean forecast's
    MASE − the arm's, its t-interval over seeds wholly above 0."""
    return ev.off_floor(f"{ARM_NAMES[arm]} learnt: window-mean MASE - its MASE",
                        gap_of(numbers, "mean", arm))  # fmt: skip


def converged(numbers: dict[str, Any], arm: str) -> ev.Check:
    """The design check that ``arm`` trained to a plateau (``ev.plateau_cap``): the cap is
    at least 3× the median of its runs' stopping points, in updates."""
    return ev.plateau_cap(f"{ARM_NAMES[arm]}: cap / median stopping point",
                          numbers["updates"][arm], numbers["cap"],
                          sum(numbers["censored"][arm]))  # fmt: skip


def checks_of(numbers: dict[str, Any]) -> list[ev.Check]:
    """The checks of the module docstring from ``{"mase": {arm: [[per window] per seed]},
    "updates": {arm: [per seed]}, "censored": {arm: [bool per seed]}, "cap": int}``; the
    arms of ``"mase"`` are ``COMPARED`` and ``"mean"`` (the window-mean forecast), each seed's
    windows the same, in the same order, for every arm. Only the compared arms are checked:
    any other arm in the numbers judges nothing."""
    claim = ev.on_interval("MASE without attention - MASE with attention",
                           gap_of(numbers, "none", "attention"), 0.0)  # fmt: skip
    design = [c for arm in COMPARED for c in (learnt(numbers, arm), converged(numbers, arm))]
    return [claim, *design]


def reported_of(numbers: dict[str, Any]) -> list[dict[str, Any]]:
    """The numbers reported beside the checks, each with its 95% t-interval over seeds, none
    judged: the seasonal-lag oracle's and seasonal naive's MASE gap to attention, and the
    share of forecasts whose peak weight lies at a multiple of the period ±1 step (from
    ``numbers["hits"]``, [[share per window] per seed])."""
    gaps = {"MASE seasonal-lag oracle - MASE attention": ("seasonal", "attention"),
            "MASE seasonal naive - MASE attention": ("naive", "attention")}  # fmt: skip
    shown = {name: gap_of(numbers, *arms) for name, arms in gaps.items()
             if arms[0] in numbers["mase"]}  # fmt: skip
    if numbers.get("hits"):
        shown["share of forecasts peaking at a multiple of the period +-1"] = ev.t_interval(
            seed_means(numbers["hits"]))
    return [{"name": n, "value": i.value, "ci": [i.lo, i.hi], "n": i.n} for n, i in shown.items()]


def csv_data(cfg: SeriesConfig, seed: int) -> Any:
    """The ``Prepared`` data of a real series: all its windows, split by time. Its spec names
    the file (by name only) and its sha256 but no task, so ``attnkit evaluate``/``view``
    refuse these checkpoints rather than score them on generated data."""
    from ...data.series import read_csv, split
    from ...data.source import sha256_of
    from ...data.vocab import Vocab
    from ...train.fit import Prepared

    splits = split([read_csv(cfg.csv, cfg.column, cfg.period)], (None, None, None), seed)
    if not (splits.train and splits.valid and splits.test):
        raise ValueError(f"{cfg.csv}: too short for windows of 48+12 values in each of its "
                         "train (70 %), valid and test (15 % each) parts")  # fmt: skip
    spec = {"series_csv": Path(cfg.csv).name, "sha256": {"series_csv": sha256_of(cfg.csv)},
            "column": cfg.column, "period": cfg.period}  # fmt: skip
    return Prepared(splits, Vocab.build([]), Vocab.build([]), spec)  # type: ignore[arg-type]


def train_models(
    cfg: SeriesConfig, out: Path, say: Any
) -> tuple[dict[str, float], dict[int, Any], int]:
    """Train every (model, seed) into ``out/<model>-s<seed>``; returns seconds per run, the
    test windows of each seed and the cap in updates (``--steps``; a CSV series: whole epochs
    of its windows, the fewest that reach ``--steps``)."""
    from ...data.tasks import load_task

    configs, tests, seconds, cap = {}, {}, {}, cfg.steps
    for s in cfg.seeds:
        if cfg.csv:
            data = csv_data(cfg, s)
            per_epoch = math.ceil(len(data.splits.train) / cfg.batch_size)
            epochs = max(math.ceil(cfg.steps / per_epoch), 1)
            cap = epochs * per_epoch
            for m in MODELS:
                name = f"{m}-s{s}"
                c = fit_config(cfg, m, s, out / name, epochs)
                t0 = time.perf_counter()
                _fit_with(c, data, out / f"{name}.log")
                seconds[name] = time.perf_counter() - t0
            tests[s] = data.splits.test
            continue
        configs.update({f"{m}-s{s}": fit_config(cfg, m, s, out / f"{m}-s{s}") for m in MODELS})
        tests[s] = load_task("series", seed=s, train_size=cfg.epoch_steps * cfg.batch_size,
                             valid_size=cfg.valid_size, test_size=cfg.test_size).test  # fmt: skip
    if configs:
        seconds = train_all(configs, jobs=cfg.jobs, steps=cfg.steps, log_dir=out, say=say)
    return seconds, tests, cap


def _fit_with(config: FitConfig, data: Any, log_path: Path) -> None:
    from ...train.fit import fit

    with open_output(log_path) as f:
        fit(config, log=lambda line: print(line, file=f, flush=True), data=data)


def run_experiment(cfg: SeriesConfig, out: Path, say: Any = print) -> dict[str, Any]:
    """Train, forecast the test windows, score MASE and where attention peaks."""
    from ...data.series import HORIZON
    from ...eval.forecast import scores, seasonal_naive
    from ...tasks.forecast import arrays, predict
    from ...train import checkpoint

    what = cfg.csv or "generated series (periods 12, 16, 24)"
    t0 = begin(
        out,
        say,
        f"series experiment: {what}; the encoder-decoder with {cfg.score} attention and "
        f"without, and the seasonal-lag oracle beside them, early stopping (patience "
        f"{cfg.patience} x {cfg.epoch_steps} updates of {cfg.batch_size}, cap {cfg.steps}), "
        f"seeds {cfg.seeds}",
    )
    seconds, tests, cap = train_models(cfg, out, say)
    arms = (*MODELS, "naive", "mean")
    table: dict[str, dict[str, list[float]]] = {m: {} for m in arms}
    by_window: dict[str, list[list[float]]] = {m: [] for m in arms}
    updates: dict[str, list[int]] = {m: [] for m in MODELS}
    censored: dict[str, list[bool]] = {m: [] for m in MODELS}
    params, hits, hit_rows, by_lag = {}, [], [], []
    for s, test in tests.items():
        future, past, period = arrays(test)
        level = past.mean(axis=1, keepdims=True)  # (N, 1)
        forecasts = {"naive": seasonal_naive(past, period, HORIZON),
                     "mean": np.repeat(level, HORIZON, axis=1)}  # (N, K) each  # fmt: skip
        for m in MODELS:
            ck = checkpoint.load(out / f"{m}-s{s}" / "best")
            params[m] = sum(p.numel() for p in ck.model.parameters())
            stop, cut = stop_of(out / f"{m}-s{s}", cfg.patience)
            updates[m].append(stop)
            censored[m].append(cut)
            forecasts[m], weights = predict(ck.model, test)
            if weights is not None:
                hits.append(hits_by_step(weights, period))
                hit_rows.append(hit_by_window(weights, period).tolist())
                by_lag.append(weight_by_lag(weights, period))
        for m in arms:
            by_window[m].append(mase_by_window(future, forecasts[m], past, period).tolist())
            for k, v in scores(future, forecasts[m], past, period).items():
                table[m].setdefault(k, []).append(round(v, 4))
    numbers = {"mase": by_window, "updates": updates, "censored": censored, "cap": cap,
               "hits": hit_rows}  # fmt: skip
    checks = checks_of(numbers)
    hits_mean = [round(float(x), 4) for x in np.mean(hits, axis=0)]
    lag_mean = {p: [round(float(np.mean([b[p][i] for b in by_lag])), 5)
                    for i in range(len(by_lag[0][p]))] for p in by_lag[0]}  # fmt: skip
    return {
        "config": asdict(cfg),
        "seeds": cfg.seeds,
        "compared": list(COMPARED),
        "parameters": params,
        "updates": updates,
        "censored": censored,
        "median_stop": {m: float(statistics.median(u)) for m, u in updates.items()},
        "cap_updates": cap,
        "train_commands": {} if cfg.csv else {
            f"{m}-s{s}": " ".join(["attnkit", *train_argv(cfg, m, s, out / f"{m}-s{s}")])
            for s in cfg.seeds for m in MODELS},
        "train_seconds": {n: round(v, 1) for n, v in seconds.items()},
        "total_seconds": round(time.perf_counter() - t0, 1),
        "test_windows": len(next(iter(tests.values()))),
        "scores": table,
        "hits_by_step": hits_mean,
        "weight_by_lag": lag_mean,
        "reported": reported_of(numbers),
        **ev.judged(checks),
    }  # fmt: skip


EXPERIMENT = Experiment.of(
    __name__,
    name="series",
    help="forecasting: an encoder-decoder with attention over its input window vs without "
    "(MASE; Qin et al. 2017)",
    typical="11 min with --jobs 2 on a 2-core CPU (1,128 s of CPU)",
    description="Train the encoder-decoder forecaster with attention over its window and "
    "without attention (same width, data and stopping rule, 5 seeds) on seasonal series with "
    "trend and noise (or --csv FILE), and check on the t-interval over seeds that attention "
    "has the lower test MASE, as Qin et al. (2017) compare them; a forecaster handed the "
    "seasonal lag, seasonal naive and where attention peaks are reported beside, unchecked. "
    "Writes OUT/series.{csv,json,png}, an example heatmap and the checkpoints; exits 0 / 1 / 2.",
    config=SeriesConfig,
)

__all__ = [
    "ARM_NAMES",
    "COMPARED",
    "EXPERIMENT",
    "MODELS",
    "QUICK",
    "SeriesConfig",
    "checks_of",
    "converged",
    "gap_of",
    "learnt",
    "reported_of",
    "seed_means",
    "stop_of",
    "hit_by_window",
    "hits_by_step",
    "mase_by_window",
    "run_experiment",
    "train_argv",
    "fit_config",
    "weight_by_lag",
]
