"""Issue "Nothing lost and nothing silently wrong on the surfaces added since": the promises
`train` keeps, kept by experiments, evaluate, view, the Hugging Face sliding window and
translate. Each case failed before its change."""

from __future__ import annotations

import io
from pathlib import Path

import attnkit.decode
from attnkit.cli import main
from attnkit.decode.translate import Translations


def test_translate_keeps_one_output_line_per_input_line(trained: Path, monkeypatch, capsys):
    """Blank lines in give blank lines out, so `translate < src > hyp` stays aligned (a
    stand-in decoder echoes each source reversed, so every line shows where it came from)."""

    def echo(model, examples, src_vocab, tgt_vocab, **_):
        return Translations([list(reversed(e.src)) for e in examples], [None] * len(examples))

    monkeypatch.setattr(attnkit.decode, "translate", echo)
    lines = ["", "3 4", "", "5 6 7", "  ", "3", "", "4 5 6 7", ""]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{x}\n" for x in lines)))
    assert main(["translate", "--checkpoint", str(trained), "--batch-size", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [" ".join(reversed(x.split())) for x in lines], out
