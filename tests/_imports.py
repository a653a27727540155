"""Imports written as strings, for the tests that read the package's imports (test_layers.py,
test_import_cycles.py): a registry entry such as ``"attnkit.tasks.translate:TRANSLATE"`` or
``importlib.import_module("attnkit.tasks.qa")`` is imported at run time as surely as an
``import`` statement, so a rule or a cycle finder that did not see it would miss a circle."""

from __future__ import annotations

import ast
import re

# a whole string that names an attnkit module, as registries and import_module write them:
# "attnkit.tasks.translate", "attnkit.tasks.translate:TRANSLATE", f"attnkit.cli.{name}"
MODULE_PATH = re.compile(r"attnkit(?:\.[A-Za-z_]\w*)+\.?(?::[A-Za-z_]\w*)?")


def string_imports(tree: ast.AST, package: list[str]) -> list[str]:
    """The dotted names of the attnkit modules named by strings in ``tree``: whole strings that
    are module paths (registries, ``import_module("attnkit.x")``, the constant head of an
    f-string: its package) and the relative first argument of ``import_module(".x",
    __package__)`` resolved from ``package`` (the file's package, as a list of names)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if MODULE_PATH.fullmatch(node.value):
                found.append(node.value.split(":")[0].rstrip("."))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if called == "import_module" and isinstance(first, ast.Constant):
                name = str(first.value)
                level = len(name) - len(name.lstrip("."))
                if level:
                    base = package[: len(package) - level + 1]
                    found.append(".".join(base + [name[level:]]))
    return found
