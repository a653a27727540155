"""Progress lines for logs (attnkit._progress): one every N units or S seconds, whichever comes
first, with the count, the given fields, the rate and the ETA worked out here by hand."""

import pytest

from attnkit._progress import Progress, duration


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_n_units_with_rate_and_eta() -> None:
    clock, lines = Clock(), []
    p = Progress("epoch 1/3", unit="updates", total=10, every=4, seconds=0, log=lines.append,
                 clock=clock)  # fmt: skip
    for _ in range(9):
        clock.now += 0.5  # 2 updates/s
        p.update(loss="0.853")
    assert lines == [
        "epoch 1/3: 4/10 updates  loss 0.853  2.0 updates/s  ETA 3s",  # 6 left at 2/s
        "epoch 1/3: 8/10 updates  loss 0.853  2.0 updates/s  ETA 1s",
    ]


def test_a_line_every_s_seconds_when_units_are_slow() -> None:
    clock, lines = Clock(), []
    p = Progress("translating", unit="lines", every=1000, seconds=30, log=lines.append,
                 clock=clock)  # fmt: skip
    clock.now += 29
    p.update(58)
    assert lines == []
    clock.now += 1
    p.update(2)  # 60 lines in 30 s; no total: no ETA
    assert lines == ["translating: 60 lines  2.0 lines/s"]


def test_a_resumed_count_starts_the_rate_from_where_it_resumed() -> None:
    clock, lines = Clock(), []
    p = Progress("epoch 2/2", unit="updates", total=300, done=100, every=100, seconds=0,
                 log=lines.append, clock=clock)  # fmt: skip
    clock.now += 50
    p.update(100)  # 100 updates in 50 s since the resume, 100 left
    assert lines == ["epoch 2/2: 200/300 updates  2.0 updates/s  ETA 50s"]


def test_durations_and_bad_settings() -> None:
    assert [duration(s) for s in (0.4, 45, 725, 11220)] == ["0s", "45s", "12m05s", "3h07m"]
    with pytest.raises(ValueError, match="neither may be negative"):
        Progress("x", unit="u", every=-1)
