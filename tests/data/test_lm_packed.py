"""Packed documents for ``--task lm --pack`` (data/lm_packed.py, tasks/lm.py): what a document
is, how long ones are cut, how rows fill, that a packed batch trains as its documents alone,
and the command line (the option, its refusals, a run)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnkit.cli import main
from attnkit.data.lm_packed import PackedRows, document_bounds, pack_rows, pieces
from attnkit.data.lm_text import Segments, generate_text, lm_splits, segments
from attnkit.data.text_ids import from_text
from attnkit.models.lm import TransformerLM, TransformerLMConfig
from attnkit.tasks.lm import _batch, batches, loss_of
from attnkit.train.config import DataConfig, FitConfig, ModelConfig


def docs_of(text: str, rule: str) -> list[str]:
    b = document_bounds(from_text(text), rule).tolist()
    return [text[s:e] for s, e in zip(b[:-1], b[1:], strict=True)]


def test_a_file_s_documents_end_after_blank_lines() -> None:
    text = "one\ntwo\n\nthree\n \t\n\n\nfour\n\nfive"
    assert docs_of(text, "paragraph") == ["one\ntwo\n\n", "three\n \t\n\n\n", "four\n\n", "five"]
    assert docs_of("no newline at all", "paragraph") == ["no newline at all"]
    assert docs_of("a\nb\n", "paragraph") == ["a\nb\n"]


def test_the_generated_text_s_documents_are_its_lines() -> None:
    text = generate_text(2000, seed=1)
    docs = docs_of(text, "line")
    assert "".join(docs) == text
    assert all(d.startswith("this is ") for d in docs)
    assert all(d.endswith("\n") for d in docs[:-1]) and "\n" not in docs[-1]


def test_a_long_document_is_cut_as_segments_cut_a_text() -> None:
    bounds = np.array([0, 2, 13, 14, 18])  # documents of 2, 11, 1 and 4 characters
    starts, stops = pieces(bounds, 4)
    text = "ab" + "cdefghijklm" + "n" + "opqr"
    got = [text[s:e] for s, e in zip(starts, stops, strict=True)]
    want = ["ab", *("".join(s.tokens) for s in segments("cdefghijklm", 4)), "opqr"]
    assert got == want  # the one-character document predicts nothing: dropped
    assert max(stops - starts) <= 5


def test_rows_fill_in_order_up_to_the_segment_length() -> None:
    assert pack_rows(np.array([3, 2, 4, 1, 5]), 5).tolist() == [0, 2, 4, 5]
    rows = PackedRows(from_text(generate_text(5000, seed=2)), 40, "line")
    widths = [sum(len(d.tokens) - 1 for d in rows[k]) for k in range(len(rows))]
    assert max(widths) <= 40 and len(rows) > 1
    # every character but each document's first is predicted exactly once
    starts, stops = rows.starts, rows.stops
    assert int((stops - starts - 1).sum()) == sum(widths)


def test_a_packed_batch_trains_as_its_documents_alone() -> None:
    """Through the data path: the loss of packed batches equals the mean per-token loss of
    the same documents, one a row, padded; and the gradients, in float64."""
    text = from_text(generate_text(600, seed=3))
    rows = PackedRows(text, 48, "line")
    vocab = rows.vocab()
    torch.manual_seed(0)
    c = TransformerLMConfig(src_vocab=len(vocab), tgt_vocab=len(vocab), dim=16, heads=2,
                            layers=2, ff=32, dropout=0.0)  # fmt: skip
    m = TransformerLM(c).double()
    b = batches(rows, vocab, vocab, 64, random.Random(0))[0]  # every row in one batch
    assert b.docs is not None and len(b.index) == len(rows)
    loss, _ = loss_of(m, b)
    grads = torch.autograd.grad(loss, list(m.parameters()), allow_unused=True)
    table = text.table(vocab)
    alone = [torch.from_numpy(table[text.ids[s:e]]) for s, e in
             zip(rows.starts.tolist(), rows.stops.tolist(), strict=True)]  # fmt: skip
    u = _batch(alone, list(range(len(alone))), True, b.carry)
    logits = m(u.inputs).logits  # (K, L, V)
    nll = F.cross_entropy(logits.transpose(1, 2), u.targets, reduction="none")
    want = nll[u.targets != 0].mean()
    want_grads = torch.autograd.grad(want, list(m.parameters()), allow_unused=True)
    assert b.count == u.count
    assert abs(loss.item() - want.item()) < 1e-10
    for g, h in zip(grads, want_grads, strict=True):
        if h is not None:
            torch.testing.assert_close(g, h, rtol=0, atol=1e-10)


def test_pack_packs_the_training_split_only() -> None:
    spec = {"task": "lm", "train_size": 3000, "valid_size": 400, "test_size": 400,
            "segment": 32, "pack": True}  # fmt: skip
    splits = lm_splits(spec)
    assert isinstance(splits.train, PackedRows) and splits.train.rule == "line"
    assert isinstance(splits.valid, Segments) and isinstance(splits.test, Segments)
    assert isinstance(lm_splits({**spec, "pack": False}).train, Segments)


def test_pack_goes_with_the_lm_task_and_a_model_that_honours_it() -> None:
    with pytest.raises(ValueError, match=r"pack go\(es\) with task lm"):
        DataConfig(task="toy-ko", pack=True)
    assert "pack" not in DataConfig(task="lm").spec()  # earlier runs' specs unchanged
    assert DataConfig(task="lm", pack=True).spec()["pack"] is True
    with pytest.raises(ValueError, match="^--pack: transformer-xl's memory"):
        FitConfig(DataConfig(task="lm", pack=True), ModelConfig("transformer-xl", "tiny"),
                  out="r")  # fmt: skip
    with pytest.raises(ValueError, match="^--pack: learned positions"):
        FitConfig(DataConfig(task="lm", pack=True),
                  ModelConfig("transformer-lm", "tiny", {"position": "learned"}),
                  out="r")  # fmt: skip


def test_pack_from_the_command_line(tmp_path, capsys) -> None:
    base = ["train", "--task", "lm", "--preset", "tiny", "--train-size", "3000",
            "--valid-size", "500", "--test-size", "500", "--segment", "64", "--epochs", "2",
            "--batch-size", "8", "--no-progress", "--pack"]  # fmt: skip
    assert main([*base, "--model", "transformer-xl", "--out", str(tmp_path / "xl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--pack: transformer-xl's memory" in err
    assert main([*base, "--model", "transformer-lm", "--out", str(tmp_path / "run")]) == 0
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert history[-1]["valid_loss"] < history[0]["valid_loss"]
    config = json.loads((tmp_path / "run" / "best" / "config.json").read_text())
    assert config["meta"]["pack"] is True  # the run's data spec: evaluate reads it back
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(tmp_path / "run"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bpc"] > 0  # the held-out text, in segments
