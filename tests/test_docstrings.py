"""Every public class and function of these packages says what it does (``__doc__`` is not
None: a class whose annotations come before its docstring has none)."""

import importlib
import inspect

import pytest

PACKAGES = ["attnkit.nn", "attnkit.eval", "attnkit.decode", "attnkit.viz"]


@pytest.mark.parametrize("package", PACKAGES)
def test_public_names_have_docstrings(package: str) -> None:
    mod = importlib.import_module(package)
    missing = [
        name
        for name in mod.__all__
        if (inspect.isclass(obj := getattr(mod, name)) or inspect.isfunction(obj))
        and not (obj.__doc__ or "").strip()
    ]
    assert not missing, f"{package}: no docstring on {missing}"


def test_multihead_attention_docstring_is_its_own() -> None:
    from attnkit.nn import MultiheadAttention

    assert MultiheadAttention.__doc__ is not None
    assert "swappable attention" in MultiheadAttention.__doc__
