"""The old import paths of the modules that moved into rooms (README, "Where things moved")
still work for one release, as the very same modules: a name imported either way is one
object, and a patch through the old name is seen through the new one."""

from __future__ import annotations

import importlib

import pytest

MOVED = {
    "scores": "stages.scores", "alignment": "stages.alignment",
    "normalisers": "stages.normalisers", "reduction": "stages.reduction",
    "capabilities": "stages.capabilities", "additive_chunks": "stages._additive_chunks",
    "hard": "mechanisms.hard", "variational": "mechanisms.variational",
    "multidim": "mechanisms.multidim", "coattention": "mechanisms.coattention",
    "hierarchical": "mechanisms.hierarchical", "disan": "mechanisms.disan",
    "stepwise": "mechanisms.stepwise", "hf_attention": "interop.hf_attention",
    "hf": "interop.hf", "families.caption": "tasks.caption", "families.docs": "tasks.docs",
    "families.forecast": "tasks.forecast", "families.qa": "tasks.qa",
}  # fmt: skip


@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_old_name_is_the_new_module(old: str) -> None:
    before = importlib.import_module(f"attnkit.{old}")
    after = importlib.import_module(f"attnkit.{MOVED[old]}")
    assert before is after
    public = [n for n in dir(after) if not n.startswith("_")]
    assert public and all(getattr(before, n) is getattr(after, n) for n in public)


def test_from_imports_and_patches_through_the_old_name(monkeypatch) -> None:
    from attnkit.scores import DotScore as old
    from attnkit.stages.scores import DotScore as new

    assert old is new
    import attnkit.normalisers
    import attnkit.stages.normalisers

    monkeypatch.setattr(attnkit.normalisers, "SENTINEL", 1, raising=False)
    assert attnkit.stages.normalisers.SENTINEL == 1  # type: ignore[attr-defined]


def test_a_plain_import_reaches_the_old_names() -> None:
    """``import attnkit`` then ``attnkit.scores.DotScore``, in a fresh interpreter."""
    import subprocess
    import sys

    code = ("import attnkit; print(attnkit.scores.DotScore.__module__, "
            "attnkit.hard.SampleReduce.__module__)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()  # fmt: skip
    assert out == ["attnkit.stages.scores", "attnkit.mechanisms.hard"]


def test_the_old_families_package_still_imports() -> None:
    """``from attnkit.families.caption import CAPTION``, as experiments and users wrote it."""
    import attnkit.families
    import attnkit.tasks
    from attnkit.families.caption import CAPTION
    from attnkit.tasks.caption import CAPTION as moved

    assert CAPTION is moved and attnkit.families.caption is attnkit.tasks.caption


@pytest.mark.parametrize("where", ["attnkit", "attnkit.nn", "attnkit.modules"])
def test_multiheadattention_is_attentionheads_with_a_warning(where: str) -> None:
    """attnkit's own multi-head module is ``AttentionHeads`` (not to be mistaken for
    ``attnkit.nn.MultiheadAttention``, PyTorch's drop-in); the old name works for one release."""
    module = importlib.import_module(where)
    with pytest.warns(DeprecationWarning, match=r"MultiHeadAttention is now .*AttentionHeads"):
        old = module.MultiHeadAttention
    assert old is module.AttentionHeads is importlib.import_module("attnkit").AttentionHeads
    assert "MultiHeadAttention" not in module.__all__
    assert importlib.import_module("attnkit.nn").MultiheadAttention is not old
    with pytest.raises(AttributeError):
        module.NotAName  # noqa: B018
