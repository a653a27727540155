"""The one-number attention AER of training reports agrees with the full alignment report."""

import torch

from attnkit.data.tasks import load_task
from attnkit.data.vocab import Vocab
from attnkit.eval.alignment import corpus_aer, parse_pharaoh
from attnkit.eval.forced import attention_aer, forced_attention
from attnkit.models import build_model


def test_attention_aer_is_the_corpus_aer_of_forced_argmax_links(one_thread) -> None:
    splits = load_task("toy-ko", seed=0, train_size=60, valid_size=5, test_size=6)
    sv = Vocab.build(e.src for e in splits.train + splits.test)
    tv = Vocab.build(e.tgt for e in splits.train + splits.test)
    torch.manual_seed(0)
    model = build_model("rnnsearch", preset="tiny", src_vocab=len(sv), tgt_vocab=len(tv))
    got = attention_aer(model, splits.test, sv, tv)
    model.eval()
    predicted, gold = [], []
    for e in splits.test:  # one sentence at a time: no padding anywhere
        src = torch.tensor([sv.encode(e.src)])
        tgt = tv.encode(e.tgt, bos=True)
        with torch.no_grad():
            w = model(src, torch.tensor([src.shape[1]]), torch.tensor([tgt[:-1]])).weights[0]
        w = w[: len(e.tgt), : len(e.src)]  # (T, S) words only
        predicted.append({(int(w[t].argmax()), t) for t in range(len(e.tgt))})
        gold.append(parse_pharaoh(" ".join(f"{s}-{t}" for s, t in e.links)))
    assert got is not None and 0.0 <= got <= 1.0
    assert abs(got - corpus_aer(predicted, gold)) < 1e-9


def test_attention_aer_is_none_without_attention_or_gold(one_thread) -> None:
    splits = load_task("toy-ko", seed=0, train_size=20, valid_size=2, test_size=3)
    sv = Vocab.build(e.src for e in splits.train + splits.test)
    tv = Vocab.build(e.tgt for e in splits.train + splits.test)
    plain = build_model("rnnencdec", preset="tiny", src_vocab=len(sv), tgt_vocab=len(tv))
    assert attention_aer(plain, splits.test, sv, tv) is None
    attn = build_model("rnnsearch", preset="tiny", src_vocab=len(sv), tgt_vocab=len(tv))
    no_links = [type(e)(e.src, e.tgt) for e in splits.test]
    assert attention_aer(attn, no_links, sv, tv) is None


class FedRow(torch.nn.Module):
    """A stand-in model whose teacher-forced attention is planted one target row late: the
    step fed y_t (row t + 1) attends source word t; the bos step (row 0) attends nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.p = torch.nn.Parameter(torch.zeros(1))

    def forward(self, src, src_len, tgt_in):
        from attnkit.models.base import Seq2SeqOutput

        b, t, s = tgt_in.shape[0], tgt_in.shape[1], src.shape[1]
        w = torch.zeros(b, t, s)  # (B, T+1, S+1): rows bos y_1 .., columns x_1 .. eos
        for i in range(1, t):
            w[:, i, min(i - 1, s - 1)] = 1.0
        return Seq2SeqOutput(torch.zeros(b, t, 5), w)


def test_row_shift_reads_the_row_of_the_step_fed_the_word() -> None:
    """Luong 2015, footnote 14: with row_shift=1 target word t is the row of the step fed y_t.
    On a word-for-word diagonal, the planted late diagonal is then exact (AER 0); read as the
    step predicting y_t (the default), every link is one source word early: 0 of T_i - 1 links
    right (row 0 has none), AER = 1 - 0 / (|A| + |S|) = 1."""
    from attnkit.data.example import Example

    words = [f"w{i}" for i in range(9)]
    exs = [Example(words[:n], words[:n], [(i, i) for i in range(n)]) for n in (3, 7, 9, 5)]
    sv, tv = Vocab.build(e.src for e in exs), Vocab.build(e.tgt for e in exs)
    model = FedRow()
    assert attention_aer(model, exs, sv, tv, row_shift=1) == 0.0
    assert attention_aer(model, exs, sv, tv) == 1.0
    shifted = forced_attention(model, exs, sv, tv, row_shift=1, batch_size=2)
    plain = forced_attention(model, exs, sv, tv, batch_size=2)
    for e, a, b in zip(exs, shifted, plain, strict=True):
        n = len(e.tgt)
        assert a.shape == b.shape == (n, n)
        assert torch.equal(a, torch.eye(n))  # the last word's row: the step predicting <eos>
        assert torch.equal(b[1:], torch.eye(n)[:-1]) and b[0].sum() == 0


def test_row_shift_other_than_0_or_1_is_refused() -> None:
    import pytest

    splits = load_task("toy-ko", seed=0, train_size=5, valid_size=1, test_size=2)
    sv, tv = Vocab.build(e.src for e in splits.train), Vocab.build(e.tgt for e in splits.train)
    model = build_model("rnnsearch", preset="tiny", src_vocab=len(sv), tgt_vocab=len(tv))
    with pytest.raises(ValueError, match="row_shift=2; pass 0"):
        forced_attention(model, splits.test, sv, tv, row_shift=2)
