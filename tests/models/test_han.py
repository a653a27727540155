"""The hierarchical attention network (Yang 2016) end to end: trained by ``attnkit train`` on
the docs task, scored by ``attnkit evaluate`` (accuracy, key-sentence peak), shown by
``attnkit view --checkpoint DIR --example N`` (sentence bars beside word heatmaps, PNG and a
self-contained page); and its pieces: one sentence is word-level attention pooling, every
pooling and encoder option runs, feature-wise weights sum to one per feature."""

import json

import pytest
import torch

from attnkit.cli import main
from attnkit.data.docs import Doc
from attnkit.data.tasks import load_task
from attnkit.data.vocab import Vocab
from attnkit.mechanisms.hierarchical import attention_pool
from attnkit.models import build_model, make_config
from attnkit.tasks.docs import encode, predict
from attnkit.train import checkpoint
from attnkit.viz.hierarchy import DocView, page

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(**kw):
    torch.manual_seed(0)
    return build_model("han", preset="tiny", src_vocab=30, tgt_vocab=6, **kw).eval()


def _words(b=3, s=4, t=5):
    torch.manual_seed(1)
    words = torch.randint(1, 30, (b, s, t))
    words[0, 2:] = 0  # two padding sentences
    words[1, :, 3:] = 0  # short sentences
    return words


def test_one_sentence_per_document_is_word_level_attention_pooling():
    m = _model()
    words = _words()[:, :1]  # (B, 1, T)
    out = m(words)
    h = m.encode_words(words)[:, 0]  # (B, T, 2H)
    flat = attention_pool(h, words[:, 0] != 0, m.word_pool.w, m.word_pool.b,
                          m.word_pool.context)  # fmt: skip
    torch.testing.assert_close(out.hierarchy.sentences[:, 0], flat.vector)
    torch.testing.assert_close(out.hierarchy.sentence_weights, torch.ones(3, 1))
    doc = m.sentence_pool(m.sentence_encoder(flat.vector[:, None], torch.ones(3, 1).bool()),
                          torch.ones(3, 1).bool()).vector  # fmt: skip
    torch.testing.assert_close(out.logits, m.out(doc))


@pytest.mark.parametrize("pool", ["attention", "mean", "max", "multidim"])
@pytest.mark.parametrize("encoder", ["gru", "disan"])
def test_every_pooling_and_encoder_runs_and_ignores_padding(pool, encoder):
    m = _model(pool=pool, encoder=encoder)
    words = _words()
    out = m(words)
    assert out.logits.shape == (3, 6)
    padded = torch.cat([words, torch.zeros(3, 2, 5, dtype=torch.long)], 1)  # more padding
    padded = torch.cat([padded, torch.zeros(3, 6, 2, dtype=torch.long)], 2)
    torch.testing.assert_close(m(padded).logits, out.logits, atol=1e-5, rtol=1e-5)
    w = out.hierarchy.sentence_weights
    if pool in ("mean", "max"):
        assert w is None and out.hierarchy.word_weights is None
    elif pool == "multidim":  # one weight per sentence and feature, one per feature in all
        assert w.shape == (3, 4, m.config.hidden * 2)
        torch.testing.assert_close(w.sum(1), torch.ones(3, m.config.hidden * 2))
        assert (w[0, 2:] == 0).all()
        ww = out.hierarchy.word_weights  # (B, S, T, D)
        torch.testing.assert_close(ww[1].sum(1), torch.ones(4, m.config.hidden * 2))
    else:
        torch.testing.assert_close(w.sum(1), torch.ones(3))


def test_bad_options_fail_clearly():
    with pytest.raises(ValueError, match="pool='sum'; choose one of"):
        make_config("han", pool="sum")
    with pytest.raises(ValueError, match="encoder='lstm'; choose one of"):
        make_config("han", encoder="lstm")
    with pytest.raises(ValueError, match=r"HANConfig.hidden=0; it must be >= 1"):
        make_config("han", hidden=0)


def test_prediction_never_picks_a_special_symbol_and_the_page_escapes_tokens():
    logits = torch.tensor([[9.0, 9.0, 9.0, 9.0, 1.0, 2.0]])
    assert predict(logits).tolist() == [5]
    vocab = Vocab.build([["a", "<b>"]])
    doc = Doc((("a", "<b>"),), "pos", 0)
    b = encode([doc], vocab, Vocab.build([["pos", "neg"]]), [0])
    want = [vocab.index["a"], vocab.index["<b>"]]
    assert b.words.shape == (1, 1, 2) and b.words[0, 0].tolist() == want
    html = page(DocView([["<script>x</script>"]], [[1.0]], [1.0], 0, "pos", "pos", "t"))
    assert "<script>x" not in html and "&lt;script&gt;" in html
    assert "Content-Security-Policy" in html and "http" not in html.split("</head>")[1]


def test_train_evaluate_view_end_to_end(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--task", "docs", "--train-size", "600", "--valid-size", "40",
            "--test-size", "60", "--model", "han", "--preset", "tiny", "--epochs", "6",
            "--batch-size", "20", "--lr", "1e-2", "--no-progress", "--out", str(run)]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(run), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["n"] == 60 and 0 <= scores["key_peak"] <= 1
    # the scores are what the checkpoint's model does on the regenerated test documents
    ck = checkpoint.load(run)
    test = load_task("docs", seed=0, train_size=600, valid_size=40, test_size=60).test
    with torch.no_grad():
        out = ck.model.eval()(encode(test, ck.src_vocab, ck.tgt_vocab, []).words)
    labels = [ck.tgt_vocab.tokens[int(i)] for i in out.logits[:, 4:].argmax(-1) + 4]
    right = sum(label == d.label for label, d in zip(labels, test, strict=True))
    peaks = out.hierarchy.sentence_weights.argmax(-1).tolist()
    assert scores["accuracy"] == pytest.approx(right / 60)
    hits = sum(p == d.key for p, d in zip(peaks, test, strict=True))
    assert scores["key_peak"] == pytest.approx(hits / 60)
    rows = json.loads((run / "history.json").read_text())
    assert rows[-1]["valid_loss"] < rows[0]["valid_loss"]  # it trained
    page_path, png = tmp_path / "doc.html", tmp_path / "doc.png"
    argv = ["view", "--checkpoint", str(run), "--example", "2", "--out", str(page_path),
            "--png", str(png)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "key sentence" in text and "predicted" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = page_path.read_text()
    assert 'class="bar"' in html and html.count("<tr") >= 4
