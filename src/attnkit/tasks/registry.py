"""The registry of task families: a family's name -> its ``Family`` (family.py), and which
family a model or a data spec belongs to.

A task names its family (``attnkit.data.tasks.TASK_FAMILY``; corpora translate); a model class
names the family it can learn (its ``family`` class attribute, default ``"translate"``);
``check_pairing`` refuses a model that cannot learn the data before any work.
"""

from __future__ import annotations

import importlib
from typing import Any

from .family import Family

# name -> "module:attribute" of its Family, imported when first asked for (a family's module
# may import models and viewers that translation never needs)
FAMILIES: dict[str, str] = {
    "translate": "attnkit.tasks.translate:TRANSLATE",
    "forecast": "attnkit.tasks.forecast:FORECAST",
    "docs": "attnkit.tasks.docs:DOCS",
    "qa": "attnkit.tasks.qa:QA",
    "caption": "attnkit.tasks.caption:CAPTION",
    "lm": "attnkit.tasks.lm:LM",
}
"""Family name -> ``"module:attribute"`` of its ``Family`` (imported by ``family(name)``)."""


def family(name: str) -> Family:
    """The registered family ``name``."""
    if name not in FAMILIES:
        raise ValueError(f"unknown task family {name!r}; known: {sorted(FAMILIES)}")
    module, _, attr = FAMILIES[name].partition(":")
    found = getattr(importlib.import_module(module), attr)
    assert isinstance(found, Family), f"{FAMILIES[name]} is not a Family"
    return found


def model_family(model_name: str) -> str:
    """The family model ``model_name`` learns (its class's ``family``; default translate)."""
    from ..models import MODELS

    if model_name not in MODELS:
        raise ValueError(f"unknown model {model_name!r}; choose one of {sorted(MODELS)}")
    return str(getattr(MODELS[model_name][0], "family", "translate"))


def data_family(spec: dict[str, Any]) -> str:
    """The family of a data spec (see data/source.py): its task's, or translate (corpora)."""
    from ..data.tasks import task_family

    return task_family(spec["task"]) if spec.get("task") else "translate"


def check_pairing(model_name: str, spec: dict[str, Any]) -> Family:
    """The family shared by the model and the data; a ValueError that names the models that
    can learn the data when the model cannot."""
    from ..models import MODELS

    wanted, has = data_family(spec), model_family(model_name)
    if wanted != has:
        fits = sorted(m for m in MODELS if model_family(m) == wanted)
        what = f"task {spec['task']!r}" if spec.get("task") else "a parallel corpus"
        raise ValueError(
            f"model {model_name!r} learns {has} tasks, but {what} is a {wanted} task; "
            f"use --model {' | '.join(fits) if fits else '(none registered yet)'}"
        )
    return family(wanted)


__all__ = ["FAMILIES", "check_pairing", "data_family", "family", "model_family"]
