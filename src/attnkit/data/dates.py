"""``dates``: human-readable dates in many English and Korean styles -> ISO 8601 (YYYY-MM-DD),
character level. "3 March 2014", "Mar 3, 2014", "03/03/2014", "2014년 3월 3일", "14.3.3" ->
"2014-03-03". No alignments (formats reorder and abbreviate freely)."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable

from .example import Example, distinct
from .task import TASKS, Task, generated

MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
KO_DAYS = ["월요일", "화요일", "수요일", "목요일", "금요일", "토요일", "일요일"]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


FORMATS: list[Callable[[dt.date], str]] = [
    lambda d: f"{d.day} {MONTHS[d.month - 1]} {d.year}",
    lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",
    lambda d: f"{MONTHS[d.month - 1][:3]} {d.day} {d.year}",
    lambda d: f"{d.day:02d} {MONTHS[d.month - 1][:3].lower()} {d.year}",
    lambda d: f"{_ordinal(d.day)} of {MONTHS[d.month - 1]}, {d.year}",
    lambda d: f"{DAYS[d.weekday()]}, {MONTHS[d.month - 1]} {d.day}, {d.year}",
    lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",  # US style
    lambda d: f"{d.year}/{d.month}/{d.day}",
    lambda d: f"{d.year}. {d.month}. {d.day}.",  # Korean numeric style
    lambda d: f"{d.year % 100:02d}.{d.month}.{d.day}",
    lambda d: f"{d.year}년 {d.month}월 {d.day}일",
    lambda d: f"{d.year}년 {d.month}월 {d.day}일 {KO_DAYS[d.weekday()]}",
    lambda d: f"{d.year % 100:02d}년 {d.month:02d}월 {d.day:02d}일",
]


def generate(n: int, seed: int, *, start_year: int = 1950, end_year: int = 2049) -> list[Example]:
    """``n`` distinct (format, date) strings; both sides as character lists."""
    if start_year > end_year:
        raise ValueError(f"start_year {start_year} > end_year {end_year}")
    rng = random.Random(seed)
    first = dt.date(start_year, 1, 1).toordinal()
    last = dt.date(end_year, 12, 31).toordinal()

    def draw() -> tuple[str, Example]:
        d = dt.date.fromordinal(rng.randint(first, last))
        text = rng.choice(FORMATS)(d)
        return text, Example(list(text), list(d.isoformat()))

    return distinct(n, draw, 20 * n + 1000,
                    f"could not draw {n} distinct dates; widen the year range")  # fmt: skip


TASKS.register(Task("dates", generated(generate), (10000, 500, 500), join=""))


__all__ = ["FORMATS", "generate"]
