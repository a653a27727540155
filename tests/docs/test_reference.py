"""The API reference (docs/reference/*.md, built by ``mkdocs build --strict``) is complete:
every public name of the documented modules has a docstring and is on a reference page.

The docstrings are read from the source (``ast``), as mkdocstrings reads them: a class whose
annotations come before its docstring has none (a dataclass's generated ``__doc__`` is not a
docstring), and a module-level constant's docstring is the string right after it. A public
name is one in the module's ``__all__`` (or, without ``__all__``, a class, function or
constant defined in it and not starting with ``_``); for a class, its public methods and
properties too, but ``forward`` and ``extra_repr`` (nn.Module's protocol: the class's
docstring says what calling it does).

A reference page renders a name with ``::: module`` (all of the module's public names) or
``::: module.name``. ``::: package`` does not render a name that is also a submodule of the
package (``attnkit.viz.heatmap``: mkdocstrings takes the submodule), so such a name needs
its own directive.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]
PAGES = sorted((ROOT / "docs" / "reference").glob("*.md"))
DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$", re.MULTILINE)
# the parts of the API the reference must cover (issue 19, section 3)
REQUIRED = [
    "attnkit",
    "attnkit.nn",
    "attnkit.models",
    "attnkit.train.fit",
    "attnkit.train.config",
    "attnkit.tasks.family",
    "attnkit.tasks.registry",
    "attnkit.decode",
    "attnkit.eval",
    "attnkit.viz",
    "attnkit.experiments",
    "attnkit.interop.hf",  # the module attnkit.hf names
]
PROTOCOL = {"forward", "extra_repr"}  # nn.Module methods the class docstring speaks for
# documented modules that need an optional extra to import: module -> the package it needs
EXTRAS = {"attnkit.interop.hf": "transformers"}


def available(path: str) -> bool:
    """False for a path into a module whose extra is not installed (its tests skip)."""
    return not any(
        (path == m or path.startswith(m + ".")) and importlib.util.find_spec(pkg) is None
        for m, pkg in EXTRAS.items()
    )


def is_module(path: str) -> bool:
    try:
        return importlib.util.find_spec(path) is not None
    except ModuleNotFoundError:  # a parent is a module, not a package
        return False


def directives() -> list[str]:
    return [d for page in PAGES for d in DIRECTIVE.findall(page.read_text(encoding="utf-8"))]


def resolve(path: str) -> object:
    """The object ``path`` names: a module, or an attribute of the longest importable prefix."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


@cache
def tree(path: str) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def assigned(module: ModuleType, name: str) -> tuple[ModuleType, int] | None:
    """(defining module, index in its body) of the module-level assignment of ``name``,
    following ``from .x import name``; None when ``name`` is not assigned in source."""
    if module.__file__ is None:
        return None
    body = tree(module.__file__).body
    for i, node in enumerate(body):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return module, i
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name:
            return module, i
        if isinstance(node, ast.ImportFrom) and any(
            (a.asname or a.name) == name for a in node.names
        ):
            source = next(a.name for a in node.names if (a.asname or a.name) == name)
            package = (
                module.__name__
                if module.__file__.endswith("__init__.py")
                else (module.__name__.rpartition(".")[0])
            )
            base = importlib.import_module("." * node.level + (node.module or ""), package)
            return assigned(base, source)
    return None


def public_names(module: ModuleType) -> list[str]:
    if hasattr(module, "__all__"):
        return list(module.__all__)
    names = []
    for name, obj in vars(module).items():
        if name.startswith("_") or inspect.ismodule(obj):
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            if obj.__module__ == module.__name__:
                names.append(name)
        elif (found := assigned(module, name)) is not None and found[0] is module:
            names.append(name)
    return names


def definition(obj: object) -> ast.AST:
    """The ``class``/``def`` node of a class or function, found by its qualified name."""
    obj = inspect.unwrap(obj)  # type: ignore[arg-type]
    node: ast.AST = tree(inspect.getsourcefile(obj))  # type: ignore[arg-type]
    for part in obj.__qualname__.split("."):
        node = next(
            n
            for n in ast.iter_child_nodes(node)
            if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.name == part
        )
    return node


def undocumented(module: ModuleType, name: str) -> list[str]:
    """The names (``name``, ``name.method``) that lack a docstring."""
    obj = getattr(module, name)
    where = f"{module.__name__}.{name}"
    if inspect.ismodule(obj):
        return [] if ast.get_docstring(tree(obj.__file__)) else [where]  # type: ignore[arg-type]
    if inspect.isclass(obj) or inspect.isfunction(obj):
        node = definition(obj)
        missing = [] if ast.get_docstring(node) else [where]  # type: ignore[arg-type]
        if isinstance(node, ast.ClassDef):
            missing += [
                f"{where}.{m.name}"
                for m in node.body
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
                and not m.name.startswith("_")
                and m.name not in PROTOCOL
                and not ast.get_docstring(m)
            ]
        return missing
    found = assigned(module, name)
    if found is None:
        return [f"{where} (not assigned in the source)"]
    home, i = found
    body = tree(home.__file__).body  # type: ignore[arg-type]
    after = body[i + 1] if i + 1 < len(body) else None
    has_doc = (
        isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and isinstance(after.value.value, str)
        and after.value.value.strip()
    )
    return [] if has_doc else [f"{where} (a string right after the assignment)"]


def rendered(module: ModuleType, name: str, shown: list[str]) -> bool:
    """Whether one of the reference's directives renders ``module.name``."""
    obj = getattr(module, name)
    for d in filter(available, shown):
        target = resolve(d)
        if target is obj:
            return True
        if inspect.ismodule(target):
            is_package = (target.__file__ or "").endswith("__init__.py")
            for n in public_names(target):
                shadowed = is_package and _is_submodule(target, n)
                if getattr(target, n, None) is obj and not shadowed:
                    return True
    return False


def _is_submodule(package: ModuleType, name: str) -> bool:
    folder = Path(package.__file__).parent  # type: ignore[arg-type]
    return (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists()


def documented_modules() -> list[str]:
    return list(dict.fromkeys(REQUIRED + [d for d in directives() if is_module(d)]))


def _import(name: str) -> ModuleType:
    if not available(name):
        pytest.skip(f"{name} needs {EXTRAS[name]} (its extra): pip install -e '.[test]'")
    return importlib.import_module(name)


def test_every_required_part_of_the_api_has_a_page() -> None:
    shown = directives()
    for module in REQUIRED[1:]:  # attnkit itself is rendered in parts (core, scores, ...)
        assert module in shown, f"no reference page has '::: {module}'"


def test_every_directive_names_something() -> None:
    for d in filter(available, directives()):
        resolve(d)  # raises on a name that does not exist


@pytest.mark.parametrize("name", documented_modules())
def test_public_names_have_docstrings(name: str) -> None:
    module = _import(name)
    missing = [] if ast.get_docstring(tree(module.__file__)) else [f"{name} (module)"]  # type: ignore[arg-type]
    missing += [m for n in public_names(module) for m in undocumented(module, n)]
    assert not missing, f"no docstring on {missing}"


@pytest.mark.parametrize("name", documented_modules())
def test_public_names_are_on_a_reference_page(name: str) -> None:
    module = _import(name)
    shown = directives()
    absent = [where(module, n) for n in public_names(module) if not rendered(module, n, shown)]
    assert not absent, f"on no page of docs/reference/; add a '::: NAME' line for {absent}"


def where(module: ModuleType, name: str) -> str:
    """The path a directive can name ``module.name`` by: where it is defined, if it knows."""
    obj = getattr(module, name)
    if hasattr(obj, "__qualname__") and hasattr(obj, "__module__") and not inspect.ismodule(obj):
        return f"{obj.__module__}.{obj.__qualname__}"
    return f"{module.__name__}.{name}"


FAKE = '''"""A module."""
from dataclasses import dataclass

__all__ = ["Bare", "Told", "LIMIT", "NAMED", "fn"]


@dataclass
class Bare:
    x: int
    "too late to be the docstring"


class Told:
    """Has one."""

    def forward(self): ...

    def step(self): ...


LIMIT = 3
NAMED = 4
"""The docstring of NAMED."""


def fn():
    """Has one."""
'''


def test_the_checks_catch_what_they_should(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataclass without a docstring (its generated ``__doc__`` does not count), a method
    without one, a constant without one; a name hidden by its package's submodule."""
    (tmp_path / "fake_reference_mod.py").write_text(FAKE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = importlib.import_module("fake_reference_mod")
    assert fake.Bare.__doc__  # the dataclass made one up
    missing = [m for n in public_names(fake) for m in undocumented(fake, n)]
    assert missing == [
        "fake_reference_mod.Bare",
        "fake_reference_mod.Told.step",
        "fake_reference_mod.LIMIT (a string right after the assignment)",
    ]
    from attnkit import viz

    assert not rendered(viz, "heatmap", ["attnkit.viz"])  # the submodule attnkit.viz.heatmap
    assert rendered(viz, "heatmap", ["attnkit.viz.heatmap.heatmap"])
    assert rendered(viz, "show", ["attnkit.viz"])
    assert not rendered(viz, "show", ["attnkit.eval"])
