"""Old public names kept for one release after a rename: each use warns with a
DeprecationWarning that says the new name.

    renamed_keywords(tgt_tokens="query_tokens")   a function decorator: old keyword -> new
    moved_name(old, new, obj)                     what a module's ``__getattr__`` returns
    __getattr__ = renamed_in(__name__, Old=("New", New))   such a ``__getattr__``
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def moved_name(old: str, new: str, obj: R) -> R:
    """``obj``, after a DeprecationWarning that ``old`` is now ``new``."""
    warnings.warn(
        f"{old} is now {new}; the old name goes in the next release", DeprecationWarning,
        stacklevel=3,
    )  # fmt: skip
    return obj


def renamed_in(module: str, **renamed: tuple[str, object]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``module`` (its ``__name__``) for names renamed in this release:
    ``Old=("New", New)`` answers ``module.Old`` with ``New`` after ``moved_name``'s warning."""

    def __getattr__(name: str) -> object:
        if name in renamed:
            new, obj = renamed[name]
            return moved_name(f"{module}.{name}", f"{module}.{new}", obj)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def renamed_keywords(**renames: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Let the decorated function take its old keyword names (``old="new"``) for one release:
    an old keyword is passed on as the new one, with a DeprecationWarning; both at once is a
    TypeError."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(f"{fn.__name__}() got {old}= and {new}=; pass {new}= only")
                warnings.warn(
                    f"{fn.__name__}({old}=...) is now {fn.__name__}({new}=...); the old "
                    "keyword goes in the next release", DeprecationWarning, stacklevel=2,
                )  # fmt: skip
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return inner

    return wrap
