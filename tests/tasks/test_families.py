"""One Family per kind of task, translation included, in attnkit/tasks/: the commands read a
family's capabilities (``translates``), never its name; the old names of the moved family
parts (``attnkit.families``, ``attnkit.train.family.TRANSLATE``) still reach the same objects."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from attnkit.train import family as fam_mod

COMMANDS = Path(__file__).resolve().parents[2] / "src" / "attnkit" / "cli"


def test_every_family_lives_in_tasks_and_only_translate_translates() -> None:
    for name, where in fam_mod.FAMILIES.items():
        assert where.startswith(f"attnkit.tasks.{name}:"), where
    assert [n for n in fam_mod.FAMILIES if fam_mod.family(n).translates] == ["translate"]
    assert fam_mod.translation() is importlib.import_module("attnkit.tasks.translate").TRANSLATE


def _name_compares(path: Path) -> list[str]:
    """The lines of ``path`` that compare something with a registered family's name."""
    names = set(fam_mod.FAMILIES)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and side.value in names:
                    found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_command_branches_on_a_family_name() -> None:
    found = [line for p in sorted(COMMANDS.glob("*.py")) for line in _name_compares(p)]
    assert not found, f"compare a Family capability, not its name: {found}"


def test_the_name_check_sees_a_branch_on_a_name(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('if kind != "translate":\n    pass\nif "qa" == name:\n    pass\n')
    assert len(_name_compares(planted)) == 2


@pytest.mark.parametrize("name", ["TRANSLATE", "translate_loss", "translate_eval_loss",
                                  "translate_score"])  # fmt: skip
def test_the_moved_translate_names_still_reach_the_same_objects(name: str) -> None:
    tasks_translate = importlib.import_module("attnkit.tasks.translate")
    assert getattr(fam_mod, name) is getattr(tasks_translate, name)
    with pytest.raises(AttributeError):
        fam_mod.NOT_A_NAME  # noqa: B018
