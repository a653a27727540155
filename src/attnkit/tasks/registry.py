"""The registry of task families: a family's name -> its ``Family`` (family.py), and which
family a model or a data spec belongs to.

A task names its family (its ``Task``, ``attnkit.data.task``; corpora translate); a model class
names the family it can learn (its ``family`` class attribute, default ``"translate"``);
``check_pairing`` refuses a model that cannot learn the data before any work.
"""

from __future__ import annotations

from typing import Any

from .._registry import Lazy, Registry
from .family import Family

FAMILIES: Registry[Lazy] = Registry("task family")
"""Family name -> where its ``Family`` is, imported by ``family(name)`` when first asked for
(a family's module may import models and viewers that translation never needs)."""
FAMILIES.register(Lazy("translate", "attnkit.tasks.translate:TRANSLATE"))
FAMILIES.register(Lazy("forecast", "attnkit.tasks.forecast:FORECAST"))
FAMILIES.register(Lazy("docs", "attnkit.tasks.docs:DOCS"))
FAMILIES.register(Lazy("qa", "attnkit.tasks.qa:QA"))
FAMILIES.register(Lazy("caption", "attnkit.tasks.caption:CAPTION"))
FAMILIES.register(Lazy("lm", "attnkit.tasks.lm:LM"))


def family(name: str) -> Family:
    """The registered family ``name``."""
    found = FAMILIES[name].load()
    assert isinstance(found, Family), f"{FAMILIES[name].where} is not a Family"
    return found


def model_family(model_name: str) -> str:
    """The family model ``model_name`` learns (its class's ``family``; default translate)."""
    from ..models import MODELS

    return str(getattr(MODELS[model_name].model, "family", "translate"))


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
