"""scripts/alignment_localp.py's measure of where local-p's predicted centre p_t goes, on a
model whose p_t is planted: p_t = t on word-for-word monotone sentences sits on the gold word of
row t (distance 0), one word after that of row t - 1, and only row 0 is saturated (at 0)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from attnkit.data.vocab import Vocab
from attnkit.experiments.alignment.data import generate
from attnkit.models import build_seq2seq

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("alignment_localp",
                                               ROOT / "scripts" / "alignment_localp.py")
assert _spec is not None and _spec.loader is not None
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)


def test_where_p_goes_against_a_planted_centre() -> None:
    exs = generate(6, 1, "monotone")
    sv, tv = Vocab.build(e.src for e in exs), Vocab.build(e.tgt for e in exs)
    torch.manual_seed(0)
    model = build_seq2seq("luong", preset=None, src_vocab=len(sv), tgt_vocab=len(tv), emb=8,
                          hidden=8, layers=1, cell="gru", align="local-p", score="general",
                          window=5, reverse_source=True)  # fmt: skip
    align = model.attention.align
    step = [0]

    def planted(query, keys, mask=None):  # p_t = t, the step of this call (one batch)
        p = torch.full(query.shape[:-1], float(step[0]))  # (B, 1)
        step[0] += 1
        return p

    align.position = planted
    got = script.where_p_goes(model, exs, sv, tv, 5)
    words = sum(len(e.tgt) for e in exs)
    assert got["p_minus_gold_t"] == 0.0 and got["within_D_of_gold_t"] == 1.0
    assert got["p_minus_gold_t_minus_1"] == 1.0
    assert got["saturated"] == got["saturated_at_0"] == pytest.approx(len(exs) / words)
    want = sum(t / (len(e.src) + 1) for e in exs for t in range(len(e.tgt))) / words
    assert got["p_over_S_mean"] == pytest.approx(want)  # S: the words and <eos>
    assert 0 < got["mass"] <= 1
