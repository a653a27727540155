"""One Family per kind of task, translation included, in attnkit/tasks/: the commands read a
family's capabilities (``translates``), never its name; the type and its registry live in
tasks/ too, below the training loop, and nothing in tasks/ imports attnkit.train."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from attnkit.tasks import registry as fam_mod

COMMANDS = Path(__file__).resolve().parents[2] / "src" / "attnkit" / "cli"


def test_every_family_lives_in_tasks_and_only_translate_translates() -> None:
    for name, lazy in fam_mod.FAMILIES.items():
        assert lazy.where.startswith(f"attnkit.tasks.{name}:"), lazy
    assert [n for n in fam_mod.FAMILIES if fam_mod.family(n).translates] == ["translate"]
    translate = importlib.import_module("attnkit.tasks.translate")
    assert fam_mod.family("translate") is translate.TRANSLATE


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


def test_the_loop_trains_translation_unless_given_a_family() -> None:
    """``train()`` without ``family`` trains translation (``fit`` passes the family of its
    data: tests/train/test_family.py trains another through it); the loop never looks a
    family up by name."""
    import inspect

    from attnkit.tasks.translate import TRANSLATE
    from attnkit.train import loop

    for fn in (loop.train, loop.valid_loss):
        assert TRANSLATE in [p.default for p in inspect.signature(fn).parameters.values()]
    assert not hasattr(fam_mod, "translation")  # one name for it: family("translate")
