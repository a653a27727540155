"""The one registry type (attnkit._registry): name -> record, a close match in the error of an
unknown name, a taken name refused; and the registries built on it hold what they held."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from attnkit._registry import Registry


@dataclass(frozen=True)
class Thing:
    name: str
    size: int = 0


def _things() -> Registry[Thing]:
    r: Registry[Thing] = Registry("thing", aliases={"big": "large"})
    r.register(Thing("small", 1))
    r.register(Thing("large", 9), aliases=("huge",))
    return r


def test_a_name_or_alias_gives_its_record_in_registration_order() -> None:
    r = _things()
    assert r["small"] == Thing("small", 1)
    assert r["big"] is r["huge"] is r["large"]
    assert list(r) == ["small", "large"] and len(r) == 2
    assert r.names() == ("large", "small")
    assert r.names(aliases=True) == ("big", "huge", "large", "small")
    assert r.canonical("huge") == "large"
    assert "large" in r and "huge" not in r  # membership: registered names only
    assert r.get("nope") is None


def test_an_unknown_name_is_one_line_with_the_choices_and_a_close_match() -> None:
    with pytest.raises(ValueError) as e:
        _things()["smal"]
    assert str(e.value) == (
        "unknown thing 'smal'; choose one of ['large', 'small']; did you mean 'small'?"
    )
    with pytest.raises(ValueError) as e:
        _things()["zzzzzz"]
    assert str(e.value) == "unknown thing 'zzzzzz'; choose one of ['large', 'small']"


@pytest.mark.parametrize(("record", "aliases"), [(Thing("small"), ()), (Thing("tiny"), ("big",)),
                                                 (Thing("huge"), ())])  # fmt: skip
def test_a_taken_name_or_alias_is_refused(record: Thing, aliases: tuple[str, ...]) -> None:
    r = _things()
    with pytest.raises(ValueError, match="registered twice; give the new one another name"):
        r.register(record, aliases=aliases)
    assert list(r) == ["small", "large"]  # nothing half-registered


def test_the_generated_tasks_are_registered_with_their_sizes_and_families() -> None:
    """Pinned from the tables they replaced (one record per task now, written where the task
    is generated): names in order, default sizes, families, how tokens join."""
    from attnkit.data.tasks import TASKS

    assert {t.name: (t.sizes, t.family, t.join, t.lengths) for t in TASKS.values()} == {
        "toy-ko": ((8000, 400, 500), "translate", " ", False),
        "dates": ((10000, 500, 500), "translate", "", False),
        "copy": ((5000, 300, 300), "translate", " ", True),
        "reverse": ((5000, 300, 300), "translate", " ", True),
        "sort": ((5000, 300, 300), "translate", " ", True),
        "coref": ((6000, 300, 1000), "translate", " ", False),
        "series": ((8000, 500, 1000), "forecast", " ", False),
        "docs": ((4000, 400, 400), "docs", " ", False),
        "digit-qa": ((6000, 500, 500), "qa", " ", False),
        "digit-captions": ((6000, 300, 500), "caption", " ", False),
        "digit-captions-pos": ((6000, 300, 500), "caption", " ", False),
        "lm": ((100_000, 5_000, 5_000), "lm", " ", False),
    }
    assert list(TASKS)[:3] == ["toy-ko", "dates", "copy"]


def test_a_task_without_lengths_refuses_them_naming_those_that_take_them() -> None:
    from attnkit.data.tasks import load_task

    with pytest.raises(ValueError, match=r"apply to copy, reverse and sort, not dates$"):
        load_task("dates", max_len=5)
    with pytest.raises(ValueError, match=r"unknown task 'date'; .*did you mean 'dates'\?"):
        load_task("date")
