"""Where long work is, as plain lines for a log: with stderr not a terminal (a log file, CI,
nohup) a progress bar prints nothing useful, so training, translating and scoring files print
one line every ``every`` units or ``seconds`` seconds, whichever comes first (as OpenNMT's
``report_every``):

    report = Progress("epoch 1/20", unit="updates", total=157, log=print)
    for ...:
        report.update(loss="0.853")
    # epoch 1/20: 50/157 updates  loss 0.853  2.4 updates/s  ETA 45s

The rate counts the units done since the reporter was made; the ETA is the units left at
that rate (no ETA without a ``total``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def duration(seconds: float) -> str:
    """``45s``, ``12m05s``, ``3h07m``."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def to_stderr(line: str) -> None:
    """Print ``line`` on stderr at once (stdout may carry the results)."""
    print(line, file=sys.stderr, flush=True)


def lines_wanted() -> bool:
    """Whether progress goes as lines (stderr is not a terminal) rather than as a bar."""
    return not sys.stderr.isatty()


class Progress:
    """Counts units of work (``update(n)``) and logs a line every ``every`` units (0: never
    by count) or ``seconds`` seconds (0: never by time) since the last line. ``done``: units
    already done when it starts (a resumed epoch); ``fields`` of ``update`` are printed as
    ``name value`` after the count."""

    def __init__(
        self,
        what: str,
        *,
        unit: str,
        total: int | None = None,
        done: int = 0,
        every: int = 50,
        seconds: float = 30.0,
        log: Callable[[str], None] = to_stderr,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if every < 0 or seconds < 0:
            raise ValueError(f"every={every}, seconds={seconds}; neither may be negative")
        self.what, self.unit, self.total, self.done = what, unit, total, done
        self.every, self.seconds, self.log, self.clock = every, seconds, log, clock
        self._start_done, self._start = done, clock()
        self._last_done, self._last = done, self._start

    def update(self, n: int = 1, **fields: str) -> None:
        """``n`` more units done; log a line if ``every`` units or ``seconds`` have passed."""
        self.done += n
        now = self.clock()
        by_count = self.every and self.done - self._last_done >= self.every
        by_time = self.seconds and now - self._last >= self.seconds
        if by_count or by_time:
            self._last_done, self._last = self.done, now
            self.log(self.line(now, fields))

    def line(self, now: float, fields: dict[str, str]) -> str:
        """``what: done/total unit  name value ...  rate unit/s  ETA``."""
        rate = (self.done - self._start_done) / max(now - self._start, 1e-9)
        count = f"{self.done}/{self.total}" if self.total else f"{self.done}"
        parts = [f"{self.what}: {count} {self.unit}"]
        parts += [f"{name.replace('_', ' ')} {value}" for name, value in fields.items()]
        parts.append(f"{rate:.1f} {self.unit}/s" if rate < 100 else f"{rate:.0f} {self.unit}/s")
        if self.total and rate > 0:
            parts.append(f"ETA {duration(max(self.total - self.done, 0) / rate)}")
        return "  ".join(parts)


__all__ = ["Progress", "duration", "lines_wanted", "to_stderr"]
