"""The model registry says what it holds: every entry a ``ModelEntry`` of an ``nn.Module``
class (models of every task family, not only sequence-to-sequence ones), its config
dataclass and presets; ``build_model`` builds any of them, ``build_seq2seq`` only the
translation models and says which to pick otherwise."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from torch import nn

from attnkit.models import MODELS, ModelEntry, Seq2Seq, build_model, build_seq2seq
from attnkit.tasks.registry import model_family


def test_every_entry_is_a_module_class_with_its_config_and_presets() -> None:
    families = set()
    for name, entry in MODELS.items():
        assert isinstance(entry, ModelEntry), name
        assert issubclass(entry.model, nn.Module) and dataclasses.is_dataclass(entry.config)
        assert entry.name == name  # one record per model, registered under its own name
        families.add(model_family(name))
    assert {"translate", "forecast", "docs", "qa", "caption"} <= families
    assert inspect.signature(build_model).return_annotation in (nn.Module, "nn.Module")


def test_an_unknown_model_lists_the_choices_and_the_closest_name() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'rnnserch'; choose one of \[.*\]; "
                                         r"did you mean 'rnnsearch'\?"):  # fmt: skip
        build_model("rnnserch", src_vocab=9, tgt_vocab=8)
    with pytest.raises(ValueError, match="registered twice"):
        MODELS.register(ModelEntry("han", nn.Module, object, {}))


def test_build_seq2seq_builds_translation_models_and_refuses_the_others() -> None:
    model = build_seq2seq("rnnsearch", src_vocab=9, tgt_vocab=8, preset="tiny")
    assert isinstance(model, Seq2Seq)
    han = build_model("han", src_vocab=9, tgt_vocab=8, preset="small")
    assert not isinstance(han, Seq2Seq)
    with pytest.raises(ValueError, match=r"han is a docs model, not a sequence-to-sequence one; "
                                         r"pick one of \[.*'rnnsearch'.*\]"):  # fmt: skip
        build_seq2seq("han", src_vocab=9, tgt_vocab=8, preset="small")
