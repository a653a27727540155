"""Every model built from attnkit's attention, one file each, in one registry (``MODELS``)
of models of every task family (``attnkit.tasks``): translation's sequence-to-sequence models
(RNNsearch, RNNencdec, Luong, the Transformer; ``Seq2Seq``), the forecaster, HAN, DigitQA, the
captioner and the language models (Transformer-XL, the vanilla Transformer LM). A model class
names the family it learns (its ``family`` attribute, default ``"translate"``).

build_model("rnnsearch", src_vocab=120, tgt_vocab=200, preset="small", emb=32)
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from torch import nn

# importing each model's module registers its model
from . import captioner, digit_qa, forecaster, han, lm, luong, rnnencdec, rnnsearch, transformer  # noqa: F401
from .base import Seq2Seq, Seq2SeqOutput
from .registry import MODELS, ModelEntry, ModelRegistry


def make_config(name: str, *, preset: str | None = None, **overrides: Any) -> Any:
    """The config dataclass of model ``name``: a named preset, then explicit overrides."""
    entry = MODELS[name]
    config_cls, presets = entry.config, entry.presets
    values: dict[str, Any] = {}
    if preset is not None:
        if preset not in presets:
            raise ValueError(
                f"unknown preset {preset!r} for {name}; choose one of {sorted(presets)}"
            )
        values.update(presets[preset])
    known = {f.name for f in fields(config_cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"{name} has no option(s) {unknown}; its options are {sorted(known)}")
    values.update({k: v for k, v in overrides.items() if v is not None})
    return config_cls(**values)


def parse_options(name: str, pairs: list[str]) -> dict[str, Any]:
    """``["score=dot", "layers=2", "input_feeding=false"]`` -> typed config overrides for model
    ``name`` (types from its config dataclass), for ``attnkit train --opt KEY=VALUE``; the
    vocabulary sizes come from the data and cannot be set."""
    config_cls = MODELS[name].config
    types = {f.name: f.type for f in fields(config_cls) if not f.name.endswith("_vocab")}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in types:
            raise ValueError(
                f"--opt {pair!r}: expected KEY=VALUE with KEY one of {sorted(types)} ({name})"
            )
        kind = str(types[key])
        try:
            if kind == "bool":
                if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(raw)
                out[key] = raw.lower() in ("true", "1", "yes")
            elif kind in ("int", "float"):
                out[key] = int(raw) if kind == "int" else float(raw)
            else:
                out[key] = raw
        except ValueError:
            raise ValueError(f"--opt {pair!r}: {key} takes a {kind}, not {raw!r}") from None
    return out


def build_model(name: str, config: Any = None, **kwargs: Any) -> nn.Module:
    """Model ``name`` built from ``config``, or from ``make_config(name, **kwargs)`` (a
    ``preset=`` and overrides) when no config is given: a module of its task family's kind
    (a ``Seq2Seq`` for translation models, see ``ModelEntry``)."""
    model_cls = MODELS[name].model
    return model_cls(make_config(name, **kwargs) if config is None else config)


def build_seq2seq(name: str, config: Any = None, **kwargs: Any) -> Seq2Seq:
    """``build_model`` for a caller that needs a translation model (decoding, the translate
    family's loss): a ValueError that says so when model ``name`` is not a ``Seq2Seq``."""
    model = build_model(name, config, **kwargs)
    if not isinstance(model, Seq2Seq):
        family = getattr(model, "family", "translate")
        fits = sorted(n for n, entry in MODELS.items() if issubclass(entry.model, Seq2Seq))
        raise ValueError(
            f"{name} is a {family} model, not a sequence-to-sequence one; pick one of {fits}"
        )
    return model


def config_to_json(config: Any) -> dict[str, Any]:
    """A model config as the JSON-able dict stored in checkpoints."""
    return asdict(config)


__all__ = [
    "MODELS",
    "ModelEntry",
    "ModelRegistry",
    "Seq2Seq",
    "Seq2SeqOutput",
    "build_model",
    "build_seq2seq",
    "config_to_json",
    "make_config",
    "parse_options",
]
