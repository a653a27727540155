"""The models built from attnkit's attention, one file each, in one registry: the
sequence-to-sequence models (RNNsearch, RNNencdec, Luong, the Transformer) and the models of
the other task families (the forecaster, HAN, DigitQA, the captioner, the language models).

build_model("rnnsearch", src_vocab=120, tgt_vocab=200, preset="small", emb=32)
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from . import captioner, digit_qa, forecaster, han, lm, luong, rnnencdec, rnnsearch, transformer
from .base import Seq2Seq, Seq2SeqOutput

MODELS: dict[str, tuple[type, type, dict[str, dict[str, Any]]]] = {
    "rnnsearch": (rnnsearch.RNNSearch, rnnsearch.RNNSearchConfig, rnnsearch.PRESETS),
    "rnnencdec": (rnnencdec.RNNEncDec, rnnencdec.RNNEncDecConfig, rnnencdec.PRESETS),
    "luong": (luong.Luong, luong.LuongConfig, luong.PRESETS),
    "transformer": (transformer.Transformer, transformer.TransformerConfig, transformer.PRESETS),
    "forecaster": (forecaster.Forecaster, forecaster.ForecasterConfig, forecaster.PRESETS),
    "han": (han.HAN, han.HANConfig, han.PRESETS),
    "digit-qa": (digit_qa.DigitQA, digit_qa.DigitQAConfig, digit_qa.PRESETS),
    "captioner": (captioner.Captioner, captioner.CaptionerConfig, captioner.PRESETS),
    "transformer-xl": (lm.TransformerXL, lm.TransformerXLConfig, lm.XL_PRESETS),
    "transformer-lm": (lm.TransformerLM, lm.TransformerLMConfig, lm.PRESETS),
}
"""Model name -> (model class, its config dataclass, its named presets): ``--model NAME``."""


def _entry(name: str) -> tuple[type, type, dict[str, dict[str, Any]]]:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    return MODELS[name]


def make_config(name: str, *, preset: str | None = None, **overrides: Any) -> Any:
    """The config dataclass of model ``name``: a named preset, then explicit overrides."""
    _, config_cls, presets = _entry(name)
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
    _, config_cls, _ = _entry(name)
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


def build_model(name: str, config: Any = None, **kwargs: Any) -> Seq2Seq:
    """Model ``name`` built from ``config``, or from ``make_config(name, **kwargs)`` (a
    ``preset=`` and overrides) when no config is given."""
    model_cls, _, _ = _entry(name)
    return model_cls(make_config(name, **kwargs) if config is None else config)


def config_to_json(config: Any) -> dict[str, Any]:
    """A model config as the JSON-able dict stored in checkpoints."""
    return asdict(config)


__all__ = [
    "MODELS",
    "Seq2Seq",
    "Seq2SeqOutput",
    "build_model",
    "config_to_json",
    "make_config",
    "parse_options",
]
