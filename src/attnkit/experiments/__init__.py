"""Experiments that reproduce the claims and figures of papers on data generated here.

A new experiment is one module defining ``EXPERIMENT`` (see base.py) and one line below.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from dataclasses import dataclass

from .._registry import Lazy, Registry
from .base import Experiment, flags_of

EXPERIMENTS: Registry[Lazy] = Registry("experiment")
"""Experiment name -> where its ``EXPERIMENT`` is (imported by ``get``), for ``attnkit
experiment NAME``."""
for _name, _module in (
    ("length", "attnkit.experiments.length"),  # Bahdanau 2015, Fig. 2: BLEU by source length
    ("complexity", "attnkit.experiments.complexity"),  # Vaswani 2017, Table 1: cost per layer
    ("scaling", "attnkit.experiments.scaling"),  # Vaswani 2017, 3.2.1: why qᵀk/√d_k
    ("parallel", "attnkit.experiments.parallel"),  # Vaswani 2017, Table 1: sequential ops in n
    ("alignment", "attnkit.experiments.alignment"),  # Luong 2015, Table 6: AER global vs local
    ("heads", "attnkit.experiments.heads"),  # Vaswani 2017, Table 3 (A): number of heads
    ("distance", "attnkit.experiments.distance"),  # Vaswani 2017 §4: accuracy, gradient vs Δ
    ("coref", "attnkit.experiments.coref"),  # Vaswani 2017 Fig. 4: a head that resolves "it"
    ("softness", "attnkit.experiments.softness"),  # Deng 2018 / Xu 2015, Table 1: soft vs hard
    ("series", "attnkit.experiments.series"),  # attention over the past: MASE, seasonal lags
    ("structure", "attnkit.experiments.structure"),  # Lu 2016, Yang 2016, Shen 2018: structures
    # Dosovitskiy 2021: CNN vs ViT by data
    ("inductive-bias", "attnkit.experiments.inductive_bias"),
    ("context", "attnkit.experiments.context"),  # Dai 2019: Transformer-XL's memory and speed
    ("extrapolation", "attnkit.experiments.extrapolation"),  # Press 2022: train short, test long
    ("sparse", "attnkit.experiments.sparse"),  # Child 2019: factorised attention vs dense
    ("explanation", "attnkit.experiments.explanation"),  # Jain & Wallace 2019 vs Wiegreffe 2019
    ("linear", "attnkit.experiments.linear"),  # Katharopoulos 2020: linear attention, cost and bpc
    ("streaming", "attnkit.experiments.streaming"),  # Xiao 2023: attention sinks, KV window
):
    EXPERIMENTS.register(Lazy(_name, f"{_module}:EXPERIMENT"))


def get(name: str) -> Experiment:
    """The experiment ``name`` (its module imported now); a ValueError listing the known ones."""
    experiment = EXPERIMENTS[name].load()
    assert isinstance(experiment, Experiment) and experiment.name == name
    return experiment


@dataclass(frozen=True)
class Summary:
    """What ``attnkit experiment`` lists and ``--help`` shows of an experiment: its claim,
    its typical run time and its description."""

    name: str
    help: str
    typical: str
    description: str


def summary(name: str) -> Summary:
    """The summary of experiment ``name``, read from the literal arguments of the
    ``EXPERIMENT = Experiment.of(...)`` line of its module's source, without importing it (an
    experiment imports its models and plotting; listing twelve of them should not); the
    module is imported only where its source cannot be read that way."""
    module = EXPERIMENTS[name].module
    try:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        call = next(
            node.value for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and any(isinstance(t, ast.Name) and t.id == "EXPERIMENT" for t in node.targets)
        )  # fmt: skip
        given = {k.arg: ast.literal_eval(k.value) for k in call.keywords
                 if k.arg in ("help", "typical", "description")}  # fmt: skip
        return Summary(name, given["help"], given.get("typical", "unknown"),
                       given["description"])  # fmt: skip
    except (AssertionError, OSError, StopIteration, KeyError, ValueError, SyntaxError):
        exp = get(name)
        return Summary(name, exp.help, exp.typical, exp.description)


__all__ = ["EXPERIMENTS", "Experiment", "Summary", "flags_of", "get", "summary"]
