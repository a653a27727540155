"""Checks of the model ``attnkit.fit`` is about to build, made before any parameter is
allocated: that it fits the device's memory (the sizes come from a copy on PyTorch's ``meta``
device), and that a resumed run asks for the model the run was trained with (its preset and
options, compared with the checkpoint's ``config.json``)."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ..models import MODELS, build_model, make_config

# what training holds per parameter: the parameter, its gradient and Adam's two moments
TRAINING_COPIES = 4


def device_memory(device: str) -> int:
    """Bytes of memory of ``device``: the GPU's total, or the machine's physical memory."""
    if device.startswith("cuda"):
        return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def check_fits(name: str, kwargs: dict[str, Any], device: str) -> None:
    """Refuse, in one line, a model whose training state (parameters, gradients, Adam's
    moments) needs more memory than ``device`` has: ``--emb 1000000000000`` is an error, not
    an allocation of terabytes."""
    try:
        with torch.device("meta"):
            probe = build_model(name, **kwargs)
    except RuntimeError as err:  # sizes whose element count overflows
        raise ValueError(f"{name}: these widths are too large to build ({err})") from None
    n = sum(p.numel() for p in probe.parameters())
    need = TRAINING_COPIES * sum(p.numel() * p.element_size() for p in probe.parameters())
    have = device_memory(device)
    if need > have:
        raise ValueError(
            f"{name} with these widths has {n:,} parameters: training needs about "
            f"{need / 2**30:,.1f} GiB (parameters, gradients and Adam's moments), more than "
            f"the {have / 2**30:,.1f} GiB of {device}; pass smaller widths (--emb, "
            "--enc-hidden, --dec-hidden, --opt ...) or a smaller --preset"
        )


def _presets_matching(name: str, kwargs: dict[str, Any], stored: dict[str, Any]) -> list[str]:
    """The presets of ``name`` that, with this command's options, give the stored config."""
    presets = MODELS[name].presets
    found = []
    for preset in presets:
        try:
            if asdict(make_config(name, **{**kwargs, "preset": preset})) == stored:
                found.append(preset)
        except (TypeError, ValueError):
            continue
    return found


def check_resume(name: str, kwargs: dict[str, Any], ckpt: Path) -> None:
    """On ``--resume``: the model this command describes must be the one in ``ckpt``; else
    one line naming the difference (the model, the preset, or the options), not a mismatch of
    tensors in ``config.json``."""
    from .checkpoint_check import read_json

    raw = read_json(ckpt / "config.json")
    if not isinstance(raw, dict) or not isinstance(raw.get("config"), dict):
        return  # a damaged config.json is reported, with its path, when the checkpoint loads
    run, stored = raw.get("model"), raw["config"]
    out = ckpt.parent
    if run != name:
        raise ValueError(
            f"the run in {out} was trained with --model {run}; this command says {name}: "
            f"pass --model {run} to resume it, or train into a new --out"
        )
    try:
        wanted = asdict(make_config(name, **kwargs))
    except (TypeError, ValueError):
        return
    if wanted == stored:
        return
    preset = kwargs.get("preset")
    matching = _presets_matching(name, kwargs, stored)
    if matching and preset not in matching:
        raise ValueError(
            f"the run in {out} was trained with preset {matching[0]}; this command says "
            f"{preset}: pass --preset {matching[0]} to resume it, or train into a new --out"
        )
    diff = [f"{k} {stored.get(k)!r} (this command: {v!r})" for k, v in wanted.items()
            if stored.get(k) != v]  # fmt: skip
    raise ValueError(
        f"the run in {out} was trained with other model options: {'; '.join(diff[:4])}; "
        "resume with the options of the original run, or train into a new --out"
    )


__all__ = ["check_fits", "check_resume", "device_memory"]
