"""Issue "Nothing lost, nothing silently wrong", sections 2 and 4: every file of a checkpoint
is checked before a model is built from it. Each case damages one file of a copy of a trained
run and asserts: exit 2, one line naming the file (and key), and no file changed anywhere."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from _reliability import TINY, one_line_error, snapshot
from safetensors.torch import load_file, save_file


def edit_config(**changes: object) -> Callable[[Path], None]:
    def apply(ck: Path) -> None:
        cfg = json.loads((ck / "config.json").read_text())
        for key, value in changes.items():
            if key.startswith("config."):
                cfg["config"][key.removeprefix("config.")] = value
            else:
                cfg[key] = value
        (ck / "config.json").write_text(json.dumps(cfg))

    return apply


def write(name: str, data: bytes) -> Callable[[Path], None]:
    return lambda ck: (ck / name).write_bytes(data)


def truncate(name: str, keep: int) -> Callable[[Path], None]:
    return lambda ck: (ck / name).write_bytes((ck / name).read_bytes()[:keep])


def retype(dtype: torch.dtype) -> Callable[[Path], None]:
    def apply(ck: Path) -> None:
        t = load_file(str(ck / "model.safetensors"))
        save_file({k: (v * 100).to(dtype) for k, v in t.items()}, str(ck / "model.safetensors"))

    return apply


def reshape_one(ck: Path) -> None:
    t = load_file(str(ck / "model.safetensors"))
    k = sorted(t)[0]
    t[k] = torch.zeros(t[k].shape[0] + 1, *t[k].shape[1:])
    save_file(t, str(ck / "model.safetensors"))


BIG_VOCAB = json.dumps({"tokens": ["<pad>", "<bos>", "<eos>", "<unk>", *map(str, range(200))]})
CASES = {
    # a tampered size is an error before any allocation, not a 56 TB embedding
    "emb 1e12 (float)": (
        edit_config(**{"config.emb": 1e12}),
        r"config\.json: config\.emb must be int, not float",
    ),
    "emb 10**12 (int)": (
        edit_config(**{"config.emb": 10**12}),
        r"has shape \[\d+, 8\] but config\.json asks for \[\d+, 1000000000000\]",
    ),
    "emb as a string": (
        edit_config(**{"config.emb": "8"}),
        r"config\.emb must be int, not str '8'",
    ),
    "emb as a bool": (edit_config(**{"config.emb": True}), r"config\.emb must be int, not bool"),
    "dropout as a string": (
        edit_config(**{"config.dropout": "x"}),
        r"config\.dropout must be float",
    ),
    "negative width": (edit_config(**{"config.enc_hidden": -3}), r"config\.json: .*enc_hidden"),
    "unknown option": (edit_config(**{"config.wings": 2}), r"rnnsearch has no option 'wings'"),
    "config not a mapping": (edit_config(config=[1]), r'expected \{"model": NAME'),
    "unknown model": (edit_config(model=3), r"model 3 is not one of"),
    "meta not a mapping": (edit_config(meta=[1]), r"meta must be a JSON object"),
    "config.json not JSON": (write("config.json", b"{"), r"config\.json is not valid JSON"),
    "config.json not UTF-8": (write("config.json", b"\xff{"), r"config\.json is not UTF-8"),
    "vocab size vs weights": (edit_config(**{"config.src_vocab": 99}), r"asks for \[99, 8\]"),
    "weights truncated": (
        truncate("model.safetensors", 100),
        r"model\.safetensors is not a readable safetensors file",
    ),
    "weights cut in the data": (
        truncate("model.safetensors", -8),
        r"model\.safetensors is not a readable safetensors file",
    ),
    "weights empty": (write("model.safetensors", b""), r"not a readable safetensors file"),
    "weights garbage": (
        write("model.safetensors", b"\x00" * 64),
        r"not a readable safetensors file",
    ),
    "weights float64": (retype(torch.float64), r"is F64, expected F32"),
    "weights int64": (retype(torch.int64), r"is I64, expected F32"),
    "a tensor reshaped": (reshape_one, r"has shape .* but config\.json asks for"),
    "vocab not a list": (
        write("src_vocab.json", b'{"tokens": 3}'),
        r"src_vocab\.json: a vocabulary file must be",
    ),
    "vocab larger than the embedding": (
        write("tgt_vocab.json", BIG_VOCAB.encode()),
        # config.json records the vocabulary's size and sha256 at save time
        r"tgt_vocab\.json \(204 tokens\) is not the vocabulary this checkpoint was saved with",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["translate", "evaluate", "view"])
def test_a_damaged_checkpoint_is_one_line(
    case: str, command: str, copy_of: Callable[[], Path], capsys, monkeypatch, tmp_path: Path
) -> None:
    run = copy_of()
    damage, match = CASES[case]
    damage(run / "best")
    before = snapshot(tmp_path)
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("3 4 5\n"))
    argv = {
        "translate": ["translate", "--checkpoint", str(run / "best")],
        "evaluate": ["evaluate", "--checkpoint", str(run / "best"), "--limit", "2"],
        "view": [
            "view",
            "--checkpoint",
            str(run / "best"),
            "3 4 5",
            "--out",
            str(tmp_path / "v.html"),
        ],
    }[command]
    one_line_error(capsys, argv, match)
    assert snapshot(tmp_path) == before  # nothing written, nothing changed


RESUME_CASES = {
    "train_state not JSON": (
        write("train_state.json", b"{"),
        r"train_state\.json is not valid JSON",
    ),
    "train_state without optimizer": (
        write("train_state.json", b'{"epoch": 1}'),
        r"train_state\.json lacks the optimizer's state",
    ),
    "optimizer truncated": (
        truncate("optimizer.safetensors", 50),
        r"optimizer\.safetensors is not a readable safetensors file",
    ),
    "weights truncated": (
        truncate("model.safetensors", 50),
        r"does not fit this model .*not a readable safetensors",
    ),
    "weights float64": (retype(torch.float64), r"does not fit this model .*is F64, expected F32"),
}


@pytest.mark.parametrize("case", sorted(RESUME_CASES))
def test_resuming_from_partial_or_damaged_state_is_one_line(
    case: str, copy_of: Callable[[], Path], capsys, tmp_path: Path
) -> None:
    run = copy_of()
    damage, match = RESUME_CASES[case]
    damage(run / "last")
    before = snapshot(run / "last")
    one_line_error(capsys, ["train", *TINY, "--out", str(run), "--resume"], match)
    assert snapshot(run / "last") == before
