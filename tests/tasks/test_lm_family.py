"""The ``lm`` task family (tasks/lm.py, data/lm_text.py): texts cut into segments, the
segments dealt into streams, the memory carried from batch to batch in training and
evaluation, bits per character, and the command line end to end (train, evaluate, view),
with the errors a bad text file gets."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from attnkit.cli import main
from attnkit.data.lm_text import Segment, generate_text, hold_out, lm_splits, read_text, segments
from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.models.lm import LMOutput
from attnkit.tasks.lm import LM, batches, evaluate, run, stream_order, text_nll

MULTI30K = Path(__file__).parents[3] / "shared" / "data" / "multi30k" / "train.en.gz"


def test_segments_overlap_by_one_and_predict_each_character_once():
    segs = segments("abcdefg", 3)
    assert ["".join(s.tokens) for s in segs] == ["abcd", "defg"]
    assert [s.start for s in segs] == [0, 3]
    assert ["".join(s.tokens) for s in segments("abcdefgh", 3)] == ["abcd", "defg", "gh"]
    targets = "".join("".join(s.tokens[1:]) for s in segments("abcdefgh", 3))
    assert targets == "bcdefgh"
    with pytest.raises(ValueError, match="--segment 0"):
        segments("abc", 0)


def test_streams_continue_row_by_row():
    order = stream_order(7, 3)  # runs [0 1 2] [3 4] [5 6]
    assert order == [[0, 3, 5], [1, 4, 6], [2]]
    assert stream_order(2, 8) == [[0, 1]]
    for n, b in ((10, 3), (9, 3), (5, 1), (1, 4)):
        order = stream_order(n, b)
        assert sorted(i for rows in order for i in rows) == list(range(n))
        for t in range(1, len(order)):  # row r continues row r of the batch before
            assert all(order[t][r] == order[t - 1][r] + 1 for r in range(len(order[t])))
            assert len(order[t]) <= len(order[t - 1])


def test_hold_out_keeps_the_last_five_percent():
    text = "x" * 950 + "y" * 50
    train, valid = hold_out(text)
    assert train == "x" * 950 and valid == "y" * 50
    splits = lm_splits({"task": "lm", "segment": 10, "train_text": None, "task_seed": 3,
                        "train_size": 50, "valid_size": 20, "test_size": 20})  # fmt: skip
    assert len(splits.train) == 5 and len(splits.valid) == 2


def test_the_generated_text_brings_names_back():
    text = generate_text(3000, seed=1)
    assert len(text) == 3000 and text == generate_text(3000, seed=1)
    name = text.split("this is ")[1][:5]
    assert f"ask {name}." in text


def test_asks_sets_how_often_the_name_comes_back_and_the_default_text_is_unchanged():
    """asks: the chance a sentence asks its record's name; its default (0.3) draws the text
    of before to the character (earlier runs' specs have no "asks" and regenerate it)."""
    from attnkit.data.lm_text import ASKS, lm_texts
    from attnkit.train.config import DataConfig

    assert generate_text(5000, seed=2, asks=ASKS) == generate_text(5000, seed=2)
    # the text drawn before asks existed (sha256 of generate_text(5000, seed=2) then)
    before = "eaf2cbe413bc119f16695993d7f488d373e32f1c71a0ef8fa5b5f8ad9b743579"
    assert hashlib.sha256(generate_text(5000, seed=2).encode()).hexdigest() == before
    spec = DataConfig(task="lm", task_seed=4, train_size=900, valid_size=90,
                      test_size=90).spec()  # fmt: skip
    assert "asks" not in spec
    assert lm_texts(spec) == lm_texts({**spec, "asks": ASKS})
    more = DataConfig(task="lm", task_seed=4, train_size=900, valid_size=90, test_size=90,
                      asks=0.7).spec()  # fmt: skip
    assert more["asks"] == 0.7
    counts = [generate_text(20_000, seed=3, asks=a).count("ask ") for a in (0.3, 0.7)]
    # a record of k sentences asks ~k·asks times; asks are shorter, so more of them fit
    assert counts[1] > 2 * counts[0] > 0
    name = lm_texts(more)[0].split("this is ")[1][:5]
    assert f"ask {name}." in lm_texts(more)[0]


class Fixed(nn.Module):
    """A stand-in LM whose next-character distribution is softmax(logits), wherever it is."""

    config = None

    def __init__(self, logits: list[float]) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.tensor(logits, dtype=torch.float64))

    def forward(self, ids, mems=None, need_weights=False, memory=None):
        return LMOutput(self.logits.expand(*ids.shape, -1), None)


def test_bits_per_character_against_a_hand_computation():
    vocab = Vocab.build(["aab"])  # ids: 4 specials, a, b
    assert vocab.tokens[4:] == ["a", "b"]
    logits = [0.0, 0.0, 0.0, 0.0, math.log(3.0), 0.0]  # p(a) = 3/8, p(b) = 1/8, specials 1/8
    text = "aabab" + "a" * 4  # 9 characters, 8 predicted: a b a b a a a a
    segs = segments(text, 3)  # the last segment is short: its padding must not count
    loaded = type("Loaded", (), {"model": Fixed(logits), "tgt_vocab": vocab})()
    bits = (6 * -math.log2(3 / 8) + 2 * -math.log2(1 / 8)) / 8  # by hand
    scores = evaluate(loaded, segs)
    assert scores["characters"] == 8
    assert scores["bpc"] == pytest.approx(bits, rel=1e-12)
    assert scores["perplexity"] == pytest.approx(2**bits, rel=1e-12)
    for streams in (1, 2, 3):
        nats, count = text_nll(loaded.model, segs, vocab, streams=streams)
        assert count == 8 and nats / count / math.log(2) == pytest.approx(bits, rel=1e-12)


def test_evaluation_carries_the_memory_as_an_explicit_loop_does():
    torch.manual_seed(0)
    text = generate_text(400, seed=0)
    segs = segments(text, 16)
    vocab = Vocab.build(s.tokens for s in segs)
    model = build_model("transformer-xl", src_vocab=4, tgt_vocab=len(vocab), preset="tiny",
                        memory=24).double().eval()  # fmt: skip
    nats, count = text_nll(model, segs, vocab, streams=3)
    explicit, n = 0.0, 0  # each stream alone, its segments in order, the memory passed by hand
    order = stream_order(len(segs), 3)
    for r in range(3):
        mems = None
        for i in [rows[r] for rows in order if r < len(rows)]:  # stream r's segments
            ids = torch.tensor([vocab.encode(segs[i].tokens, eos=False)])  # (1, L + 1)
            with torch.no_grad():
                out = model(ids[:, :-1], mems)
            explicit += float(torch.nn.functional.cross_entropy(
                out.logits[0], ids[0, 1:], reduction="sum"))  # fmt: skip
            n += ids.shape[1] - 1
            mems = out.mems
    assert n == count == len(text) - 1
    assert nats == pytest.approx(explicit, rel=1e-10)
    fresh, _ = text_nll(model, segs, vocab, streams=3, memory=0)  # no memory: another number
    assert abs(fresh - nats) > 1e-3


def test_training_batches_carry_the_detached_memory_to_the_next_batch():
    torch.manual_seed(0)
    segs = segments(generate_text(300, seed=0), 10)
    vocab = Vocab.build(s.tokens for s in segs)
    model = build_model("transformer-xl", src_vocab=4, tgt_vocab=len(vocab), preset="tiny",
                        memory=10)  # fmt: skip
    bs = batches(segs, vocab, vocab, 4, None)
    assert bs[0].first and not any(b.first for b in bs[1:])
    assert all(b.carry is bs[0].carry for b in bs)
    loss, out = LM.loss_of(model, bs[0], 0.0)
    assert bs[0].carry.mems is out.mems and not out.mems[0].requires_grad
    loss.backward()
    seen = {}
    model.register_forward_pre_hook(lambda m, a: seen.update(mems=a[1]))
    run(model, bs[1])
    assert seen["mems"] is not None and seen["mems"][0].shape == (4, 10, 32)
    run(model, bs[0])  # a stream's first batch starts again without memory
    assert seen["mems"] is None


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_train_evaluate_and_view_from_the_command_line(tmp_path, capsys):
    """`attnkit train --model transformer-xl --train-text F` learns in seconds; evaluate
    prints bpc; view shows the maps with the memory keys."""
    text = write(tmp_path / "t.txt", generate_text(6000, seed=0))
    run_dir = tmp_path / "run"
    args = ["train", "--model", "transformer-xl", "--train-text", text, "--preset", "tiny",
            "--segment", "16", "--memory", "16", "--batch-size", "8", "--epochs", "3",
            "--no-progress", "--out", str(run_dir)]  # fmt: skip
    assert main(args) == 0
    history = json.loads((run_dir / "history.json").read_text())
    losses = [row["valid_loss"] for row in history]
    assert losses[-1] < losses[0] - 0.3 and losses[0] < math.log(40), losses
    capsys.readouterr()
    evaluate = ["evaluate", "--checkpoint", str(run_dir), "--train-text", text, "--json"]
    assert main([*evaluate, "--split", "valid"]) == 0
    scores = json.loads(capsys.readouterr().out)
    best = min(losses)  # the valid split, read in the run's 8 streams as in training
    assert scores["bpc"] == pytest.approx(best / math.log(2), abs=1e-3)
    page = tmp_path / "v.html"
    view = ["view", "--checkpoint", str(run_dir), "--train-text", text, "--split", "valid",
            "--example", "2"]  # fmt: skip
    assert main([*view, "--out", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert "m0:" in html and "m15:" in html and "m16:" not in html  # M = 16 memory keys
    assert main(view) == 0  # the terminal heatmap
    out = capsys.readouterr().out
    assert "16 queries over 16 memory keys (m0 .. m15, oldest first)" in out
    assert main([*view[:-1], "0"]) == 0  # the split's first segment: no memory yet
    assert "over 0 memory keys and" in capsys.readouterr().out


def test_the_vanilla_lm_trains_on_the_generated_text(tmp_path, capsys):
    args = ["train", "--task", "lm", "--model", "transformer-lm", "--preset", "tiny",
            "--train-size", "3000", "--valid-size", "500", "--test-size", "500", "--segment",
            "16", "--epochs", "2", "--batch-size", "8", "--no-progress", "--out",
            str(tmp_path / "run")]  # fmt: skip
    assert main(args) == 0
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert history[-1]["valid_loss"] < history[0]["valid_loss"]
    capsys.readouterr()
    assert main(["view", "--checkpoint", str(tmp_path / "run"), "--example", "1"]) == 0
    assert "16 queries over 0 memory keys and the segment's 16 keys" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file; name a UTF-8 text file"),
        (b"", "holds 0 characters; a language model needs a text of at least 2"),
        (b"caf\xe9 au lait", "is not UTF-8 text .byte 0xe9 at offset 3.; convert it first"),
    ],
)
def test_a_bad_text_file_is_one_line_that_says_what_to_do(tmp_path, capsys, content, message):
    path = tmp_path / "bad.txt"
    if content is not None:
        path.write_bytes(content)
    assert main(["train", "--train-text", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err
    assert not (tmp_path / "r" / "best").exists()


def test_text_options_go_with_the_lm_task(tmp_path, capsys):
    text = write(tmp_path / "t.txt", "abc" * 50)
    for args, message in (
        (["--task", "toy-ko", "--train-text", text], "--train-text go(es) with --task lm"),
        (["--task", "lm", "--valid-text", text], "--valid-text goes with --train-text"),
        (["--task", "lm", "--train-text", text, "--train-size", "9"], "sizes the generated"),
        (["--task", "lm", "--segment", "0"], "--segment 0"),
        (["--task", "lm", "--asks", "1.5"], "--asks 1.5; it is a chance"),
        (["--task", "toy-ko", "--asks", "0.5"], "--asks go(es) with --task lm"),
        (["--task", "lm", "--train-text", text, "--asks", "0.5"], "shapes the generated"),
        (["--train-text", text, "--model", "transformer"], "use --model transformer-lm | tr"),
        (["--train-text", text, "--model", "transformer-lm", "--memory", "4"], "--memory do"),
    ):
        assert main(["train", *args, "--out", str(tmp_path / "r")]) == 2, args
        assert message in capsys.readouterr().err, args


def test_gzip_and_a_byte_order_mark_are_read(tmp_path):
    (tmp_path / "t.txt.gz").write_bytes(gzip.compress("\ufeffhello".encode()))
    assert read_text(tmp_path / "t.txt.gz") == "hello"


@pytest.mark.skipif(not MULTI30K.is_file(), reason=f"shared data absent: {MULTI30K}")
def test_the_multi30k_english_side_reads_as_a_corpus():
    splits = lm_splits({"task": "lm", "train_text": str(MULTI30K), "segment": 128})
    text = read_text(MULTI30K)
    assert len(splits.valid) == math.ceil((len(text) - round(len(text) * 0.95) - 1) / 128)
    assert all(isinstance(s, Segment) for s in splits.train[:3])
    assert "".join(splits.train[0].tokens).startswith(text[:129])


def test_a_valid_file_is_the_validation_and_test_text(tmp_path):
    train = write(tmp_path / "train.txt", "abcdefghij" * 10)
    valid = write(tmp_path / "valid.txt", "jihgfedcba")
    splits = lm_splits({"task": "lm", "train_text": train, "valid_text": valid, "segment": 4})
    assert "".join(splits.train[0].tokens) == "abcde" and len(splits.train) == 25  # all of it
    assert ["".join(s.tokens) for s in splits.valid] == ["jihgf", "fedcb", "ba"]
    assert splits.test == splits.valid
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match=r"^--valid-text .*bad.txt is not UTF-8"):
        lm_splits({"task": "lm", "train_text": train, "valid_text": str(tmp_path / "bad.txt")})
