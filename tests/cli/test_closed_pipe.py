"""A reader that stops early (`attnkit info | head -1`) ends attnkit quietly: no "Broken
pipe" error, no traceback, exit 0."""

import io
import os

from attnkit.cli import main


class ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return 99


def test_a_closed_pipe_stops_quietly(monkeypatch, capsys) -> None:
    redirected = []
    monkeypatch.setattr(os, "dup2", lambda fd, to: redirected.append(to))
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    assert main(["info"]) == 0
    assert capsys.readouterr().err == ""
    assert redirected == [99]  # stdout pointed at /dev/null, so the flush at exit is quiet
