"""One registry type for every table of names (tasks, task families, stages, models,
experiments): name -> one record, the record registered where the thing it names is defined.

    TASKS: Registry[Task] = Registry("task")
    TASKS.register(Task("dates", ...))       # in dates.py, beside what it registers
    TASKS["dats"]  # ValueError: unknown task 'dats'; choose one of [...]; did you mean 'dates'?

A record is a frozen dataclass with a ``name`` field; what a registry's tables used to hold
side by side (a builder, default sizes, a family, a paper) are fields of the one record.
Aliases map other spellings to a registered name (``canonical``). Where the thing is costly
to import (a task family's models and viewers, an experiment's plotting), its record is a
``Lazy``: the name and where the thing is, imported when first asked for.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


R = TypeVar("R", bound=Named)


class Registry(Mapping[str, R], Generic[R]):
    """Name -> record, in the order registered. ``registry[name]`` (an alias resolved) is the
    record, or a ValueError in one line naming the choices and the closest one; ``register``
    refuses a name (or alias) that is taken. ``kind``: what a name names, as the messages
    say it ("task", "score"). ``entries``: the dict behind it (a test adds a record for its
    own duration with ``monkeypatch.setitem(REGISTRY.entries, name, record)``)."""

    def __init__(self, kind: str, *, aliases: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self.entries: dict[str, R] = {}
        self.aliases: dict[str, str] = dict(aliases or {})

    def register(self, record: R, *, aliases: tuple[str, ...] = ()) -> R:
        """Add ``record`` under its name (and ``aliases``); returns it, so that a module can
        write ``TASK = TASKS.register(Task(...))``."""
        for name in (record.name, *aliases):
            if name in self.entries or name in self.aliases:
                raise ValueError(
                    f"{self.kind} {name!r} is registered twice; give the new one another name"
                )
        self.entries[record.name] = record
        self.aliases.update((a, record.name) for a in aliases)
        return record

    def canonical(self, name: str) -> str:
        """The registered name of ``name`` (an alias resolved), or the ValueError of an
        unknown name: the choices, sorted, and the closest registered name or alias."""
        key = self.aliases.get(name, name)
        if key in self.entries:
            return key
        close = difflib.get_close_matches(name, [*self.entries, *self.aliases], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        choices = sorted(self.entries)
        raise ValueError(f"unknown {self.kind} {name!r}; choose one of {choices}{hint}")

    def names(self, *, aliases: bool = False) -> tuple[str, ...]:
        """The registered names, sorted; with ``aliases`` the aliases too."""
        return tuple(sorted([*self.entries, *self.aliases] if aliases else self.entries))

    def __getitem__(self, name: str) -> R:
        return self.entries[self.canonical(name)]

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def get(self, name: str, default: R | None = None) -> R | None:  # type: ignore[override]
        return self.entries.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self.entries)})"


@dataclass(frozen=True)
class Lazy:
    """A registered name whose thing is imported only when asked for: ``where`` is
    ``"module:attribute"`` (an import the layering test reads, tests/_imports.py)."""

    name: str
    where: str

    @property
    def module(self) -> str:
        """The module that holds it (not imported)."""
        return self.where.partition(":")[0]

    def load(self) -> Any:
        """The attribute, its module imported now."""
        return getattr(importlib.import_module(self.module), self.where.partition(":")[2])


__all__ = ["Lazy", "Registry"]
