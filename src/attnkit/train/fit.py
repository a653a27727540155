"""``attnkit.fit``: the one entry point that trains a model from a ``FitConfig``.

    result = attnkit.fit(FitConfig(data=DataConfig(task="toy-ko"), out="runs/toy"))
    result.best          # the folder of the checkpoint with the lowest valid loss
    result.data.test     # the held-out examples, for scoring

``attnkit train`` is an argparse layer over it, ``attnkit demo`` a preset of it, and the
experiments call it in-process (in a process pool where they train models side by side).
Under ``torchrun`` it trains data-parallel (see distributed.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ..data.example import Example, Splits
from ..data.lm_packed import PackedRows
from ..data.lm_text import Segments
from ..data.vocab import Vocab
from ..models import build_model
from ..tasks.registry import check_pairing, data_family, family
from .checkpoint import find_checkpoint
from .config import DataConfig, FitConfig
from .distributed import process_group
from .loop import TrainResult, train
from .model_checks import check_fits, check_resume
from .run_dir import open_run
from .runtime import compile_in_place, pick_device, set_threads


@dataclass
class Prepared:
    """A run's data: the splits, the vocabularies built from the training split, and the spec
    stored in the checkpoint (with any subword models learned from the training split)."""

    splits: Splits[Example]
    src_vocab: Vocab
    tgt_vocab: Vocab
    spec: dict[str, Any]

    @property
    def test(self) -> list[Example]:
        """The held-out test split."""
        return self.splits.test


def prepare(data: DataConfig) -> Prepared:
    """Read or generate the data of ``data`` and build its vocabularies (from what the task's
    family reads as tokens, see family.py)."""
    from ..data.source import fit_tokenisers, load_spec, with_hashes

    spec = with_hashes(fit_tokenisers(data.spec()))
    splits = load_spec(spec)
    if not splits.train or not splits.valid:
        raise ValueError(
            f"{len(splits.train)} training and {len(splits.valid)} validation examples: "
            "a run needs at least one of each"
        )
    if isinstance(splits.train, (Segments, PackedRows)):  # a text held as ids: counted
        return Prepared(splits, Vocab.build([]), splits.train.vocab(data.min_freq), spec)
    tokens = family(data_family(spec)).tokens
    src_vocab = Vocab.build((tokens(e)[0] for e in splits.train), data.min_freq)
    tgt_vocab = Vocab.build((tokens(e)[1] for e in splits.train), data.min_freq)
    return Prepared(splits, src_vocab, tgt_vocab, spec)


@dataclass
class FitResult(TrainResult):
    """A ``TrainResult`` with the run's data and where its checkpoints are."""

    data: Prepared | None = None
    main: bool = True  # False on the ranks > 0 of a torchrun job, which write and print nothing

    @property
    def best(self) -> Path:
        """The checkpoint folder with the lowest validation loss, ``out/best``."""
        assert self.out is not None
        return self.out / "best"

    @property
    def last(self) -> Path:
        """The checkpoint of the last epoch (resumable), ``out/last``."""
        assert self.out is not None
        return self.out / "last"


def fit(
    config: FitConfig,
    *,
    log: Callable[[str], None] | None = None,
    data: Prepared | None = None,
) -> FitResult:
    """Train the model of ``config`` on its data; write ``config.out/{best,last,history.json}``.

    log: where progress lines go (default: standard error); data: already prepared data (the
    same ``config.data``), to skip reading it again."""
    log = log or (lambda s: print(s, file=sys.stderr))
    device = pick_device(config.device)
    set_threads(config.threads)
    with process_group(device) as dist:
        main = dist is None or dist.is_main
        if dist is not None:
            device = str(dist.device)
            log = log if main else _silent
        fam = check_pairing(config.model.name, config.data.spec())  # before any work
        with _run_folder(config, is_main=main) as resume_from:  # refused before any work
            if config.resume and resume_from is None:  # a restart script's first run: said
                log(f"warning: --resume: no run in {config.out} to resume; starting a new run")
            prepared = data if data is not None else prepare(config.data)
            if resume_from is not None:
                prepared = _checkpoint_vocab(prepared, resume_from, log)
            model = _build(config, prepared, device, resume_from)
            n_params = sum(p.numel() for p in model.parameters())
            ranks = "" if dist is None else f" x {dist.world_size} processes ({dist.backend})"
            log(
                f"{config.model.name} ({n_params:,} parameters) on {len(prepared.splits.train)} "
                f"training examples; vocab {len(prepared.src_vocab)} -> {len(prepared.tgt_vocab)}; "
                f"device {device}{ranks}"
            )
            result = train(
                model,
                config.model.name,
                prepared.splits.train,
                prepared.splits.valid,
                prepared.src_vocab,
                prepared.tgt_vocab,
                config.train,
                config.out,
                resume=resume_from is not None,
                resume_from=resume_from,
                meta=prepared.spec,
                log=log,
                dist=dist,
                family=fam,
            )
    return FitResult(**vars(result), data=prepared, main=main)


def _checkpoint_vocab(prepared: Prepared, ckpt: Path, log: Callable[[str], None]) -> Prepared:
    """On resume, the vocabularies the weights were trained with, never ones rebuilt from data
    that may have changed (a re-ordered vocabulary under trained embeddings would train on
    silently wrong inputs). Tokens the checkpoint never saw are read as <unk>, and said."""
    from .checkpoint_check import read_config, read_vocabs

    vocabs = read_vocabs(ckpt, read_config(ckpt / "config.json")[1])
    data_vocabs = (prepared.src_vocab, prepared.tgt_vocab)
    for side, old, new in zip(("source", "target"), vocabs, data_vocabs, strict=True):
        known = set(old.tokens)
        unseen = [t for t in new.tokens if t not in known]
        if unseen:
            log(
                f"--resume: {len(unseen)} {side} token(s) of the data are not in the checkpoint's "
                f"vocabulary (e.g. {unseen[:3]}); they are read as <unk>"
            )
    return replace(prepared, src_vocab=vocabs[0], tgt_vocab=vocabs[1])


def _build(
    config: FitConfig, prepared: Prepared, device: str, resume_from: Path | None = None
) -> torch.nn.Module:
    """The model of ``config`` for the data's vocabularies, seeded by the training seed;
    refused before any allocation when it cannot fit ``device`` or, when resuming, is not
    the model of the checkpoint ``resume_from`` (model_checks.py)."""
    m = config.model
    kwargs = dict(preset=m.preset, src_vocab=len(prepared.src_vocab),
                  tgt_vocab=len(prepared.tgt_vocab), **m.options)  # fmt: skip
    if resume_from is not None:
        check_resume(m.name, kwargs, resume_from)
    check_fits(m.name, kwargs, device)  # before any parameter is allocated
    torch.manual_seed(config.train.seed)
    model = build_model(m.name, **kwargs).to(device)
    if config.compile:  # in place: forward compiled, state_dict keys and decoding unchanged
        compile_in_place(model, device)
    return model


@contextmanager
def _run_folder(config: FitConfig, *, is_main: bool) -> Iterator[Path | None]:
    """Rank 0 holds the run folder (lock, resume/overwrite rules of run_dir.py) for the whole
    run and yields the checkpoint to resume from; the other ranks only look for it."""
    if not is_main:
        yield find_checkpoint(Path(config.out), "last", resumable=True) if config.resume else None
        return
    with open_run(config.out, resume=config.resume, overwrite=config.overwrite) as run:
        yield run.resume_from


def _silent(line: str) -> None:
    pass


__all__ = ["FitResult", "Prepared", "fit", "prepare"]
