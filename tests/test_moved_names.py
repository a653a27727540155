"""The old import paths of the modules that moved into rooms are gone in 0.2.0 (0.1.0 was
never released; CHANGELOG.md lists old -> new): importing one fails with ModuleNotFoundError
rather than silently handing over another module, ``attnkit.<old>`` is an AttributeError, and
no module is left at the package root that only re-exports another."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import attnkit

SRC = Path(__file__).resolve().parents[1] / "src" / "attnkit"
MOVED = {
    "scores": "stages.scores", "alignment": "stages.alignment",
    "normalisers": "stages.normalisers", "reduction": "stages.reduction",
    "capabilities": "stages.capabilities", "additive_chunks": "stages._additive_chunks",
    "hard": "mechanisms.hard", "variational": "mechanisms.variational",
    "multidim": "mechanisms.multidim", "coattention": "mechanisms.coattention",
    "hierarchical": "mechanisms.hierarchical", "disan": "mechanisms.disan",
    "stepwise": "mechanisms.stepwise", "hf_attention": "interop.hf_attention",
    "families": "tasks", "families.caption": "tasks.caption", "families.docs": "tasks.docs",
    "families.forecast": "tasks.forecast", "families.qa": "tasks.qa",
    "train.family": "tasks.family",
}  # fmt: skip


@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_old_name_is_gone_and_the_new_one_imports(old: str) -> None:
    importlib.import_module(f"attnkit.{MOVED[old]}")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"attnkit.{old}")


@pytest.mark.parametrize("old", sorted(n for n in MOVED if "." not in n))
def test_a_plain_import_does_not_reach_an_old_name(old: str) -> None:
    with pytest.raises(AttributeError):
        getattr(attnkit, old)


def test_hf_is_still_the_public_name_of_the_interop_module() -> None:
    """``attnkit.hf`` is the documented name of the Hugging Face bridge, not a moved module."""
    code = "import attnkit; print(attnkit.hf.__name__)"
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("needs the hf extra (transformers)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()  # fmt: skip
    assert out == ["attnkit.interop.hf"]


def _only_reexports(path: Path) -> bool:
    """Whether a module's body is nothing but imports (and a docstring) plus a
    ``sys.modules[__name__] = ...`` swap: an alias of another module."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    rest = [n for n in body if not isinstance(n, (ast.Import, ast.ImportFrom))
            and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]  # fmt: skip
    swaps = [n for n in rest if isinstance(n, ast.Assign) and "sys.modules" in ast.unparse(n)]
    return bool(swaps) and len(swaps) == len(rest)


def test_no_module_swaps_itself_for_another_but_the_public_hf_name(tmp_path: Path) -> None:
    planted = tmp_path / "alias.py"
    planted.write_text('"""x"""\nimport sys\nfrom .stages import scores as _m\n'
                       "sys.modules[__name__] = _m\n")  # fmt: skip
    assert _only_reexports(planted)
    aliases = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if _only_reexports(p))
    assert aliases == ["hf.py"], aliases


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
