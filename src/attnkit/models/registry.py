"""The registry of models: one ``ModelEntry`` per ``--model`` name, registered in the module
that defines the model (``MODELS.register(ModelEntry("han", HAN, HANConfig, PRESETS))`` at
the end of han.py); ``attnkit.models`` imports every model module, so the registry is full
once it is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from .._registry import Registry


@dataclass(frozen=True)
class ModelEntry:
    """One registered model: its ``--model`` name, its ``nn.Module`` class, the config
    dataclass the class takes, and its named presets (preset name -> config values)."""

    name: str
    model: type[nn.Module]
    config: type
    presets: Mapping[str, Mapping[str, Any]]


ModelRegistry = Registry[ModelEntry]
"""Model name -> its ``ModelEntry``: the type of ``MODELS``."""

MODELS: ModelRegistry = Registry("model")
"""Model name -> its ``ModelEntry``: ``--model NAME``."""

__all__ = ["MODELS", "ModelEntry", "ModelRegistry"]
