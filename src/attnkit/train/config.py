"""What a training run is, as data: ``FitConfig`` = data + model + how to train + where to.

    attnkit.fit(FitConfig(
        data=DataConfig(task="toy-ko"),
        model=ModelConfig("rnnsearch", preset="small", options={"emb": 32}),
        train=TrainConfig(epochs=5, lr=2e-3, time_limit=60),
        out="runs/toy",
    ))

The CLI (``attnkit train``), the demo and the experiments all build one of these and call
``attnkit.fit``; each dataclass checks its own values in ``__post_init__`` and raises a
``FieldError`` (a ValueError) that names its fields (``out is empty``); the CLI says the same
with its flags (``--out is empty``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._checks import FieldError
from ..data.source import CORPUS_KEYS
from ..data.synthetic import check_max_len

TOKENISERS = ("word", "char", "spm")
LR_DECAYS = ("none", "linear", "cosine")
"""The values of ``TrainConfig.lr_decay`` (``attnkit train --lr-decay``): see ``lr_at``."""
TASK_KEYS = ("train_size", "valid_size", "test_size", "min_len", "max_len")
FLOAT32_MAX = 3.4028234663852886e38  # the optimiser keeps lr as a float32 scalar
CORPUS_MAX_LEN = 200  # corpora: pairs with a longer side are dropped (and counted) by default


def warmup_lr(lr: float, warmup: int, step: int) -> float:
    """Learning rate of step 1, 2, ...: ``lr`` (``warmup`` 0), or rising linearly over
    ``warmup`` steps to ``lr`` and then falling as 1/sqrt(step) (Vaswani et al. 2017, eq. 3,
    with the peak given directly instead of through d_model):

        lr_step = lr · min(step / warmup, sqrt(warmup / step))"""
    if not warmup:
        return lr
    return lr * min(step / warmup, math.sqrt(warmup / max(step, 1)))


def _error(config: object, template: str) -> FieldError:
    """A FieldError about ``config``'s fields (``template`` as in FieldError)."""
    return FieldError(template, vars(config))


def _finite(config: object, name: str) -> None:
    if not math.isfinite(getattr(config, name)):
        raise _error(config, f"{{{name}=}}; it must be a finite number")


@dataclass
class DataConfig:
    """A generated task (``task``) or corpus files (``train_tsv``, or ``train_src`` +
    ``train_tgt``; optional fixed ``valid_*``/``test_*`` files, else a seeded split)."""

    task: str | None = None
    task_seed: int = 0  # seed of the generated data, or of the corpus split
    train_size: int | None = None
    valid_size: int | None = None
    test_size: int | None = None
    min_len: int | None = None  # copy/reverse/sort: shortest input
    max_len: int | None = None  # copy/reverse/sort: longest input; corpora: drop longer pairs
    train_tsv: str | None = None
    train_src: str | None = None
    train_tgt: str | None = None
    valid_src: str | None = None
    valid_tgt: str | None = None
    test_src: str | None = None
    test_tgt: str | None = None
    docs_csv: str | None = None  # task docs: real (label, text) documents instead of generated
    train_text: str | None = None  # task lm: a UTF-8 text to train on (data/lm_text.py)
    valid_text: str | None = None  # task lm: held-out text (default: the last 5% of train_text)
    segment: int | None = None  # task lm: characters per training segment (default 64)
    pack: bool = False  # task lm: train on documents packed in rows (data/lm_packed.py)
    asks: float | None = None  # task lm, generated text: a sentence's chance to ask the name
    tokenise: str = "word"  # corpora: word | char | spm
    spm_vocab: int = 8000
    strict: bool = False
    valid_fraction: float = 0.05
    test_fraction: float = 0.05
    min_freq: int = 1  # vocabulary minimum frequency

    def __post_init__(self) -> None:
        self._check_text()
        if self.docs_csv and self.task != "docs":
            raise _error(self, "{docs_csv} goes with {task} docs (documents with a label)")
        files = [getattr(self, k) for k in CORPUS_KEYS]
        if self.task and any(files):
            raise _error(self, "give either {task} or corpus files, not both")
        if not self.task and not (self.train_tsv or self.train_src or self.train_tgt):
            raise _error(self, "say what to train on: a {task}, a {train_tsv} file, or "
                               "{train_src} and {train_tgt} files")  # fmt: skip
        if bool(self.train_src) != bool(self.train_tgt):
            raise _error(self, "{train_src} and {train_tgt} go together (or use {train_tsv})")
        for name in ("train_size", "valid_size", "test_size", "min_len", "max_len"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise _error(self, f"{{{name}=}}; it must be at least 1")
        if self.task and self.max_len is not None:
            check_max_len(self.max_len)
        if self.tokenise not in TOKENISERS:
            raise _error(self, f"{{tokenise=}}; choose one of {TOKENISERS}")
        if self.spm_vocab < 1 or self.min_freq < 1:
            raise _error(self, "{spm_vocab} and {min_freq} must be at least 1")
        for name in ("valid_fraction", "test_fraction"):
            value = getattr(self, name)
            if not 0 <= value < 1:
                raise _error(self, f"{{{name}=}}; it must be in [0, 1)")

    def _check_text(self) -> None:
        """The lm task's options: a train_text alone names the task; they go with it only."""
        if (self.train_text or self.valid_text) and self.task is None:
            self.task = "lm"
        given = [f"{{{k}}}" for k in ("train_text", "valid_text", "segment", "asks")
                 if getattr(self, k) is not None] + ["{pack}"] * self.pack  # fmt: skip
        if given and self.task != "lm":
            raise _error(self, f"{', '.join(given)} go(es) with {{task}} lm (language modelling)")
        if self.valid_text and not self.train_text:
            raise _error(self, "{valid_text} goes with {train_text} (the text to train on)")
        if self.segment is not None and self.segment < 1:
            raise _error(self, "{segment=}; it must be at least 1")
        if self.asks is not None and not 0 < self.asks < 1:
            raise _error(self, "{asks=}; it is a chance: give it in (0, 1)")
        if self.asks is not None and self.train_text:
            raise _error(self, "{asks} shapes the generated text; with {train_text} the file "
                               "is the data")  # fmt: skip
        for k in ("train_text", "valid_text"):  # before any work (the bytes are read later)
            name = getattr(self, k)
            if name and not Path(name).is_file():
                what = "no such file" if not Path(name).exists() else "not a file"
                raise FileNotFoundError(
                    f"--{k.replace('_', '-')} {name}: {what}; name a UTF-8 text file"
                )
        sized = [k for k in ("train_size", "valid_size", "test_size") if getattr(self, k)]
        if self.train_text and sized:
            raise _error(
                self, f"{{{sized[0]}}} sizes the generated text; with {{train_text}} the file is "
                "the data (its last 5% held out, or {valid_text})",
            )  # fmt: skip

    def spec(self) -> dict[str, Any]:
        """The JSON-able description stored in the checkpoint (see data/source.py)."""
        if self.task:
            spec: dict[str, Any] = {"task": self.task, "task_seed": self.task_seed} | {
                k: getattr(self, k) for k in TASK_KEYS
            }
            if self.docs_csv:
                spec["docs_csv"] = str(Path(self.docs_csv).resolve())
            if self.task == "lm":
                from ..data.lm_text import DEFAULT_SEGMENT

                spec["segment"] = self.segment or DEFAULT_SEGMENT
                if self.pack:  # absent when off: the specs of earlier runs stay as they were
                    spec["pack"] = True
                if self.asks is not None:  # absent by default, as pack
                    spec["asks"] = self.asks
                for k in ("train_text", "valid_text"):
                    if getattr(self, k):
                        spec[k] = str(Path(getattr(self, k)).resolve())
            return spec
        spec = {
            "tokenise": self.tokenise,
            "spm_vocab": self.spm_vocab,
            "max_len": CORPUS_MAX_LEN if self.max_len is None else self.max_len,
            "strict": self.strict,
            "valid_fraction": self.valid_fraction,
            "test_fraction": self.test_fraction,
            "split_seed": self.task_seed,
        }
        for k in CORPUS_KEYS:
            if getattr(self, k):
                spec[k] = str(Path(getattr(self, k)).resolve())
        return spec


@dataclass
class ModelConfig:
    """Model ``name`` (see ``attnkit.models.MODELS``), a named preset, then option overrides
    (fields of the model's config dataclass, e.g. ``{"emb": 32, "score": "dot"}``)."""

    name: str = "rnnsearch"
    preset: str | None = "small"
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from ..models import make_config

        # the vocabulary sizes come from the data; 1 stands in to check everything else now
        make_config(self.name, preset=self.preset, src_vocab=1, tgt_vocab=1, **self.options)


@dataclass
class TrainConfig:
    """How to train: the optimiser (Adam), the budget and the stopping rules, checkpointing."""

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
    lr_decay: str = "none"  # none | linear | cosine: lr falls towards 0 at the last update
    label_smoothing: float = 0.0  # of the training loss; valid loss is plain cross-entropy
    valid_decode: int = -1  # valid sentences greedy-decoded per epoch (-1 all, 0 none)
    progress: bool = True  # a tqdm bar on a terminal; without one, progress lines (below)
    report_every: int = 50  # a progress line every N updates (0 = by time only)...
    report_seconds: float = 30.0  # ... or S seconds, whichever comes first (0 = by count only)

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise _error(self, "{epochs=}, {batch_size=}; both must be >= 1")
        finite = ("lr", "clip", "time_limit", "target_exact", "label_smoothing", "report_seconds")
        for name in finite:
            _finite(self, name)
        if not 0 < self.lr <= FLOAT32_MAX:
            raise _error(self, "{lr=}; it must be positive and within float32's range")
        spans = (self.clip, self.patience, self.save_every, self.time_limit, self.warmup,
                 self.report_every, self.report_seconds)  # fmt: skip
        if min(spans) < 0:
            raise _error(
                self, "{clip}, {patience}, {save_every}, {time_limit}, {warmup}, {report_every} "
                "and {report_seconds} must not be negative",
            )  # fmt: skip
        if not 0 <= self.target_exact <= 1:
            raise _error(self, "{target_exact=}; it must be in [0, 1]")
        if not 0 <= self.label_smoothing < 1:
            raise _error(self, "{label_smoothing=}; it must be in [0, 1)")
        if self.valid_decode < -1:
            raise _error(self, "{valid_decode=}; use -1 (all), 0 or a count")
        if self.lr_decay not in LR_DECAYS:
            raise _error(self, f"{{lr_decay=}}; choose one of {', '.join(LR_DECAYS)}")

    def lr_at(self, step: int, total: int = 0) -> float:
        """Learning rate of step 1, 2, ... of ``total`` (the cap: epochs x batches an epoch).

        ``lr_decay`` none: constant, or with ``warmup`` steps rising linearly to ``lr`` and
        then falling as 1/sqrt(step) (Vaswani 2017, eq. 3, with the peak given directly
        instead of through d_model). linear, cosine: after the ``warmup`` steps (if any) rise
        linearly to ``lr``, with p = (s − 1 − warmup) / (total − warmup) the fraction of the
        decay done before step s (s clamped to ``total``),

            linear   lr (1 − p)
            cosine   lr (1 + cos(π p)) / 2     (Loshchilov & Hutter 2017, eq. 5, η_min = 0,
                                                one cycle)

        so step warmup + 1 takes ``lr`` and the last step a little more than 0."""
        w = self.warmup
        if self.lr_decay == "none":
            return warmup_lr(self.lr, w, step)
        if total <= w:
            raise ValueError(f"lr_decay {self.lr_decay} needs the total updates ({total}) to "
                             f"exceed warmup ({w}); raise epochs or lower warmup")  # fmt: skip
        if step <= w:
            return self.lr * step / w
        p = (min(step, total) - 1 - w) / (total - w)
        if self.lr_decay == "linear":
            return self.lr * (1 - p)
        return self.lr * (1 + math.cos(math.pi * p)) / 2


@dataclass
class FitConfig:
    """One training run: what to learn from, which model, how, and where its files go.

    out: the run folder (``best/``, ``last/``, ``history.json``); an existing run there is
    continued only with ``resume=True`` and replaced only with ``overwrite=True``.
    device: cpu | cuda | auto. threads: torch CPU threads (1 is fastest for small RNNs).
    compile: ``torch.compile`` the model's forward in place (same parameters and checkpoints;
    the first steps of each shape pay the compilation; see docs/performance.md)."""

    data: DataConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    out: str | Path = ""
    resume: bool = False
    overwrite: bool = False
    device: str = "cpu"
    threads: int = 1
    compile: bool = False  # torch.compile the model's forward (training and valid loss)

    def __post_init__(self) -> None:
        if not str(self.out).strip():
            raise _error(self, "{out} is empty; name a folder for the run (e.g. runs/NAME)")
        if self.resume and self.overwrite:
            raise _error(self, "{resume} continues the run in {out}, {overwrite} replaces it: "
                               "pick one")  # fmt: skip
        if self.device not in ("auto", "cpu", "cuda"):
            raise _error(self, "{device=}; choose auto, cpu or cuda")
        if self.threads < 1:
            raise _error(self, "{threads=}; it must be at least 1")
        if self.data.pack:  # before any work: a model that cannot honour packed documents
            from ..models import make_config
            from ..models.lm import pack_refusal

            m = self.model
            refusal = pack_refusal(make_config(m.name, preset=m.preset, src_vocab=1,
                                               tgt_vocab=1, **m.options))  # fmt: skip
            if refusal is not None:
                raise ValueError(refusal)

    def to_json(self) -> dict[str, Any]:
        """The config as a JSON-able dict (``out`` as a string)."""
        return {**asdict(self), "out": str(self.out)}


__all__ = [
    "LR_DECAYS",
    "DataConfig",
    "FieldError",
    "FitConfig",
    "ModelConfig",
    "TrainConfig",
    "warmup_lr",
]
