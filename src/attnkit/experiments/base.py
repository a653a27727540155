"""What an experiment is, for ``attnkit experiment NAME`` and for the library.

An experiment is one package that ends its ``__init__`` with ``EXPERIMENT =
Experiment.of(__name__, ...)`` and one line in ``attnkit.experiments.EXPERIMENTS``. Its roles
have fixed names: a config dataclass (each field a command-line flag, its help in
``option(default, help)``), ``QUICK``, the settings of a seconds-long ``--quick`` smoke run,
``run_experiment(config, out, say) -> result`` (a JSON-able dict whose top-level
``"verdict"`` is computed from its checks by ``evidence.verdict_of``: ``"REPRODUCED"``,
``"NOT REPRODUCED: why"`` or ``"INCONCLUSIVE: why"``, with ``"checks"`` beside it), and
``report.report(result, out, say)`` that prints its table and writes
``out/NAME.{json,csv,png}`` (every file an experiment writes goes through
``train.outputs.write_output``, or ``open_output`` for a log, which record it in the folder's
manifest so that ``--overwrite`` can tell it from a file of the user's); ``typical`` says how
long a default run takes (``attnkit experiment`` lists it). Every config has a ``seed``
field (``--seed``); ``--out`` defaults to ``runs/NAME/``. Training inside ``run`` goes
through ``attnkit.fit`` (several runs side by side: ``pool.train_all``); the writers below
are shared.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from .._flags import int_list, str_list
from ..train.outputs import open_output, write_output

Say = Callable[[str], None]
"""How an experiment prints a line (``print``, or a logger)."""


@dataclass(frozen=True)
class Experiment:
    """One experiment: its name, help line, description, config dataclass, ``--quick``
    overrides, its ``run`` and ``report`` functions (see the module docstring), and how long
    a default run typically takes (``typical``, as measured in its docs; "unknown" if never
    timed)."""

    name: str
    help: str  # one line for `attnkit experiment --help`
    description: str  # what it trains, what it checks, what it writes
    config: type  # a dataclass; every field a flag
    quick: dict[str, Any]  # --quick overrides (seconds; too short to show the effect)
    run: Callable[[Any, Path, Say], dict[str, Any]]
    report: Callable[[dict[str, Any], Path, Say], list[Path]]
    typical: str = "unknown"  # wall time of a default run, for `attnkit experiment`'s listing

    @classmethod
    def of(
        cls, package: str, *, name: str, help: str, description: str, config: type,
        typical: str = "unknown",
    ) -> Experiment:
        """The experiment of the package ``package`` (pass ``__name__`` at the end of its
        ``__init__``), whose roles have fixed names there: ``QUICK`` (the ``--quick``
        overrides), ``run_experiment`` (``run``) and ``report.report`` (``report``, imported
        when it runs)."""
        module = sys.modules[package]
        return cls(name=name, help=help, description=description, config=config,
                   quick=module.QUICK, run=module.run_experiment, report=report_of(package),
                   typical=typical)  # fmt: skip


class Tally:
    """How many of an experiment's ``total`` runs (arms x seeds) are done, for its progress
    lines, each with the seconds since the tally was made:

        tally = Tally(8, say)
        tally.starting("LSTM seed 0")   #   [   0s] LSTM seed 0 (1/8) ...
        tally("LSTM seed 0 trained")    #   [  42s] LSTM seed 0 trained (1/8)
    """

    def __init__(self, total: int, say: Say) -> None:
        self.total, self.done, self.say, self.t0 = total, 0, say, time.perf_counter()

    def __call__(self, what: str, *, runs: int = 1) -> None:
        """``runs`` more runs are done: say ``what`` with the count."""
        self.done += runs
        self.say(f"  [{time.perf_counter() - self.t0:4.0f}s] {what} ({self.done}/{self.total})")

    def starting(self, what: str) -> None:
        """The next run begins: say ``what`` with its number."""
        elapsed = time.perf_counter() - self.t0
        self.say(f"  [{elapsed:4.0f}s] {what} ({self.done + 1}/{self.total}) ...")


def begin(out: Path, say: Say, plan: str) -> float:
    """The start of ``run``: say the run's ``plan`` and where its output goes, make ``out``;
    returns the start time (``time.perf_counter``) of the result's ``total_seconds``."""
    say(f"{plan}; output in {out}/")
    out.mkdir(parents=True, exist_ok=True)
    return time.perf_counter()


def option(default: Any, help: str) -> Any:
    """A field of an experiment's config that is a command-line flag: its default and its
    help text (``attnkit experiment NAME --help`` shows both)."""
    return field(default=default, metadata={"help": help})


@dataclass
class Pooled:
    """A config whose runs train in a process pool: ``--jobs`` runs at once, each process with
    ``--threads`` torch threads. Its flags come after the experiment's own (``flags_of``)."""

    jobs: int = option(2, "runs trained at once, in a process pool")
    threads: int = option(1, "torch threads per training process (and for the measurements)")


def flags_of(config: type) -> list[Field[Any]]:
    """The fields of an experiment's config dataclass in the order of its flags: its own
    first, then those of the mixins it shares with other experiments (``pool.LMFlags``,
    ``Pooled``), nearest base first."""
    def owner(f: Field[Any]) -> int:
        return next(i for i, c in enumerate(config.__mro__)
                    if f.name in c.__dict__.get("__annotations__", {}))  # fmt: skip

    return sorted(fields(config), key=owner)


class Seeds:
    """A config with a ``seed`` and a ``seeds`` field (``--seed``, ``--seeds``): its runs'
    seeds are ``seed_list``."""

    seed: int
    seeds: int

    @property
    def seed_list(self) -> list[int]:
        """The seeds: seed, seed + 1, ..."""
        return list(range(self.seed, self.seed + self.seeds))


def parse_ints(text: str, flag: str, minimum: int = 1, example: str = "4,16,64") -> list[int]:
    """``--flag "4,16,64"`` -> [4, 16, 64]: two or more increasing integers, each >= ``minimum``;
    the errors name the flag and show ``example``."""
    xs = int_list(text, flag, example)
    if len(xs) < 2 or min(xs) < minimum or xs != sorted(set(xs)):
        raise ValueError(
            f"--{flag} {text!r}: give two or more increasing integers >= {minimum}, "
            f"e.g. {example}"
        )
    return xs


def check_schedule(cfg: Any) -> None:
    """The training flags of a config that validates every ``epoch_steps`` updates up to
    ``steps`` and stops after ``patience`` validations without a better loss, at a constant
    ``lr``: each wrong one is a ValueError naming its flag."""
    if not (math.isfinite(cfg.lr) and cfg.lr > 0):
        raise ValueError(f"--lr {cfg.lr}; it must be positive")
    if cfg.steps % cfg.epoch_steps:
        raise ValueError(
            f"--steps {cfg.steps} is not a multiple of --epoch-steps {cfg.epoch_steps}"
        )
    if cfg.patience < 0:
        raise ValueError("--patience must not be negative (0: never stop early)")


def task_names(text: str, known: Sequence[str]) -> list[str]:
    """``--tasks "a,b"`` -> ["a", "b"]: one or more of ``known``, each at most once."""
    tasks = str_list(text)
    if not tasks or len(set(tasks)) != len(tasks) or not set(tasks) <= set(known):
        raise ValueError(f"--tasks {text!r}: name each of {known} at most once")
    return tasks


def mean_of_means(rows: Sequence[Sequence[float]]) -> float:
    """The mean over seeds (rows) of each seed's mean (over its blocks, segments, ...)."""
    return sum(sum(r) / len(r) for r in rows) / len(rows)


REPRODUCED = "REPRODUCED"
"""The verdict of an experiment whose checks all passed."""


def reproduced(result: dict[str, Any]) -> bool:
    """Whether the result's verdict is ``"REPRODUCED"``."""
    return result["verdict"] == REPRODUCED


def no_nan(x: Any) -> Any:
    """NaN (an empty bin, a drop from 0) as JSON null: strict JSON has no NaN."""
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: no_nan(v) for k, v in x.items()}
    if isinstance(x, list):
        return [no_nan(v) for v in x]
    return x


def write_json(result: dict[str, Any], path: Path) -> Path:
    """Write ``result`` to ``path`` as indented JSON, NaN as null (``write_output``); returns
    ``path``."""
    return write_output(path, json.dumps(no_nan(result), indent=1))


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Write ``rows`` (dicts with the same keys, the first row's keys as header) to ``path``
    as CSV (``write_output``); returns ``path``."""
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    return write_output(path, text.getvalue())


def write_outputs(
    name: str,
    rows: Sequence[dict[str, Any]],
    result: dict[str, Any],
    plot: Callable[[dict[str, Any], Path], Path],
    out: Path,
    say: Say,
    extra: Sequence[Callable[[Path], Path]] = (),
) -> list[Path]:
    """The contract's files: out/NAME.csv (``rows``), NAME.json (``result``), NAME.png
    (``plot``), then any ``extra`` figure writers; says where each went."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [
        write_csv(rows, out / f"{name}.csv"),
        write_json(result, out / f"{name}.json"),
        plot(result, out / f"{name}.png"),
        *(write(out) for write in extra),
    ]
    for path in paths:
        say(f"wrote {path}")
    return paths


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (files, no display): a report imports it when
    it draws, never when the experiments are listed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 110) -> Path:
    """Lay ``fig`` out, write it to ``path`` as PNG (``write_output``) and close it; returns
    ``path``."""
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=dpi)
    pyplot().close(fig)
    return write_output(path, png.getvalue())


def report_of(module: str) -> Callable[[dict[str, Any], Path, Say], list[Path]]:
    """``report`` of the experiment package ``module`` (its ``report.py``), imported when it
    runs (so that listing the experiments for ``--help`` never imports matplotlib)."""

    def report(result: dict[str, Any], out: Path, say: Say) -> list[Path]:
        return importlib.import_module(f"{module}.report").report(result, out, say)

    return report


def timed_steps(step: Callable[[], int], repeats: int) -> dict[str, Any]:
    """One untimed ``step`` (warm-up), then ``repeats`` timed ones: {"saved_bytes": what the
    last step returned (the bytes autograd saved), "seconds": [each step's wall time]}."""
    step()
    times, saved = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        saved = step()
        times.append(time.perf_counter() - t0)
    return {"saved_bytes": saved, "seconds": times}


def power_exponent(xs: Sequence[float], ys: Sequence[float]) -> float:
    """k of y ≈ c·x^k: the least-squares slope of log y against log x (NaN if a y <= 0)."""
    if min(ys) <= 0:
        return math.nan
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sxx


def names_of(flag: str, text: str, allowed: Sequence[str]) -> list[str]:
    """The comma-separated names of a flag's value, each one of ``allowed`` and named at most
    once: names_of("--parts", "han, qa", PARTS) -> ["han", "qa"]."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names or len(set(names)) != len(names) or not set(names) <= set(allowed):
        raise ValueError(f"{flag} {text!r}: name each of {tuple(allowed)} at most once")
    return names


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table: readable on a terminal, pasteable into docs."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def reported_table(result: dict[str, Any]) -> str:
    """``result["reported"]``, the numbers reported beside the checks (judging nothing): name,
    value, 95% interval and number of seeds, as a Markdown table."""
    return markdown_table(
        ["reported, not checked", "value", "95% interval", "seeds"],
        [[r["name"], f"{r['value']:.4g}", f"[{r['ci'][0]:.4g}, {r['ci'][1]:.4g}]", str(r["n"])]
         for r in result["reported"]],
    )  # fmt: skip


def plateau_text(result: dict[str, Any], cap_flag: str = "epochs") -> str:
    """Where the runs of a result with a ``pool.plateau_summary`` stopped, for its report:
    "stopped after NAME EPOCHS, ... epochs of N updates (cap C); censored at the cap: ...";
    the cap C is the config's ``cap_flag`` field."""
    stops = ", ".join(f"{n} {e}" for n, e in result["stopping_epochs"].items())
    censored = ", ".join(result["censored_runs"]) or "none"
    return (f"stopped after {stops} epochs of {result['updates_per_epoch']} updates (cap "
            f"{result['config'][cap_flag]}); censored at the cap: {censored}")  # fmt: skip


def runs_text(result: dict[str, Any]) -> str:
    """Arms as rows of ``result["runs"]`` (``pool.runs_of``): per seed, the updates run, the
    update of the lowest valid bpc, that bpc, how the run ended and whether it reached its
    plateau."""
    head = ["arm", *(f"seed {s}: updates (best at) / valid bpc / ended" for s in result["seeds"])]
    body = [[arm, *(f"{r['updates']} ({r['best_update']}) / {r['best_valid_bpc']:.3f} / "
                    f"{r['ended']}{'' if r['plateau'] else ', not on its plateau'}"
                    for r in runs)] for arm, runs in result["runs"].items()]  # fmt: skip
    return markdown_table(head, body)


def plot_bpc_curves(ax: Any, result: dict[str, Any]) -> None:
    """The learning curves of a language-model result on the axes ``ax``: valid bits per
    character against updates (``result["numbers"]["curves"]``: arm -> seed -> one value per
    validation, one validation per ``result["updates_per_epoch"]`` updates), one line per arm
    and seed in the arm's colour, a dot at each run's lowest."""
    per = result["updates_per_epoch"]
    for i, (arm, by_seed) in enumerate(result["numbers"]["curves"].items()):
        for k, c in enumerate(by_seed):
            xs = [(j + 1) * per for j in range(len(c))]
            ax.plot(xs, c, "-", color=f"C{i}", lw=1, label=arm if k == 0 else None)
            ax.plot(xs[c.index(min(c))], min(c), "o", color=f"C{i}", ms=4)
    ax.set_xlabel("updates")
    ax.set_ylabel("valid bits per character")
    ax.legend(fontsize=8)


__all__ = [
    "timed_steps",
    "REPRODUCED",
    "Experiment",
    "Pooled",
    "Say",
    "Seeds",
    "Tally",
    "begin",
    "flags_of",
    "check_schedule",
    "markdown_table",
    "mean_of_means",
    "plateau_text",
    "plot_bpc_curves",
    "option",
    "runs_text",
    "parse_ints",
    "no_nan",
    "open_output",
    "power_exponent",
    "pyplot",
    "report_of",
    "reported_table",
    "write_outputs",
    "reproduced",
    "save_figure",
    "task_names",
    "write_csv",
    "write_json",
    "write_output",
]
