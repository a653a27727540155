"""Checkpoints as a directory of plain files: nothing is ever unpickled.

    config.json        {"model": "rnnsearch", "config": {...}, "meta": {...},
                        "vocab": {"src_vocab.json": {"tokens": N, "sha256": HEX}, ...}}
    model.safetensors  the parameters
    src_vocab.json, tgt_vocab.json
    optimizer.safetensors + train_state.json   (resumable checkpoints only: optimizer
                       tensors, the torch RNG state, and epoch/step/early-stopping counters)

Rotation. ``save(DIR/last)`` writes the new checkpoint whole into ``DIR/.last.tmp-PID``, then

    1. removes ``DIR/.last.old`` (a leftover of an interrupted save), only while ``last`` exists
    2. renames ``last`` -> ``.last.old``
    3. renames ``.last.tmp-PID`` -> ``last``
    4. removes ``.last.old``

Invariant, true between any two filesystem operations: ``last`` exists only complete (it only
ever appears by a rename of a finished folder), and while ``last`` is absent ``.last.old`` is
either absent or complete (it is only removed while ``last`` exists). So ``find_checkpoint``,
which reads ``last`` and then ``.last.old``, always finds the old checkpoint or the new one,
never a mix, wherever a kill lands. Temporaries of dead processes are removed by the next save.

Inside a running experiment's folder every file of a save, and ``history.json``
(``write_text``), is recorded in the experiment's manifest as it is placed
(``outputs.Placement``: listed before it is created, its sha256 recorded before it takes its
name, and before step 2 for ``.last.old`` too), so a run killed at any instant leaves only
files ``experiment --overwrite`` knows as its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes
from torch import nn

from ..data.vocab import Vocab
from ..models import Seq2Seq, build_model, config_to_json
from . import checkpoint_check as check
from .outputs import Placement, fsync_dir, pid_alive, placement

FILES = ("config.json", "model.safetensors", "src_vocab.json", "tgt_vocab.json")
TRAINING_FILES = ("optimizer.safetensors", "train_state.json")  # resumable checkpoints only


@dataclass
class Loaded:
    model: Seq2Seq  # a translation model; other families' models (tasks/) share the fields
    model_name: str
    src_vocab: Vocab
    tgt_vocab: Vocab
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path = Path(".")


def backup_of(path: Path) -> Path:
    """``DIR/.NAME.old``: the previous ``DIR/NAME`` while a save rotates it."""
    return path.with_name(f".{path.name}.old")


def temp_of(path: Path, pid: int | None = None) -> Path:
    """``DIR/.NAME.tmp-PID``: where process PID writes the next ``DIR/NAME``."""
    return path.with_name(f".{path.name}.tmp-{os.getpid() if pid is None else pid}")


def is_complete(path: Path, *, resumable: bool = False) -> bool:
    """Whether ``path`` holds every file of a checkpoint (and of a resumable one)."""
    names = FILES + TRAINING_FILES if resumable else FILES
    return all((path / n).is_file() for n in names)


def find_checkpoint(
    out: str | Path, which: str = "best", *, resumable: bool = False
) -> Path | None:
    """The complete checkpoint ``out/which``, else its backup ``out/.which.old`` (the only
    copy while a save is interrupted between its two renames), else None."""
    if which not in ("best", "last"):
        raise ValueError(f"which={which!r}: pass 'best' or 'last'")
    path = Path(out) / which
    for cand in (path, backup_of(path)):
        if is_complete(cand, resumable=resumable):
            return cand
    return None


def foreign_files(path: Path) -> list[str]:
    """Names inside the checkpoint folder ``path`` that attnkit did not write."""
    if not path.is_dir():
        return []
    own = set(FILES + TRAINING_FILES)
    return sorted(p.name for p in path.iterdir() if p.name not in own)


def stale_temps(path: Path, *, every: bool = False) -> list[Path]:
    """Temporaries ``.NAME.tmp-PID`` beside ``path`` left by dead processes (or by this one, which
    has no save under way when it asks); with ``every``, all of them (the caller holds the run's
    lock, so no live writer exists)."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.tmp-(\d+)")
    if not path.parent.is_dir():
        return []
    found = []
    for p in path.parent.iterdir():
        m = pattern.fullmatch(p.name)
        if m and (every or int(m[1]) == os.getpid() or not pid_alive(int(m[1]))):
            found.append(p)
    return sorted(found)


def remove(path: Path) -> None:
    """Remove a file or a folder tree, one unlink at a time (what a kill can interrupt)."""
    if path.is_dir() and not path.is_symlink():
        for child in path.iterdir():
            remove(child)
        os.rmdir(path)
    else:
        os.unlink(path)


def write_file(path: Path, data: bytes) -> None:
    """Write and fsync one file (not atomic by itself: callers write under a temporary name)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_text(path: Path, text: str) -> None:
    """Atomic single-file write: a temporary file in the same folder, then os.replace; inside
    a running experiment, recorded with its hash in its manifest (module docstring)."""
    for stale in stale_temps(path):
        remove(stale)
    tmp, data = temp_of(path), text.encode("utf-8")
    record = placement(path)
    record.listed({tmp: path})
    write_file(tmp, data)
    record.written({tmp: hashlib.sha256(data).hexdigest()})
    os.replace(tmp, path)
    fsync_dir(path.parent)
    record.placed({tmp: path})


def refuse_foreign(path: Path, error: type[ValueError] = ValueError) -> None:
    """Raise ``error`` when the checkpoint folder ``path`` (or its backup) is a file or holds
    files attnkit did not write: saving there would replace them."""
    for p in (path, backup_of(path)):
        if p.exists() and not p.is_dir():
            raise error(f"{p} is a file, not a checkpoint folder; move it away first")
        if names := foreign_files(p):
            raise error(
                f"{p} holds files attnkit did not write ({', '.join(names)}); move them out "
                "of it first: saving a checkpoint there would replace the whole folder"
            )


def _rotate(tmp: Path, path: Path, record: Placement | None = None) -> None:
    """Put the finished folder ``tmp`` at ``path``; see the module docstring for the invariant.
    ``record`` hears of the rename of ``path`` to its backup before it is made."""
    old = backup_of(path)
    if path.exists():  # complete: it only ever appears by the rename below
        if old.exists():
            remove(old)  # a leftover of an interrupted save; ``path`` is the checkpoint
        if record is not None:
            record.moving(path, old)
        os.replace(path, old)
    # ``path`` is absent: ``old``, when present, is the only complete copy until this rename
    os.replace(tmp, path)
    fsync_dir(path.parent)
    if old.exists():
        remove(old)


def resolve(path: str | Path) -> Path:
    """A model directory; a training output folder resolves to its ``best`` (then ``last``).
    A checkpoint caught in rotation resolves to its ``.NAME.old`` backup."""
    p = Path(path)
    cands = [p] + ([backup_of(p)] if p.name not in ("", ".", "..") else [])
    for cand in cands:
        if is_complete(cand):
            return cand
    for which in ("best", "last"):
        if (found := find_checkpoint(p, which)) is not None:
            return found
    if (p / "config.json").is_file():
        missing = [n for n in FILES if not (p / n).is_file()]
        raise FileNotFoundError(f"incomplete checkpoint at {p}: {', '.join(missing)} missing")
    raise FileNotFoundError(
        f"no checkpoint at {p}: expected config.json there or in {p}/best; "
        "train one with `attnkit train --out DIR`"
    )


def save(
    path: str | Path,
    model: torch.nn.Module,
    model_name: str,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    meta: dict[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    train_state: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint folder at ``path``, replacing the one there without a moment when
    neither is findable. Refuses (ValueError) to replace a folder holding other files."""
    path = Path(path)
    for side, vocab in (("src", src_vocab), ("tgt", tgt_vocab)):
        rows = getattr(model.config, f"{side}_vocab", None)
        if rows is not None and len(vocab) > rows:
            raise ValueError(
                f"the {side} vocabulary has {len(vocab)} tokens but the model's embedding "
                f"{rows} rows: its ids would index past the embedding; build the model with "
                f"{side}_vocab=len(vocab)"
            )
    refuse_foreign(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in stale_temps(path):
        remove(stale)
    tmp = temp_of(path)
    cfg = {"model": model_name, "config": config_to_json(model.config), "meta": meta or {},
           "vocab": {"src_vocab.json": check.vocab_record(src_vocab),
                     "tgt_vocab.json": check.vocab_record(tgt_vocab)}}  # fmt: skip
    weights = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    files = {
        "config.json": json.dumps(cfg, indent=2, ensure_ascii=False).encode("utf-8"),
        "model.safetensors": safetensors_bytes(weights),
        "src_vocab.json": src_vocab.to_json().encode("utf-8"),
        "tgt_vocab.json": tgt_vocab.to_json().encode("utf-8"),
    }
    if optimizer is not None:
        tensors, opt_json = optimizer_to_flat(optimizer)
        tensors["rng.torch"] = torch.get_rng_state()
        state = {"optimizer": opt_json, **(train_state or {})}
        files["optimizer.safetensors"] = safetensors_bytes(tensors)
        files["train_state.json"] = json.dumps(state, indent=2).encode("utf-8")
    record = placement(path)
    record.listed({tmp / name: path / name for name in files})
    os.mkdir(tmp)
    for name, data in files.items():
        write_file(tmp / name, data)
    fsync_dir(tmp)
    record.written({tmp / name: hashlib.sha256(data).hexdigest() for name, data in files.items()})
    _rotate(tmp, path, record)
    record.placed({tmp / name: path / name for name in files}, gone=(path, backup_of(path)))
    return path


def load(path: str | Path, device: str | torch.device = "cpu") -> Loaded:
    """The checkpoint at ``path`` (a folder, or a training output folder: its best, then last).
    Every file is checked before the model is built (checkpoint_check.py): a damaged or
    tampered checkpoint is one ValueError naming the file and key, never a huge allocation;
    a weight that is NaN or inf is one too, never silently empty output."""
    p = resolve(path)
    name, config, meta = check.read_config(p / "config.json")
    weights = p / "model.safetensors"
    check.check_tensors(weights, check.read_header(weights), check.expected_tensors(name, config))
    src_vocab, tgt_vocab = check.read_vocabs(p, config)
    tensors = load_file(str(weights), device="cpu")
    model = build_model(name, config)
    parameters = {n for n, _ in model.named_parameters()}  # buffers may hold NaN as "unset"
    check.check_finite(weights, {k: t for k, t in tensors.items() if k in parameters})
    model.load_state_dict(tensors)
    model.to(device).eval()
    # a Seq2Seq, or another family's model with the fields Loaded's users read (see Loaded)
    return Loaded(cast("Seq2Seq", model), name, src_vocab, tgt_vocab, meta, p)


def optimizer_to_flat(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    """Optimizer state as safetensors-ready tensors plus JSON (param groups, scalars)."""
    sd = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for idx, st in sd["state"].items():
        for key, val in st.items():
            if isinstance(val, torch.Tensor):
                tensors[f"state.{idx}.{key}"] = val.detach().contiguous().cpu()
            else:
                scalars[f"{idx}.{key}"] = val
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def load_training(
    path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """Restore parameters, optimizer state and the torch RNG from the resumable checkpoint
    ``path`` (or its ``.NAME.old`` backup when a save was interrupted); return its train_state
    (epoch, step, counters)."""
    p = Path(path)
    if not is_complete(p, resumable=True):
        if not is_complete(backup_of(p), resumable=True):
            raise FileNotFoundError(
                f"no resumable checkpoint in {p} (nor in {backup_of(p)}): "
                f"expected {', '.join(FILES + TRAINING_FILES)}"
            )
        p = backup_of(p)
    state = check.read_json(p / "train_state.json")
    groups = state.get("optimizer", {}).get("param_groups") if isinstance(state, dict) else None
    if not isinstance(groups, list) or not isinstance(state["optimizer"].get("scalars"), dict):
        raise ValueError(
            f"{p / 'train_state.json'} lacks the optimizer's state; the checkpoint is damaged: "
            "resume from another one or train into a new --out"
        )
    weights = p / "model.safetensors"
    try:
        check.check_tensors(weights, check.read_header(weights), check.spec_of(model.state_dict()))
    except ValueError as err:
        raise ValueError(
            f"the checkpoint in {p} does not fit this model ({err}); resume with the options "
            "of the original run, or train into a new --out"
        ) from None
    opt_file = p / "optimizer.safetensors"
    check.check_optimizer(opt_file, check.read_header(opt_file), list(model.parameters()))
    model.load_state_dict(load_file(str(weights)))
    tensors = load_file(str(opt_file))
    rng = tensors.pop("rng.torch")
    per: dict[int, dict[str, Any]] = {}
    for key, val in tensors.items():
        _, idx, name = key.split(".", 2)
        per.setdefault(int(idx), {})[name] = val
    for key, val in state["optimizer"]["scalars"].items():
        idx, _, name = str(key).partition(".")
        if not idx.isdigit() or not name:
            raise ValueError(f"{p / 'train_state.json'}: optimizer scalar {key!r} is malformed")
        per.setdefault(int(idx), {})[name] = val
    try:
        optimizer.load_state_dict({"state": per, "param_groups": groups})
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"{p}: the optimizer state does not fit this model ({err}); resume with the "
            "options of the original run, or train into a new --out"
        ) from None
    if rng.dtype != torch.uint8 or rng.dim() != 1:
        raise ValueError(f"{opt_file}: rng.torch is not a torch RNG state")
    torch.set_rng_state(rng)
    return state


__all__ = [
    "FILES",
    "TRAINING_FILES",
    "Loaded",
    "backup_of",
    "find_checkpoint",
    "foreign_files",
    "is_complete",
    "load",
    "load_training",
    "refuse_foreign",
    "remove",
    "resolve",
    "save",
    "stale_temps",
    "temp_of",
    "write_file",
    "write_text",
]
