"""The package layers: train/ and viz/ both use eval/ and decode/, and neither imports the
other (nor do eval/ and decode/ import either of them); tasks/ (the task families and their
registry) sits below train/, which passes the loop the family it resolved, and above viz/.
An import written as a string (a registry entry, ``import_module``'s argument) counts as an
import (_imports.py)."""

import ast
from pathlib import Path

import pytest
from _imports import string_imports

SRC = Path(__file__).resolve().parents[1] / "src" / "attnkit"


def _subpackage(name: str) -> str | None:
    """The attnkit subpackage or module an absolute dotted ``name`` is in (None outside attnkit
    or for a name that is no module of it, e.g. a file name such as "attnkit.lock")."""
    parts = name.split(".")
    if parts[0] != "attnkit" or len(parts) < 2:
        return None
    top = parts[1]
    return top if (SRC / top).is_dir() or (SRC / f"{top}.py").is_file() else None


def imported_packages(package: str) -> set[tuple[str, str]]:
    """(file, attnkit subpackage) for every import in src/attnkit/<package>/, relative or
    absolute, at any depth in the file (imports inside functions count too), and for every
    module named by a string (_imports.py)."""
    found = set()
    for path in sorted((SRC / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
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
        file_package = list(path.relative_to(SRC.parent).parts[:-1])
        for name in string_imports(tree, file_package):
            top = _subpackage(name)
            if top is not None:
                found.add((path.name, top))
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("train", {"viz"}),  # the loop is given a family (tasks/), never a viewer
        ("tasks", {"train", "cli", "experiments", "bench"}),  # families sit below the loop
        ("viz", {"train", "tasks"}),
        ("eval", {"train", "tasks", "viz", "cli"}),
        ("decode", {"train", "tasks", "viz", "eval", "cli"}),
        # the rooms of the core (docs/architecture.md): a stage imports nothing
        # above it; mechanisms build on stages and core, never on a model or a task
        ("stages", {"core", "modules", "registry", "mechanisms", "local", "interop", "nn",
                    "models", "tasks", "data", "decode", "eval", "train", "viz",
                    "bench", "experiments", "cli"}),
        ("mechanisms", {"models", "tasks", "data", "decode", "eval", "train", "viz",
                        "bench", "experiments", "cli", "interop"}),
        ("local", {"core", "modules", "registry", "mechanisms", "models", "experiments",
                   "cli", "interop"}),
        ("models", {"experiments", "cli", "bench", "tasks"}),
        ("interop", {"models", "experiments", "cli", "train", "viz"}),
    ],
)
def test_package_does_not_import(package: str, forbidden: set[str]) -> None:
    bad = sorted((f, p) for f, p in imported_packages(package) if p in forbidden)
    assert not bad, f"attnkit/{package} imports {bad}"


def test_a_module_path_written_as_a_string_counts_as_an_import() -> None:
    """A registry of ``"module:attribute"`` strings is seen (a circle can hide in one), as are
    import_module's absolute and relative forms; prose and file names are not."""
    planted = ast.parse(
        'FAMILIES = {"translate": "attnkit.tasks.translate:TRANSLATE"}\n'
        'importlib.import_module("attnkit.viz.heatmap")\n'
        'importlib.import_module("..decode.search", __package__)\n'
        'cmd = f"attnkit.cli.{name}"\n'
        '"""See attnkit.tasks for the families."""\n'
        'LOCK = "attnkit.lock"\n'
    )
    names = string_imports(planted, ["attnkit", "train"])  # as read in attnkit/train/x.py
    assert sorted(names) == ["attnkit.cli", "attnkit.decode.search", "attnkit.lock",
                             "attnkit.tasks.translate", "attnkit.viz.heatmap"]  # fmt: skip
    assert [_subpackage(n) for n in sorted(names)] == ["cli", "decode", None, "tasks", "viz"]


def _absolute_imports(path: Path) -> set[str]:
    """Every module ``path`` imports (relative ones resolved), at any depth in the file."""
    package = list(path.relative_to(SRC.parent).parts[:-1])  # the file's package
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            if not node.module:  # from . import x: x may be a module
                found |= {f"{module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


EXPERIMENT_DIRS = sorted(p for p in (SRC / "experiments").iterdir() if (p / "__init__.py").exists())
SHARED = {"attnkit.experiments", "attnkit.experiments.base", "attnkit.experiments.pool",
          "attnkit.experiments.evidence"}  # fmt: skip


@pytest.mark.parametrize("folder", EXPERIMENT_DIRS, ids=lambda p: p.name)
def test_an_experiment_imports_only_its_own_files_and_the_shared_helpers(folder: Path) -> None:
    """One folder per experiment (docs/architecture.md): an experiment's files
    import the library, the shared helpers and each other, never another experiment."""
    own = f"attnkit.experiments.{folder.name}"
    bad = sorted(
        (path.name, m) for path in folder.rglob("*.py") for m in _absolute_imports(path)
        if m.startswith("attnkit.experiments") and m not in SHARED
        and m != own and not m.startswith(own + ".")
    )  # fmt: skip
    assert not bad, f"experiments/{folder.name} imports another experiment: {bad}"


def test_every_experiment_is_a_package_and_the_cli_imports_only_its_entry() -> None:
    from attnkit.experiments import EXPERIMENTS

    loose = sorted(p.name for p in (SRC / "experiments").glob("*.py")
                   if p.stem not in {"__init__", "base", "pool", "evidence"})  # fmt: skip
    assert not loose, f"experiment files outside a package of their own: {loose}"
    packages = {e.module.rsplit(".", 1)[1] for e in EXPERIMENTS.values()}
    assert packages == {p.name for p in EXPERIMENT_DIRS}
    cli = sorted((SRC / "cli").rglob("*.py"))
    assert len(cli) > 1, "the parser and the commands live in attnkit/cli/"
    for path in cli:
        reach = {m for m in _absolute_imports(path) if m.startswith("attnkit.experiments")}
        allowed = {"attnkit.experiments", "attnkit.experiments.evidence"}  # + exit_code
        assert reach <= allowed, f"{path.name} imports {reach}"
