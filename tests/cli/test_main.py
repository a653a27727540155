"""The ``attnkit`` command: bad input is one line and status 2; a bug keeps its traceback."""

import json
from pathlib import Path

import pytest
import torch

from attnkit.cli import info, main


def _raise(err: Exception):  # type: ignore[no-untyped-def]
    def run(args):  # type: ignore[no-untyped-def]
        raise err

    return run


@pytest.mark.parametrize("err", [ValueError("bad --x 3; pass 1"), FileNotFoundError("no f")])
def test_bad_input_is_one_line_and_status_2(monkeypatch, capsys, err: Exception) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(info, "run", _raise(err))
    assert main(["info"]) == 2
    assert capsys.readouterr().err == f"attnkit info: error: {err}\n"


@pytest.mark.parametrize("err", [TypeError("bad operand"), KeyError("x"), AttributeError("x")])
def test_a_bug_propagates_with_its_traceback(monkeypatch, err: Exception) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(info, "run", _raise(err))
    with pytest.raises(type(err)):
        main(["info"])


def test_a_tokens_file_of_the_wrong_type_is_bad_input(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from attnkit.viz import save_attention

    path = save_attention(tmp_path / "w.safetensors", torch.eye(3))
    spec = tmp_path / "tokens.json"
    spec.write_text(json.dumps({"tgt": "a b c"}))  # one string, not a list
    assert main(["view", "--weights", str(path), "--tokens", str(spec)]) == 2
    assert '"tgt" must be a list of token strings' in capsys.readouterr().err


def test_train_help_lists_every_generated_task(capsys) -> None:
    """``--task``'s help is the registry's names, in the order registered."""
    from attnkit.data.tasks import TASKS

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    shown = "".join(capsys.readouterr().out.split())  # argparse wraps lines anywhere
    assert len(TASKS) >= 12 and "|".join(TASKS) in shown
