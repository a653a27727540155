"""The package layers: train/ and viz/ both use eval/ and decode/, and neither imports the
other (nor do eval/ and decode/ import either of them)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "attnkit"


def imported_packages(package: str) -> set[tuple[str, str]]:
    """(file, attnkit subpackage) for every import in src/attnkit/<package>/, relative or
    absolute, at any depth in the file (imports inside functions count too)."""
    found = set()
    for path in sorted((SRC / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                depth = len(path.relative_to(SRC).parts) - 1  # 1 for attnkit/<package>/x.py
                if node.level == 0:
                    names = [node.module or ""]
                elif node.level > depth:  # ..x from attnkit/<package>/: attnkit.x
                    names = [f"attnkit.{node.module or ''}"]
                    names += [f"attnkit.{a.name}" for a in node.names if not node.module]
                else:
                    names = [f"attnkit.{package}"]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "attnkit" and len(parts) > 1:
                    found.add((path.name, parts[1]))
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("train", {"viz", "tasks", "families"}),  # tasks/ glue train, viz and models together
        ("viz", {"train", "tasks", "families"}),
        ("eval", {"train", "viz", "commands"}),
        ("decode", {"train", "viz", "eval", "commands"}),
        # the rooms of the core (README, "The tree, room by room"): a stage imports nothing
        # above it; mechanisms build on stages and core, never on a model or a task
        ("stages", {"core", "modules", "registry", "mechanisms", "local", "interop", "nn",
                    "models", "tasks", "families", "data", "decode", "eval", "train", "viz",
                    "bench", "experiments", "commands", "cli"}),
        ("mechanisms", {"models", "tasks", "families", "data", "decode", "eval", "train", "viz",
                        "bench", "experiments", "commands", "cli", "interop"}),
        ("local", {"core", "modules", "registry", "mechanisms", "models", "experiments",
                   "commands", "interop"}),
        ("models", {"experiments", "commands", "cli", "bench", "tasks"}),
        ("interop", {"models", "experiments", "commands", "train", "viz"}),
    ],
)
def test_package_does_not_import(package: str, forbidden: set[str]) -> None:
    bad = sorted((f, p) for f, p in imported_packages(package) if p in forbidden)
    assert not bad, f"attnkit/{package} imports {bad}"
