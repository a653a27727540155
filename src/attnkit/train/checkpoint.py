"""Checkpoints as a directory of plain files: nothing is ever unpickled.

    config.json        {"model": "rnnsearch", "config": {...}, "meta": {...}}
    model.safetensors  the parameters
    src_vocab.json, tgt_vocab.json
    optimizer.safetensors + train_state.json   (resumable checkpoints only: optimizer
                       tensors, the torch RNG state, and epoch/step/early-stopping counters)

A directory is written whole under a temporary name and then renamed into place, so a run
killed at any moment leaves either the old checkpoint or the new one, never a mix.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ..data.vocab import Vocab
from ..models import Seq2Seq, build_model, config_to_json, make_config


@dataclass
class Loaded:
    model: Seq2Seq
    model_name: str
    src_vocab: Vocab
    tgt_vocab: Vocab
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path = Path(".")


def write_text(path: Path, text: str) -> None:
    """Atomic single-file write: a temporary file in the same folder, then os.replace."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _replace_dir(tmp: Path, path: Path) -> None:
    old = path.with_name(f".{path.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if path.exists():
        os.replace(path, old)
    os.replace(tmp, path)
    if old.exists():
        shutil.rmtree(old)


def resolve(path: str | Path) -> Path:
    """A model directory; a training output folder resolves to its ``best`` (then ``last``)."""
    p = Path(path)
    for cand in (p, p / "best", p / "last", p.with_name(f".{p.name}.old")):
        if (cand / "config.json").is_file():
            return cand
    raise FileNotFoundError(
        f"no checkpoint at {p}: expected config.json there or in {p}/best; "
        "train one with `attnkit train --out DIR`"
    )


def save(
    path: str | Path,
    model: Seq2Seq,
    model_name: str,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    meta: dict[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    train_state: dict[str, Any] | None = None,
) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    cfg = {"model": model_name, "config": config_to_json(model.config), "meta": meta or {}}
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2, ensure_ascii=False), "utf-8")
    save_file(
        {k: v.detach().contiguous() for k, v in model.state_dict().items()},
        str(tmp / "model.safetensors"),
    )
    (tmp / "src_vocab.json").write_text(src_vocab.to_json(), "utf-8")
    (tmp / "tgt_vocab.json").write_text(tgt_vocab.to_json(), "utf-8")
    if optimizer is not None:
        tensors, opt_json = optimizer_to_flat(optimizer)
        tensors["rng.torch"] = torch.get_rng_state()
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        state = {"optimizer": opt_json, **(train_state or {})}
        (tmp / "train_state.json").write_text(json.dumps(state, indent=2), "utf-8")
    _replace_dir(tmp, path)
    return path


def load(path: str | Path, device: str | torch.device = "cpu") -> Loaded:
    p = resolve(path)
    try:
        cfg = json.loads((p / "config.json").read_text("utf-8"))
        name = cfg["model"]
        config = make_config(name, **cfg["config"])
    except (KeyError, json.JSONDecodeError) as err:
        raise ValueError(f"{p / 'config.json'} is not an attnkit checkpoint config: {err}") from err
    model = build_model(name, config)
    state = load_file(str(p / "model.safetensors"), device="cpu")
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(
            f"{p}: weights do not fit the config (missing {missing}, unexpected {unexpected})"
        )
    src_vocab = Vocab.from_json((p / "src_vocab.json").read_text("utf-8"))
    tgt_vocab = Vocab.from_json((p / "tgt_vocab.json").read_text("utf-8"))
    model.to(device).eval()
    return Loaded(model, name, src_vocab, tgt_vocab, cfg.get("meta", {}), p)


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
    """Restore parameters, optimizer state and the torch RNG from a resumable checkpoint;
    return its train_state (epoch, step, counters)."""
    p = Path(path)
    if not (p / "train_state.json").is_file():
        old = p.with_name(f".{p.name}.old")
        if (old / "train_state.json").is_file():
            p = old
        else:
            raise FileNotFoundError(f"no resumable checkpoint in {p} (train_state.json missing)")
    state = json.loads((p / "train_state.json").read_text("utf-8"))
    try:
        model.load_state_dict(load_file(str(p / "model.safetensors")))
    except RuntimeError as err:
        raise ValueError(
            f"the checkpoint in {p} does not fit this model ({str(err).splitlines()[0]}); "
            "resume with the options of the original run, or train into a new --out"
        ) from None
    tensors = load_file(str(p / "optimizer.safetensors"))
    rng = tensors.pop("rng.torch")
    per: dict[int, dict[str, Any]] = {}
    for key, val in tensors.items():
        _, idx, name = key.split(".", 2)
        per.setdefault(int(idx), {})[name] = val
    for key, val in state["optimizer"]["scalars"].items():
        idx, name = key.split(".", 1)
        per.setdefault(int(idx), {})[name] = val
    optimizer.load_state_dict({"state": per, "param_groups": state["optimizer"]["param_groups"]})
    torch.set_rng_state(rng)
    return state


__all__ = ["Loaded", "load", "load_training", "resolve", "save", "write_text"]
