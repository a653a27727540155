"""A language model's data: a validation text in another alphabet is refused (its characters
would all read as <unk>, and best/ is picked on its loss), a checkpoint's vocabulary must be
the one its weights were trained with, and a text is held as compact ids (1-2 bytes a
character, not 30), with the batches the string path makes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from _reliability import one_line_error

from attnkit.cli import main
from attnkit.data import text_ids
from attnkit.data.lm_text import (
    UNKNOWN_LIMIT,
    Segments,
    check_alphabet,
    generate_text,
    hold_out,
    lm_splits,
    segments,
)
from attnkit.data.text_ids import from_text, read_ids
from attnkit.data.vocab import Vocab
from attnkit.tasks.lm import batches, encode, stream_order

HANGUL = "가나다라마바사아자차카타파하" * 40
LM = ["--model", "transformer-lm", "--preset", "tiny", "--segment", "16", "--batch-size", "8",
      "--epochs", "1", "--no-progress"]  # fmt: skip


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- a validation text the training text does not cover -----------------------------------


def test_a_validation_text_in_another_alphabet_is_refused(tmp_path, capsys):
    train = write(tmp_path / "en.txt", generate_text(3000, seed=0))
    valid = write(tmp_path / "ko.txt", HANGUL)
    out = tmp_path / "run"
    one_line_error(capsys, ["train", *LM, "--train-text", train, "--valid-text", valid,
                            "--out", str(out)],  # fmt: skip
                   r"--valid-text .*ko\.txt: 560 of its 560 characters \(100\.00%.*are not in "
                   r"the training text: it does not share the training text's alphabet.*pass a "
                   r"validation text in the training text's language")  # fmt: skip
    assert not (out / "best").exists()


def test_a_held_out_end_in_another_alphabet_is_refused(tmp_path, capsys):
    text = write(tmp_path / "mixed.txt", generate_text(3000, seed=0) + HANGUL[:150])  # 5%: 158
    one_line_error(capsys, ["train", *LM, "--train-text", text, "--out", str(tmp_path / "r")],
                   r"the held-out end of --train-text .*mixed\.txt: .* are not in the training "
                   r"text")  # fmt: skip


def test_a_few_unknown_characters_are_one_warning_line(tmp_path, capsys):
    """Below the limit the run goes on, and says how many characters read as <unk>."""
    english = generate_text(3000, seed=0)
    train = write(tmp_path / "en.txt", english)
    valid = write(tmp_path / "v.txt", english[:997] + "가가나")
    splits = lm_splits({"task": "lm", "train_text": train, "valid_text": valid, "segment": 8})
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: --valid-text {valid}: 3 of its 1,000 characters (0.30%; e.g. "
                   "'가', '나') are not in the training text; they are read as <unk>"]
    assert len(splits.valid) == 125


def test_the_limit_is_a_share_of_the_validation_characters():
    """Exactly ``UNKNOWN_LIMIT`` passes with a warning; one character more is refused."""
    train = from_text("ab" * 50)
    said: list[str] = []
    at_limit = from_text("a" * 99 + "z")  # 1 of 100 = 1%
    check_alphabet(train, at_limit, "v", said.append)
    assert UNKNOWN_LIMIT == 0.01 and len(said) == 1 and "1 of its 100" in said[0]
    with pytest.raises(ValueError, match=r"^v: 2 of its 100 characters \(2\.00%"):
        check_alphabet(train, from_text("a" * 98 + "zy"), "v", said.append)
    check_alphabet(train, from_text("ba" * 50), "v", said.append)
    assert len(said) == 1  # nothing unknown: nothing said


def test_evaluate_checks_the_validation_text_too(tmp_path, capsys, monkeypatch):
    """``attnkit evaluate`` reads the split through the same check: a run trained while the
    limit was higher is still refused when it is scored."""
    import attnkit.data.lm_text as lm_text

    english = generate_text(3000, seed=0)
    train = write(tmp_path / "en.txt", english)
    valid = write(tmp_path / "v.txt", english[:490] + "가" * 10)  # 2% unknown
    out = tmp_path / "run"
    monkeypatch.setattr(lm_text, "UNKNOWN_LIMIT", 0.5)
    assert main(["train", *LM, "--train-text", train, "--valid-text", valid, "--out",
                 str(out)]) == 0  # fmt: skip
    assert "warning: --valid-text" in capsys.readouterr().err
    monkeypatch.setattr(lm_text, "UNKNOWN_LIMIT", 0.01)
    one_line_error(capsys, ["evaluate", "--checkpoint", str(out), "--train-text", train,
                            "--valid-text", valid, "--split", "valid"],  # fmt: skip
                   r"--valid-text .*v\.txt: 10 of its 500 characters \(2\.00%")


# --- the vocabulary of a language-model checkpoint -------------------------------------------


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A resumable run of a tiny character LM, and its training text."""
    root = tmp_path_factory.mktemp("lm")
    text = write(root / "t.txt", generate_text(3000, seed=0))
    out = root / "run"
    assert main(["train", *LM, "--train-text", text, "--out", str(out)]) == 0
    return out, text


def copy_run(lm_run: tuple[Path, str], tmp_path: Path) -> Path:
    import shutil

    dst = tmp_path / "run"
    shutil.copytree(lm_run[0], dst)
    return dst


def commands(run: Path, text: str) -> list[list[str]]:
    return [
        ["evaluate", "--checkpoint", str(run), "--train-text", text, "--split", "valid"],
        ["view", "--checkpoint", str(run), "--train-text", text, "--split", "valid",
         "--example", "1"],
        ["train", *LM, "--train-text", text, "--out", str(run), "--resume", "--epochs", "2"],
    ]  # fmt: skip


def edit_vocab(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    tokens = json.loads(path.read_text("utf-8"))["tokens"]
    path.write_text(json.dumps({"tokens": change(tokens)}, ensure_ascii=False), "utf-8")


@pytest.mark.parametrize("cut", ["half", "swapped"])
def test_a_vocabulary_that_is_not_the_checkpoints_is_one_line(lm_run, tmp_path, capsys, cut):
    """Half the tokens (fewer than the embedding's rows) or two tokens swapped (same size):
    evaluate, view and --resume refuse, naming the file; nothing is trained or written."""
    run = copy_run(lm_run, tmp_path)
    change = ((lambda t: t[: len(t) // 2]) if cut == "half"
              else (lambda t: [*t[:4], t[5], t[4], *t[6:]]))  # fmt: skip
    for ckpt in ("best", "last"):
        edit_vocab(run / ckpt / "tgt_vocab.json", change)
    history = (run / "history.json").read_text()
    for argv in commands(run, lm_run[1]):
        one_line_error(capsys, argv, r"tgt_vocab\.json \(\d+ tokens\) is not the vocabulary "
                                     r"this checkpoint was saved with .*put the checkpoint's own "
                                     r"tgt_vocab\.json back")  # fmt: skip
    assert (run / "history.json").read_text() == history


def test_the_checkpoint_records_its_vocabularies(lm_run):
    cfg = json.loads((lm_run[0] / "best" / "config.json").read_text("utf-8"))
    tgt = json.loads((lm_run[0] / "best" / "tgt_vocab.json").read_text("utf-8"))["tokens"]
    assert cfg["vocab"]["tgt_vocab.json"]["tokens"] == len(tgt) == cfg["config"]["tgt_vocab"]
    assert len(cfg["vocab"]["tgt_vocab.json"]["sha256"]) == 64


def test_an_old_checkpoint_without_a_record_loads_when_its_sizes_fit(lm_run, tmp_path, capsys):
    """Checkpoints saved before the record: the vocabulary must have as many tokens as the
    embedding has rows; then evaluate scores as before."""
    run = copy_run(lm_run, tmp_path)
    evaluate = commands(run, lm_run[1])[0]
    assert main([*evaluate, "--json"]) == 0
    before = json.loads(capsys.readouterr().out)["bpc"]
    for ckpt in ("best", "last"):
        cfg_path = run / ckpt / "config.json"
        cfg = json.loads(cfg_path.read_text("utf-8"))
        del cfg["vocab"]
        cfg_path.write_text(json.dumps(cfg), "utf-8")
    assert main([*evaluate, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bpc"] == before
    for ckpt in ("best", "last"):
        edit_vocab(run / ckpt / "tgt_vocab.json", lambda t: t[: len(t) // 2])
    for argv in commands(run, lm_run[1]):
        one_line_error(capsys, argv, r"tgt_vocab\.json has \d+ tokens but the model's embedding "
                                     r"has \d+ rows")  # fmt: skip


def test_a_damaged_vocabulary_record_is_one_line(lm_run, tmp_path, capsys):
    run = copy_run(lm_run, tmp_path)
    cfg_path = run / "best" / "config.json"
    cfg = json.loads(cfg_path.read_text("utf-8"))
    cfg["vocab"] = {"tgt_vocab.json": "abc"}
    cfg_path.write_text(json.dumps(cfg), "utf-8")
    one_line_error(capsys, commands(run, lm_run[1])[0],
                   r"config\.json: vocab must map .*the checkpoint is damaged")


# --- a text held as compact ids --------------------------------------------------------------


@pytest.mark.parametrize(("distinct", "dtype"), [(40, np.uint8), (256, np.uint8),
                                                  (257, np.int16), (40_000, np.int32)])  # fmt: skip
def test_ids_are_the_smallest_type_that_holds_the_alphabet(tmp_path, distinct, dtype):
    chars = [chr(0x20000 + i) for i in range(distinct)]  # CJK, no surrogates in between
    text = "".join(chars) * 2
    path = write(tmp_path / "t.txt", text)
    ids = read_ids(path)
    assert ids.ids.dtype == dtype and len(ids) == len(text)
    assert "".join(ids.chars(0, len(ids))) == text


def test_the_stored_ids_take_one_byte_a_character(tmp_path):
    text = write(tmp_path / "t.txt", generate_text(50_000, seed=0))
    splits = lm_splits({"task": "lm", "train_text": text, "segment": 64})
    for split in (splits.train, splits.valid):
        assert isinstance(split, Segments)
        assert split.text.ids.nbytes <= len(split.text)  # ≤ 1 byte a character (uint8)
    assert splits.train.text.ids.base is splits.valid.text.ids.base  # views of one array


def test_chunk_boundaries_inside_a_character_and_offsets_across_chunks(tmp_path, monkeypatch):
    """A chunk that ends inside a multi-byte character, a byte-order mark, gzip; an invalid
    byte is reported at its offset in the whole file."""
    monkeypatch.setattr(text_ids, "CHUNK", 7)
    text = "héllo, 세계! " * 50 + "ok"
    (tmp_path / "t.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "t.txt.gz").write_bytes(gzip.compress(text.encode()))
    for name in ("t.txt", "t.txt.gz"):
        got = read_ids(tmp_path / name)
        assert "".join(got.chars(0, len(got))) == text
    raw = text.encode()
    (tmp_path / "bad.txt").write_bytes(raw[:100] + b"\xff" + raw[100:])
    with pytest.raises(ValueError, match=r"byte 0xff at offset 100\)"):
        read_ids(tmp_path / "bad.txt")


def test_big_files_report_progress_on_stderr(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(text_ids, "PROGRESS_BYTES", 1 << 20)
    monkeypatch.setattr(text_ids, "PROGRESS_MB", 1)
    path = write(tmp_path / "big.txt", "abcd" * (3 << 18))  # 3 MB
    read_ids(path)
    err = capsys.readouterr().err
    assert "big.txt: alphabet: 1/3 MB" in err and "big.txt: ids: 3/3 MB" in err
    read_ids(write(tmp_path / "small.txt", "abcd" * 1000))
    assert capsys.readouterr().err == ""


def string_batches(text: str, length: int, streams: int) -> tuple[Vocab, list]:  # type: ignore[type-arg]
    """The batches as the string path makes them: a tuple of characters per segment, the
    vocabulary counted over them, each batch encoded from its segments' tokens."""
    segs = segments(text, length)
    vocab = Vocab.build(s.tokens for s in segs)
    from attnkit.tasks.lm import Carry

    carry = Carry()
    out = [encode([segs[i] for i in rows], vocab, rows, t == 0, carry)
           for t, rows in enumerate(stream_order(len(segs), streams))]  # fmt: skip
    return vocab, out


@pytest.mark.parametrize(("length", "streams"), [(16, 8), (7, 3), (64, 5)])
def test_training_batches_are_the_ones_the_string_path_makes(tmp_path, length, streams):
    """Same vocabulary (ids and order), same batches (ids, rows, order) as segments of
    strings give, on a text with a few non-ASCII characters and a short last segment."""
    text = generate_text(4000, seed=2).replace("the king", "the kïng") + "∎"
    path = write(tmp_path / "t.txt", text)
    splits = lm_splits({"task": "lm", "train_text": path, "segment": length})
    train, valid = hold_out(text)
    want_vocab, want = string_batches(train, length, streams)
    vocab = splits.train.vocab()  # type: ignore[attr-defined]
    assert vocab.tokens == want_vocab.tokens
    got = batches(splits.train, Vocab.build([]), vocab, streams, None)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g.inputs, w.inputs) and torch.equal(g.targets, w.targets)
        assert (g.index, g.first, g.count) == (w.index, w.first, w.count)
        assert g.inputs.dtype == torch.int64
    assert [s.tokens for s in splits.valid] == [s.tokens for s in segments(valid, length)]


MEASURE = textwrap.dedent("""
    import sys
    from attnkit.tasks.lm import batches
    from attnkit.train.config import DataConfig
    from attnkit.train.fit import prepare

    def status(key):  # kB
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(key))

    with open("/proc/self/clear_refs", "w") as f:  # peak := now (imports had their own)
        f.write("5")
    base = status("VmRSS:")
    p = prepare(DataConfig(task="lm", train_text=sys.argv[1]))
    b = batches(p.splits.train, p.src_vocab, p.tgt_vocab, 64, None)[0]
    print((status("VmHWM:") - base) * 1024)
""")


def test_preparing_a_text_takes_a_few_bytes_a_character(tmp_path):
    """Peak resident memory from reading an 8 MB text to its first batch, in a fresh
    process: under 8 bytes a character (the ids are 1, the read chunks a fixed ~20 MB; held
    as strings it was ~28)."""
    text = generate_text(8_000_000, seed=0)
    path = write(tmp_path / "big.txt", text)
    out = subprocess.run([sys.executable, "-c", MEASURE, path], capture_output=True, text=True,
                         check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    grown = int(out.stdout.strip().splitlines()[-1])
    assert grown / len(text) < 8, f"{grown / len(text):.1f} bytes a character"
