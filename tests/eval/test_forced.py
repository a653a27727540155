"""The one-number attention AER of training reports agrees with the full alignment report."""

import torch

from attnkit.data.tasks import load_task
from attnkit.data.vocab import Vocab
from attnkit.eval.alignment import corpus_aer, parse_pharaoh
from attnkit.eval.forced import attention_aer
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
