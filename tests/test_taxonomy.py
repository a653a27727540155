"""The family of attnkit.taxonomy (what `attnkit info` prints): every place a branch names
exists, every axis of the notes' taxonomy is there, and `attnkit info` shows them."""

import importlib

import pytest

from attnkit.cli import main
from attnkit.models import MODELS
from attnkit.registry import VARIANTS
from attnkit.taxonomy import AXES, FAMILY


def _exists(place: str) -> bool:
    kind, _, rest = place.partition(":")
    if kind == "registry":
        stage, name = rest.split("/")
        return any(v.stage == stage and v.name == name for v in VARIANTS)
    if kind == "module":
        module, _, attr = rest.partition(":")
        found = importlib.import_module(module)
        return not attr or hasattr(found, attr)
    if kind == "model":
        return rest in MODELS
    if kind == "flag":
        return False  # checked against the train parser below
    raise AssertionError(f"unknown kind of place {place!r}")


@pytest.mark.parametrize("branch", FAMILY, ids=lambda b: f"{b.axis}:{b.name}")
def test_every_place_a_branch_names_exists(branch, capsys) -> None:
    assert branch.where, f"{branch.name} says nowhere"
    for place in branch.where:
        if place.startswith("flag:"):  # `attnkit train --help` offers the value under the flag
            flag, value = place[len("flag:"):].split()
            with pytest.raises(SystemExit):
                main(["train", "--help"])
            text = capsys.readouterr().out
            lines = text[text.index(f"  {flag} "):].split("\n  --")[0]
            assert value in lines, f"{flag} does not offer {value}"
        else:
            assert _exists(place), f"{branch.name}: {place} does not exist"


def test_the_notes_axes_are_all_there() -> None:
    assert set(AXES) >= {"score", "alignment", "sparsity", "position", "softness", "input",
                         "output", "model"}  # fmt: skip
    names = {b.name for b in FAMILY}
    for needed in ("global", "self", "multi-head", "variational attention",
                   "co-attention (parallel, alternating)"):  # fmt: skip
        assert needed in names


def test_info_prints_the_family_then_the_variants(capsys) -> None:
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.index("softness:") < out.index("registered variants")
    assert 'align="local-p"' in out and "--softness variational" in out
    assert "attnkit.mechanisms.coattention" in out and "--model han" in out
    for v in VARIANTS:
        assert v.name in out
