"""The checkpoint wiring of the viewers: ``view --checkpoint``, ``translate --show`` and
``evaluate --alignments``, on a tiny RNNsearch trained for three short epochs on toy-ko. Expected
values come from running the model directly (one sentence at a time, no batching)."""

import json
from types import SimpleNamespace

import pytest
import torch

from attnkit.cli import main
from attnkit.data.tasks import load_task
from attnkit.data.vocab import SPECIALS, Vocab
from attnkit.models import build_model
from attnkit.models.base import Seq2Seq
from attnkit.models.rnnsearch import RNNSearch
from attnkit.train import checkpoint
from attnkit.train.loop import TrainConfig, train
from attnkit.viz.from_checkpoint import sentence_attention

SIZES = {"train_size": 300, "valid_size": 20, "test_size": 24}
SENTENCE = "I am a student"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        splits = load_task("toy-ko", seed=0, **SIZES)
        src_vocab = Vocab.build(e.src for e in splits.train)
        tgt_vocab = Vocab.build(e.tgt for e in splits.train)
        torch.manual_seed(0)
        model = build_model(
            "rnnsearch", preset="tiny", src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab)
        )
        out = tmp_path_factory.mktemp("rs")
        cfg = TrainConfig(epochs=3, batch_size=32, lr=1e-2, patience=0, progress=False)
        meta = {"task": "toy-ko", "task_seed": 0, **SIZES}
        train(model, "rnnsearch", splits.train, splits.valid, src_vocab, tgt_vocab, cfg, out,
              meta=meta, log=lambda s: None)  # fmt: skip
        yield out
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    return None


def forced(loaded, src, tgt):
    """Teacher-forced attention of one pair, (len(tgt)+1, len(src)+1), eos row and column."""
    s = torch.tensor([loaded.src_vocab.encode(src)])
    t = loaded.tgt_vocab.encode(tgt, bos=True)
    with torch.no_grad():
        out = loaded.model(s, torch.tensor([s.shape[1]]), torch.tensor([t[:-1]]))
    return out.weights[0]


def page_data(path):
    html = path.read_text(encoding="utf-8")
    return json.loads(html.split('id="attn-data">')[1].split("</script>")[0])


def test_view_checkpoint_page_holds_the_models_weights(ckpt, tmp_path, capsys) -> None:
    page, png = tmp_path / "a.html", tmp_path / "a.png"
    argv = ["view", "--checkpoint", str(ckpt), SENTENCE, "--out", str(page), "--png", str(png)]
    assert main([*argv, "--terminal"]) == 0
    out = capsys.readouterr().out
    hyp = out.splitlines()[0].removeprefix("translation: ").split()
    data = page_data(page)
    assert data["keys"] == [*SENTENCE.split(), "<eos>"]
    assert data["queries"] == [*hyp, "<eos>"]
    want = forced(checkpoint.load(ckpt), SENTENCE.split(), hyp)  # (T, S)
    got = torch.tensor(data["weights"], dtype=torch.float64)  # (1, 1, T, S)
    assert hyp and got.shape == (1, 1, *want.shape)
    assert torch.allclose(got, want.double(), atol=1e-5)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "│" in out and any(c in out for c in "░▒▓█") and "student" not in out.splitlines()[0]


def test_view_checkpoint_shows_every_layer_and_head_when_the_model_has_them(
    ckpt, tmp_path, capsys, monkeypatch
) -> None:
    def cross_attention(self, src, src_len, tgt_in):  # (B, L=2, H=3, T, S)
        w = self(src, src_len, tgt_in).weights  # (B, T, S)
        return torch.stack([torch.stack([w, w.roll(1, -1), w.flip(-1)], 1)] * 2, 1)

    monkeypatch.setattr(RNNSearch, "cross_attention", cross_attention, raising=False)
    page = tmp_path / "heads.html"
    assert main(["view", "--checkpoint", str(ckpt), SENTENCE, "--out", str(page)]) == 0
    hyp = capsys.readouterr().out.splitlines()[0].removeprefix("translation: ").split()
    got = torch.tensor(page_data(page)["weights"], dtype=torch.float64)
    want = forced(checkpoint.load(ckpt), SENTENCE.split(), hyp).double()
    assert got.shape == (2, 3, len(hyp) + 1, 5)
    assert torch.allclose(got[1, 2], want.flip(-1), atol=1e-5)


def test_view_needs_exactly_one_source(ckpt, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["view", "--checkpoint", str(ckpt), "--weights", "x.safetensors", SENTENCE])
    assert "not allowed with" in capsys.readouterr().err
    assert main(["view", "--checkpoint", str(ckpt)]) == 2
    assert "--checkpoint needs a sentence" in capsys.readouterr().err
    assert main(["view", "--weights", str(tmp_path / "w.safetensors"), SENTENCE]) == 2
    assert "a sentence goes with --checkpoint" in capsys.readouterr().err


def test_translate_show_prints_a_heatmap_per_sentence(ckpt, capsys) -> None:
    assert main(["translate", "--checkpoint", str(ckpt), "--show", SENTENCE, "I am a cat"]) == 0
    out = capsys.readouterr().out
    assert out.count("'█' = ") == 2  # one legend per heatmap
    assert out.count("<eos>") >= 2 and "│" in out
    assert main(["translate", "--checkpoint", str(ckpt), SENTENCE]) == 0
    assert "│" not in capsys.readouterr().out


def independent_aer(loaded, examples, threshold):
    """Och & Ney AER with S = P = gold: 1 - 2|A∩G| / (|A| + |G|), counts summed over the
    corpus; words only (the eos row and column dropped)."""
    hits = {"argmax": 0, "thr": 0}
    sizes = {"argmax": 0, "thr": 0}
    n_gold = 0
    for e in examples:
        w = forced(loaded, e.src, e.tgt)[: len(e.tgt), : len(e.src)]  # (T, S)
        gold = set(e.links)
        argmax = {(int(w[t].argmax()), t) for t in range(len(e.tgt))}
        thr = {(s, t) for t in range(len(e.tgt)) for s in range(len(e.src)) if w[t, s] >= threshold}
        for name, links in (("argmax", argmax), ("thr", thr)):
            hits[name] += len(links & gold)
            sizes[name] += len(links)
        n_gold += len(gold)
    return {k: 1 - 2 * hits[k] / (sizes[k] + n_gold) for k in hits}


def test_evaluate_alignments_matches_an_independent_aer(ckpt, capsys) -> None:
    argv = ["evaluate", "--checkpoint", str(ckpt), "--limit", "12", "--alignments"]
    assert main([*argv, "--align-threshold", "0.3", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["alignment"]
    examples = load_task("toy-ko", seed=0, **SIZES).test[:12]
    want = independent_aer(checkpoint.load(ckpt), examples, 0.3)
    assert 0 <= got["aer_argmax"] <= 1 and got["sentences"] == 12 and got["gold"] == "task"
    assert got["aer_argmax"] == pytest.approx(want["argmax"], abs=1e-9)
    assert got["aer_threshold"] == pytest.approx(want["thr"], abs=1e-9)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "AER argmax links" in out and f"{100 * want['argmax']:5.1f}%" in out
    assert "force-decoded" in out and "a >= 0.5" in out


def test_evaluate_alignments_reads_a_pharaoh_file(ckpt, tmp_path, capsys) -> None:
    examples = load_task("toy-ko", seed=0, **SIZES).test[:8]
    gold = tmp_path / "gold.align"
    gold.write_text("".join(" ".join(f"{s}-{t}" for s, t in e.links) + "\n" for e in examples))
    argv = ["evaluate", "--checkpoint", str(ckpt), "--limit", "8", "--json", "--alignments"]
    assert main([*argv, str(gold)]) == 0
    from_file = json.loads(capsys.readouterr().out)["alignment"]
    assert main(argv) == 0
    from_task = json.loads(capsys.readouterr().out)["alignment"]
    assert from_file["gold"] == str(gold)
    assert from_file["aer_argmax"] == from_task["aer_argmax"]
    # a link reversed (tgt-src) changes the score: the direction matters
    lines = gold.read_text().splitlines()
    lines[0] = " ".join(f"{t}-{s}" for s, t in examples[0].links if s < len(examples[0].tgt))
    gold.write_text("\n".join(lines) + "\n")
    assert main([*argv, str(gold)]) == 0
    assert json.loads(capsys.readouterr().out)["alignment"]["aer_argmax"] != from_task["aer_argmax"]


@pytest.mark.parametrize(
    ("line", "lines", "message"),
    [
        ("0-0 x-1", 8, "line 3: bad alignment link 'x-1'"),
        ("0:1", 8, "line 3: bad alignment link '0:1'"),
        ("0-0 40-1", 8, "line 3: link 40-1 is outside"),
        ("0-0", 7, "has 7 lines but 8 sentences"),
    ],
)
def test_evaluate_alignments_malformed_file_names_the_line(
    ckpt, tmp_path, capsys, line, lines, message
) -> None:
    bad = tmp_path / "bad.align"
    rows = ["0-0"] * lines
    rows[2] = line
    bad.write_text("\n".join(rows) + "\n")
    argv = ["evaluate", "--checkpoint", str(ckpt), "--limit", "8", "--alignments", str(bad)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and str(bad) in err
    assert main([*argv[:-1], str(tmp_path / "missing.align")]) == 2
    assert "no alignment file" in capsys.readouterr().err


def test_a_model_without_attention_is_a_clear_error(tmp_path, capsys) -> None:
    splits = load_task("toy-ko", seed=0, **SIZES)
    src_vocab = Vocab.build(e.src for e in splits.train)
    tgt_vocab = Vocab.build(e.tgt for e in splits.train)
    model = build_model("rnnencdec", preset="tiny", src_vocab=len(src_vocab), tgt_vocab=12)
    meta = {"task": "toy-ko", "task_seed": 0, **SIZES}
    path = checkpoint.save(
        tmp_path / "encdec", model, "rnnencdec", src_vocab, Vocab(tgt_vocab.tokens[:12]), meta=meta
    )
    assert main(["view", "--checkpoint", str(path), SENTENCE]) == 2
    assert "rnnencdec has no attention to show" in capsys.readouterr().err
    assert main(["evaluate", "--checkpoint", str(path), "--limit", "2", "--alignments"]) == 2
    assert "has no attention weights to align" in capsys.readouterr().err
    assert main(["translate", "--checkpoint", str(path), "--show", SENTENCE]) == 0
    assert "no attention to show" in capsys.readouterr().out


def test_evaluate_alignments_scores_each_layer_of_a_multi_layer_model(
    ckpt, capsys, monkeypatch
) -> None:
    def cross_attention(self, src, src_len, tgt_in):  # (B, L=2, H=2, T, S)
        w = self(src, src_len, tgt_in).weights  # (B, T, S)
        return torch.stack([torch.stack([w, w], 1), torch.stack([w.roll(1, -1)] * 2, 1)], 1)

    argv = ["evaluate", "--checkpoint", str(ckpt), "--limit", "12", "--alignments"]
    assert main([*argv, "--json"]) == 0
    assert "aer_argmax_by_layer" not in json.loads(capsys.readouterr().out)["alignment"]
    monkeypatch.setattr(RNNSearch, "cross_attention", cross_attention, raising=False)
    assert main([*argv, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["alignment"]
    first, second = got["aer_argmax_by_layer"]
    assert first == pytest.approx(got["aer_argmax"], abs=1e-12) and 0 <= second <= 1
    assert second != first
    assert main(argv) == 0
    assert "AER argmax by layer     0: " in capsys.readouterr().out


class _AttendsUniformly(Seq2Seq):
    """Decodes eos at once; ``cross_attention`` records the teacher-forced input it gets."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # for next(model.parameters())
        self.seen: list[list[list[int]]] = []

    def encode(self, src, src_len):  # type: ignore[no-untyped-def]
        return {"src": src}

    def init_state(self, memory):  # type: ignore[no-untyped-def]
        return (memory["src"],)

    def step(self, prev, state, memory):  # type: ignore[no-untyped-def]
        b, s = memory["src"].shape
        logits = torch.zeros(b, self.vocab)
        logits[:, Vocab.eos_id] = 10.0
        return logits, torch.full((b, s), 1 / s), state  # (B, V), (B, S)

    def cross_attention(self, src, src_len, tgt_in):  # type: ignore[no-untyped-def]
        self.seen.append(tgt_in.tolist())
        b, t, s = tgt_in.shape[0], tgt_in.shape[1], src.shape[1]
        return torch.full((b, 1, 1, t, s), 1 / s)  # (B, L, H, T, S)


def test_per_head_attention_starts_from_the_vocabularys_bos() -> None:
    class OtherBos(Vocab):  # a vocabulary whose bos id is not 1
        bos_id = 5

    tgt_vocab = OtherBos([*SPECIALS, "x", "y"])
    model = _AttendsUniformly(len(tgt_vocab))
    loaded = SimpleNamespace(
        model=model, src_vocab=Vocab([*SPECIALS, "a"]), tgt_vocab=tgt_vocab, model_name="stub"
    )
    hyp, record = sentence_attention(loaded, ["a", "a"])
    assert hyp == []
    assert model.seen == [[[5]]]  # (1, T = 1): bos only, the vocabulary's
    assert record.weights.shape == (1, 1, 1, 3)  # (L, H, T, S): eos row x a, a, eos


def test_view_checkpoint_model_view_holds_every_map(ckpt, tmp_path, capsys) -> None:
    page = tmp_path / "model.html"
    argv = ["view", "--checkpoint", str(ckpt), SENTENCE, "--model-view", "--out", str(page)]
    assert main(argv) == 0
    hyp = capsys.readouterr().out.splitlines()[0].removeprefix("translation: ").split()
    (cross,) = page_data(page)["sections"]
    assert cross["name"] == "cross" and cross["keys"][:4] == SENTENCE.split()
    got = torch.tensor(cross["weights"], dtype=torch.float64)  # (L, H, Tq, Tk)
    want = forced(checkpoint.load(ckpt), SENTENCE.split(), hyp).double()
    assert torch.allclose(got[-1, -1], want, atol=1e-4)
