"""The environment variables attnkit reads, each parsed in one place: a value it cannot read is
a ValueError naming the variable and the values it takes, never a silent default and never
Python's "could not convert string to float".

    ATTNKIT_NATIVE              the banded C++ kernel on or off: 1/true/yes/on, 0/false/no/off
    ATTNKIT_CHECKS              the check level: shapes or full (``attnkit.set_checks``)
    ATTNKIT_BUILD_WAIT          seconds to wait for another process's kernel build, >= 0
    ATTNKIT_DENSE_BUDGET_GIB    GiB the dense (Tq, Tk) tensors of one call may take, > 0
    ATTNKIT_RENDEZVOUS_TIMEOUT  seconds a distributed run waits for its other processes, > 0
    ATTNKIT_COLLECTIVE_TIMEOUT  seconds a rank waits for the others in one collective, > 0

Values are stripped and compared case-insensitively (``FULL``, `` off``); an empty or unset
variable takes the default. Imports nothing heavy.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


def _raw(name: str) -> str | None:
    """The variable's value stripped, or None when unset or empty."""
    value = os.environ.get(name, "").strip()
    return value or None


def flag(name: str, default: bool) -> bool:
    """A switch: 1/true/yes/on or 0/false/no/off (any case), else a ValueError."""
    raw = _raw(name)
    if raw is None:
        return default
    if raw.lower() in ON:
        return True
    if raw.lower() in OFF:
        return False
    raise ValueError(
        f"{name}={os.environ[name]!r}; give one of {'/'.join(ON)} (on) or {'/'.join(OFF)} (off)"
    )


def choice(name: str, choices: tuple[str, ...], default: str, what: str | None = None) -> str:
    """One of ``choices`` (any case), else a ValueError listing them (``what``: the list with
    what each one does)."""
    raw = _raw(name)
    if raw is None:
        return default
    if raw.lower() in choices:
        return raw.lower()
    listed = " or ".join(repr(c) for c in choices) if what is None else what
    raise ValueError(f"{name}={os.environ[name]!r}; give {listed}")


def number(name: str, default: float, *, unit: str, zero: bool = False) -> float:
    """A finite number above 0 (``zero``: at least 0), else a ValueError saying which."""
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and (value >= 0 if zero else value > 0)):
        least = "a number >= 0" if zero else "a positive number"
        raise ValueError(f"{name}={os.environ[name]!r}; give {least} of {unit}")
    return value


def native() -> bool:
    """ATTNKIT_NATIVE: whether the banded C++ kernel may be built and used (default on)."""
    return flag("ATTNKIT_NATIVE", True)


def checks_level() -> str:
    """ATTNKIT_CHECKS: "shapes" (default) or "full" (``attnkit.set_checks``)."""
    what = "'shapes' (free, the default) or 'full' (also NaN/Inf in the data, a host sync)"
    return choice("ATTNKIT_CHECKS", ("shapes", "full"), "shapes", what)


def build_wait() -> float:
    """ATTNKIT_BUILD_WAIT: seconds to wait for another process's build (default 300)."""
    return number("ATTNKIT_BUILD_WAIT", 300.0, unit="seconds", zero=True)


def dense_budget_gib() -> float:
    """ATTNKIT_DENSE_BUDGET_GIB: GiB of dense (Tq, Tk) tensors one call may hold (default 4)."""
    return number("ATTNKIT_DENSE_BUDGET_GIB", 4.0, unit="GiB")


def rendezvous_timeout() -> float:
    """ATTNKIT_RENDEZVOUS_TIMEOUT: seconds a distributed run waits for all its processes to
    join before it gives up (default 60)."""
    return number("ATTNKIT_RENDEZVOUS_TIMEOUT", 60.0, unit="seconds")


def collective_timeout() -> float:
    """ATTNKIT_COLLECTIVE_TIMEOUT: seconds a rank waits for the others in one collective (a
    gradient all-reduce, a stopping vote) before it stops with an error (default 300)."""
    return number("ATTNKIT_COLLECTIVE_TIMEOUT", 300.0, unit="seconds")


VARIABLES: dict[str, Callable[[], object]] = {
    "ATTNKIT_NATIVE": native,
    "ATTNKIT_CHECKS": checks_level,
    "ATTNKIT_BUILD_WAIT": build_wait,
    "ATTNKIT_DENSE_BUDGET_GIB": dense_budget_gib,
    "ATTNKIT_RENDEZVOUS_TIMEOUT": rendezvous_timeout,
    "ATTNKIT_COLLECTIVE_TIMEOUT": collective_timeout,
}
"""Every variable attnkit reads, with its parser (the default when unset)."""


def check_environment() -> None:
    """A ValueError for the first variable in ``VARIABLES`` whose value cannot be read: the
    command line checks them all before any work, so a typo is one line at once."""
    for read in VARIABLES.values():
        read()


__all__ = [
    "OFF", "ON", "VARIABLES", "build_wait", "check_environment", "checks_level", "choice",
    "collective_timeout", "dense_budget_gib", "flag", "native", "number", "rendezvous_timeout",
]  # fmt: skip
