"""The test that a config refuses bad settings, shared by the experiments' tests:

    test_bad_settings_fail_clearly = refused(LengthConfig, [
        ({"steps": 0}, "--steps"),
        ({"seeds": 1}, "an interval over seeds needs 2"),
    ])

is one test per case: ``LengthConfig(**overrides)`` must raise a ValueError whose message
matches the case's pattern (``pytest.raises(match=...)``, a regular expression)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest


def refused(config: Callable[..., Any],
            cases: Sequence[tuple[dict[str, Any], str]]) -> Callable[[dict[str, Any], str], None]:
    """A test, parametrized over ``cases`` (overrides, pattern), that ``config(**overrides)``
    raises a ValueError matching the pattern."""

    @pytest.mark.parametrize(("overrides", "match"), cases)
    def test(overrides: dict[str, Any], match: str) -> None:
        with pytest.raises(ValueError, match=match):
            config(**overrides)

    return test
