"""Every file of a checkpoint checked before a model is built from it.

A checkpoint folder is data from outside (a download, a colleague, a tampered copy): its
config could ask for a 56 TB embedding, its tensors could be truncated, of another dtype or
shape, its vocabularies of another size. Each check below reads only JSON and the safetensors
header (never the tensors themselves), and a failure is one ``ValueError`` naming the file and
the key, raised before any real allocation. Shapes and dtypes are compared against the model
built on PyTorch's ``meta`` device, which allocates no memory.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from .._checks import unreadable_safetensors
from ..data.vocab import Vocab
from ..models import MODELS, build_model, make_config

Spec = dict[str, tuple[str, tuple[int, ...]]]  # tensor name -> (dtype, shape)

_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16",
           torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
           torch.bool: "BOOL", torch.uint8: "U8"}  # fmt: skip


def read_json(path: Path) -> Any:
    """A JSON file, or one line saying which file is not JSON text."""
    try:
        return json.loads(path.read_text("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text; the checkpoint is damaged") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); the checkpoint is damaged") from None


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    return True


def read_config(path: Path) -> tuple[str, Any, dict[str, Any]]:
    """``config.json`` -> (model name, its config dataclass, meta), every value's type checked
    against the model's config fields before the dataclass checks the ranges."""
    cfg = read_json(path)
    if not isinstance(cfg, dict) or not isinstance(cfg.get("config"), dict):
        raise ValueError(f'{path}: expected {{"model": NAME, "config": {{...}}}}')
    name = cfg.get("model")
    if not isinstance(name, str) or name not in MODELS:
        raise ValueError(f"{path}: model {name!r} is not one of {sorted(MODELS)}")
    meta = cfg.get("meta", {})
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: meta must be a JSON object, not {type(meta).__name__}")
    kinds = {f.name: str(f.type) for f in fields(MODELS[name].config)}
    for key, value in cfg["config"].items():
        if key not in kinds:
            raise ValueError(f"{path}: {name} has no option {key!r}; its options: {sorted(kinds)}")
        if not _type_ok(kinds[key], value):
            raise ValueError(
                f"{path}: config.{key} must be {kinds[key]}, not {type(value).__name__} {value!r}"
            )
    try:
        return name, make_config(name, **cfg["config"]), meta
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: {err}") from None


def spec_of(tensors: dict[str, torch.Tensor]) -> Spec:
    """Names, safetensors dtypes and shapes of ``tensors`` (a state dict)."""
    return {k: (_DTYPES.get(v.dtype, str(v.dtype)), tuple(v.shape)) for k, v in tensors.items()}


def expected_tensors(name: str, config: Any) -> Spec:
    """The tensors a model of ``config`` holds, from a copy on the meta device (no memory)."""
    with torch.device("meta"):
        model = build_model(name, config)
    return spec_of(model.state_dict())


def read_header(path: Path) -> Spec:
    """The tensors a safetensors file declares, from its header only; a truncated or malformed
    file is one line (safetensors itself checks that the header fits the file's size)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            out = {}
            for key in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                s = f.get_slice(key)
                out[key] = (str(s.get_dtype()), tuple(s.get_shape()))
            return out
    except Exception as err:
        raise unreadable_safetensors(
            path, err, "the checkpoint is damaged: train again or copy it again"
        ) from None


def check_tensors(path: Path, stored: Spec, expected: Spec) -> None:
    """Same names, shapes and dtypes, or one line saying the first few that differ."""
    missing = sorted(set(expected) - set(stored))
    extra = sorted(set(stored) - set(expected))
    if missing or extra:
        raise ValueError(
            f"{path} does not hold the tensors of its config: missing {missing[:3]}, "
            f"unexpected {extra[:3]}"
        )
    for key, (dtype, shape) in expected.items():
        if stored[key][1] != shape:
            raise ValueError(
                f"{path}: {key} has shape {list(stored[key][1])} but config.json asks for "
                f"{list(shape)}; the config and the weights do not belong together"
            )
        if stored[key][0] != dtype:
            raise ValueError(
                f"{path}: {key} is {stored[key][0]}, expected {dtype}; attnkit saves "
                "parameters in the model's own dtype"
            )


def check_finite(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Every floating-point tensor of ``tensors`` (the caller passes the parameters: a buffer
    may hold NaN on purpose, e.g. the captioner's reward baseline before its first update)
    holds only finite numbers: a model with a NaN or an inf weight would print empty or
    garbage output with exit 0. One pass over the loaded weights (the cost of reading them)."""
    for key, t in tensors.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            bad = "NaN" if bool(torch.isnan(t).any()) else "inf"
            raise ValueError(
                f"{path}: {key} holds {bad} values; the model diverged or the file is damaged: "
                "use an earlier checkpoint or train again"
            )


VOCABS = ("src_vocab.json", "tgt_vocab.json")  # read with the config's src_vocab, tgt_vocab


def vocab_record(vocab: Vocab) -> dict[str, Any]:
    """What config.json records of a vocabulary at save time: its size and the sha256 of its
    tokens in order (the JSON list), so that a file cut, re-ordered or swapped is told apart."""
    digest = hashlib.sha256(json.dumps(vocab.tokens, ensure_ascii=False).encode("utf-8"))
    return {"tokens": len(vocab), "sha256": digest.hexdigest()}


def read_vocab(path: Path, size: int | None, recorded: Any = None) -> Vocab:
    """A vocabulary file that is the one the weights were trained with: the one ``recorded``
    (``vocab_record``) in config.json; for a checkpoint saved before records, one with as
    many tokens as the model's embedding has rows (``size``, when known)."""
    text = read_json(path)
    try:
        vocab = Vocab.from_json(json.dumps(text))
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    if recorded is not None:
        if vocab_record(vocab) != recorded:
            raise ValueError(
                f"{path} ({len(vocab)} tokens) is not the vocabulary this checkpoint was saved "
                f"with (config.json records {recorded.get('tokens')} tokens, sha256 "
                f"{str(recorded.get('sha256'))[:12]}...); its ids would read as other tokens: "
                f"put the checkpoint's own {path.name} back, or train again"
            )
    elif size is not None and len(vocab) != size:
        raise ValueError(
            f"{path} has {len(vocab)} tokens but the model's embedding has {size} rows; "
            "the vocabulary and the weights do not belong together: put the checkpoint's own "
            f"{path.name} back, or train again"
        )
    return vocab


def read_vocabs(folder: Path, config: Any) -> tuple[Vocab, Vocab]:
    """(source, target) vocabulary of the checkpoint ``folder`` whose model config is
    ``config``, each checked by ``read_vocab`` against config.json's record."""
    records = read_json(folder / "config.json").get("vocab")
    if records is not None and not (
        isinstance(records, dict)
        and all(isinstance(records.get(n), dict) for n in VOCABS)
    ):
        raise ValueError(f"{folder / 'config.json'}: vocab must map {list(VOCABS)} to "
                         '{"tokens": N, "sha256": HEX}; the checkpoint is damaged')  # fmt: skip
    src, tgt = (
        read_vocab(folder / n, getattr(config, n.removesuffix(".json"), None),
                   None if records is None else records[n])
        for n in VOCABS
    )  # fmt: skip
    return src, tgt


def check_optimizer(path: Path, stored: Spec, params: list[torch.Tensor]) -> None:
    """Adam's per-parameter tensors (``state.IDX.NAME``) fit the parameters they update."""
    for key, (_, shape) in stored.items():
        if key == "rng.torch":
            continue
        parts = key.split(".", 2)
        if len(parts) != 3 or parts[0] != "state" or not parts[1].isdigit():
            raise ValueError(f"{path}: unexpected tensor {key!r}; the checkpoint is damaged")
        idx = int(parts[1])
        if idx >= len(params):
            raise ValueError(f"{path}: {key} names parameter {idx} of {len(params)}")
        if parts[2] != "step" and shape != tuple(params[idx].shape):
            raise ValueError(
                f"{path}: {key} has shape {list(shape)}, its parameter "
                f"{list(params[idx].shape)}; the optimizer state belongs to another model"
            )
    if "rng.torch" not in stored:
        raise ValueError(f"{path} lacks the RNG state rng.torch; the checkpoint is damaged")


__all__ = [
    "check_finite",
    "check_optimizer",
    "check_tensors",
    "expected_tensors",
    "read_config",
    "read_header",
    "read_json",
    "read_vocab",
    "read_vocabs",
    "vocab_record",
    "spec_of",
]
