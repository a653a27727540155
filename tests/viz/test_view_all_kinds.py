"""Every attention of a trained model is viewable: ``view --checkpoint`` (page, PNG, terminal)
and ``translate --show/--save-attention`` choose among encoder self-attention, decoder
self-attention and cross-attention (``--kind``, ``--layer``, ``--head``), on a tiny Transformer
trained for two short epochs on toy-ko. Expected weights come from the model's own
``attention_maps``, teacher-forced on the translation the command printed; the RNNs name the
one kind they have."""

import json

import pytest
import torch

import attnkit.viz
import attnkit.viz.outputs
from attnkit.cli import main
from attnkit.cli import view as view_command
from attnkit.data.tasks import load_task
from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.train import checkpoint
from attnkit.train.loop import TrainConfig, train
from attnkit.viz.from_checkpoint import KINDS, select_map
from attnkit.viz.page import page_data, write_attention_page
from attnkit.viz.weights_file import AttentionRecord, save_attention

SIZES = {"train_size": 200, "valid_size": 10, "test_size": 10}
META = {"task": "toy-ko", "task_seed": 0, **SIZES}
SENTENCE = "I am a student"


def _vocabs():
    splits = load_task("toy-ko", seed=0, **SIZES)
    return (
        splits,
        Vocab.build(e.src for e in splits.train),
        Vocab.build(e.tgt for e in splits.train),
    )


@pytest.fixture(scope="module")
def tf(tmp_path_factory):
    """A Transformer with 2 encoder layers, 2 decoder layers, 2 heads, two epochs of toy-ko."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        splits, sv, tv = _vocabs()
        torch.manual_seed(0)
        model = build_model("transformer", preset="tiny", src_vocab=len(sv), tgt_vocab=len(tv),
                            enc_layers=2, dec_layers=2)  # fmt: skip
        out = tmp_path_factory.mktemp("tf")
        cfg = TrainConfig(epochs=2, batch_size=32, lr=1e-2, patience=0, progress=False,
                          valid_decode=0)  # fmt: skip
        train(model, "transformer", splits.train, splits.valid, sv, tv, cfg, out, meta=META,
              log=lambda s: None)  # fmt: skip
        yield out
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def rnns(tmp_path_factory):
    """Untrained RNNsearch and Luong checkpoints (the kinds a model has do not need training)."""
    _, sv, tv = _vocabs()
    out = tmp_path_factory.mktemp("rnn")
    paths = {}
    for name in ("rnnsearch", "luong"):
        torch.manual_seed(0)
        model = build_model(name, preset="tiny", src_vocab=len(sv), tgt_vocab=len(tv))
        paths[name] = checkpoint.save(out / name, model, name, sv, tv, meta=META)
    return paths


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    return None


def maps_of(ckpt, hyp: list[str]) -> dict[str, torch.Tensor]:
    """The model's attention_maps teacher-forced on ``hyp``: kind -> (L, H, Tq, Tk)."""
    loaded = checkpoint.load(ckpt)
    src = torch.tensor([loaded.src_vocab.encode(SENTENCE.split())])  # (1, S) with eos
    tgt_in = torch.tensor([loaded.tgt_vocab.encode(hyp, bos=True, eos=False)])  # (1, T)
    with torch.no_grad():
        maps = loaded.model.attention_maps(src, torch.tensor([src.shape[1]]), tgt_in)
    return {k: w[0].double() for k, w in maps.items()}


def page_json(path) -> dict:
    html = path.read_text(encoding="utf-8")
    return json.loads(html.split('id="attn-data">')[1].split("</script>")[0])


def hyp_of(out: str) -> list[str]:
    return out.splitlines()[0].removeprefix("translation: ").split()


@pytest.fixture
def drawn(monkeypatch):
    """What the PNG heatmaps were asked to draw: weights and the choice of layer and heads."""
    calls: list[dict] = []
    real = attnkit.viz.outputs.heatmap

    def spy(weights, *args, **kwargs):
        calls.append({"weights": torch.as_tensor(weights).double(), "args": args, **kwargs})
        return real(weights, *args, **kwargs)

    monkeypatch.setattr(attnkit.viz.outputs, "heatmap", spy)
    monkeypatch.setattr(attnkit.viz, "heatmap", spy)  # translate --save-attention's
    return calls


def test_page_holds_every_kind_and_opens_on_kind(tf, tmp_path, capsys) -> None:
    page = tmp_path / "all.html"
    assert main(["view", "--checkpoint", str(tf), SENTENCE, "--out", str(page),
                 "--kind", "dec-self"]) == 0  # fmt: skip
    hyp = hyp_of(capsys.readouterr().out)
    data, want = page_json(page), maps_of(tf, hyp)
    views = {v["name"]: v for v in [data, *data["more"]]}
    assert list(views) == ["cross", "enc-self", "dec-self"]
    assert data["shown"] == 2  # the page opens on --kind
    src, t = [*SENTENCE.split(), "<eos>"], len(hyp) + 1
    assert views["cross"]["queries"] == [*hyp, "<eos>"] and views["cross"]["keys"] == src
    assert views["enc-self"]["queries"] == views["enc-self"]["keys"] == src
    assert views["dec-self"]["queries"] == views["dec-self"]["keys"] == ["<bos>", *hyp]
    assert views["enc-self"]["kind"] == views["dec-self"]["kind"] == "self"
    shapes = {"cross": (2, 2, t, 5), "enc-self": (2, 2, 5, 5), "dec-self": (2, 2, t, t)}
    for kind, shape in shapes.items():
        got = torch.tensor(views[kind]["weights"], dtype=torch.float64)
        assert got.shape == shape
        torch.testing.assert_close(got, want[kind], atol=1e-6, rtol=0)
        torch.testing.assert_close(
            got.sum(-1), torch.ones(shape[:-1], dtype=got.dtype), atol=1e-5, rtol=0
        )
    dec = torch.tensor(views["dec-self"]["weights"])
    assert (dec.triu(1) == 0).all()  # causal: no position sees a later one


@pytest.mark.parametrize(
    ("kind", "layer", "head"), [("enc-self", 0, "1"), ("dec-self", -1, "mean"), ("cross", 1, None)]
)
def test_png_flags_select_the_tensor(tf, tmp_path, capsys, drawn, kind, layer, head) -> None:
    png = tmp_path / f"{kind}.png"
    argv = ["view", "--checkpoint", str(tf), SENTENCE, "--png", str(png), "--kind", kind]
    argv += ["--layer", str(layer)] + ([] if head is None else ["--head", head])
    assert main(argv) == 0
    hyp = hyp_of(capsys.readouterr().out)
    assert png.read_bytes()[:4] == b"\x89PNG"
    (call,) = drawn
    torch.testing.assert_close(call["weights"], maps_of(tf, hyp)[kind], atol=1e-6, rtol=0)
    heads = head if head in (None, "mean") else int(head)
    assert call["layer"] == layer and call["heads"] == heads
    queries, keys = call["args"]
    assert keys == (None if kind != "cross" else [*SENTENCE.split(), "<eos>"])
    assert queries[0] == {"enc-self": "I", "dec-self": "<bos>", "cross": hyp[0]}[kind]


def test_terminal_dec_self_is_causal(tf, capsys) -> None:
    argv = ["view", "--checkpoint", str(tf), SENTENCE, "--kind", "dec-self", "--head", "0"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(line for line in lines if line.startswith("<bos>"))
    assert first.endswith("<bos> 1.00")  # position 0 can only see itself


def test_translate_show_and_save_attention_choose_the_kind(tf, tmp_path, capsys, drawn) -> None:
    assert main(["translate", "--checkpoint", str(tf), "--show", SENTENCE]) == 0
    default = capsys.readouterr().out
    assert "<bos>" not in default and "│" in default  # today's view: the decoder's weights
    argv = ["translate", "--checkpoint", str(tf), SENTENCE, "--show", "--kind", "dec-self"]
    assert main([*argv, "--layer", "0", "--head", "1"]) == 0
    out = capsys.readouterr().out
    assert "layer 0, head 1" in out and "<bos>" in out
    png = tmp_path / "enc.png"
    argv = ["translate", "--checkpoint", str(tf), SENTENCE, "--save-attention", str(png)]
    assert main([*argv, "--kind", "enc-self", "--layer", "1"]) == 0
    hyp = capsys.readouterr().out.split()
    assert png.read_bytes()[:4] == b"\x89PNG"
    (call,) = drawn
    torch.testing.assert_close(call["weights"], maps_of(tf, hyp)["enc-self"], atol=1e-6, rtol=0)
    assert call["layer"] == 1 and call["heads"] is None  # every head of layer 1
    assert call["args"] == ([*SENTENCE.split(), "<eos>"], None)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--layer", "2"], "--layer 2: the enc-self attention of transformer has 2 layer(s)"),
        (["--layer", "-3"], "pass 0..1 (or -1, the last)"),
        (["--head", "2"], "--head 2: the enc-self attention of transformer has 2 head(s)"),
        (["--head", "x"], "--head 'x': pass a head index or 'mean'"),
        (["--gold", "0-0"], "--gold links source words to target words: it goes with --kind cross"),
    ],
)
def test_out_of_range_is_a_clear_error(tf, capsys, extra, message) -> None:
    argv = ["view", "--checkpoint", str(tf), SENTENCE, "--kind", "enc-self", *extra]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    if extra[0] != "--gold":  # translate draws no gold links
        argv = ["translate", "--checkpoint", str(tf), "--show", SENTENCE, "--kind", "enc-self"]
        assert main([*argv, *extra]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
def test_rnn_models_have_only_cross_attention(rnns, tmp_path, capsys, name) -> None:
    path = str(rnns[name])
    for kind in ("enc-self", "dec-self"):
        assert main(["view", "--checkpoint", path, SENTENCE, "--kind", kind]) == 2
        err = capsys.readouterr().err
        assert f"{name} has no {kind} attention; its kinds: cross" in err
        assert main(["translate", "--checkpoint", path, "--show", "--kind", kind, SENTENCE]) == 2
        assert f"{name} has no {kind} attention; its kinds: cross" in capsys.readouterr().err
    page = tmp_path / "rnn.html"
    argv = ["view", "--checkpoint", path, SENTENCE, "--out", str(page), "--kind", "cross"]
    assert main([*argv, "--head", "0", "--layer", "0", "--terminal"]) == 0
    data = page_json(page)
    assert data["name"] == "cross" and data["more"] == [] and data["shown"] == 0
    assert main(["view", "--checkpoint", path, SENTENCE, "--head", "1"]) == 2
    assert "has 1 head(s)" in capsys.readouterr().err


def test_kind_goes_with_a_checkpoint_and_a_display(tf, tmp_path, capsys) -> None:
    path = save_attention(tmp_path / "w.safetensors", torch.eye(3), ["a", "b", "c"])
    assert main(["view", "--weights", str(path), "--kind", "enc-self"]) == 2
    assert "--kind goes with --checkpoint" in capsys.readouterr().err
    assert main(["view", "--checkpoint", str(tf), SENTENCE, "--src-tokens", "a b"]) == 2
    assert "--src-tokens go with --weights FILE" in capsys.readouterr().err
    assert main(["translate", "--checkpoint", str(tf), "--kind", "cross", SENTENCE]) == 2
    assert "add one of them" in capsys.readouterr().err


def test_select_map_and_page_data_errors() -> None:
    assert view_command.KINDS == KINDS  # the parser's choices are the viewer's kinds
    cross = AttentionRecord(torch.full((2, 3, 4, 5), 0.2), list("abcd"), list("vwxyz"))
    maps = {"cross": cross}
    assert select_map(maps, "cross", "m", layer=-2, head=-3) is cross
    with pytest.raises(ValueError, match="m has no dec-self attention; its kinds: cross"):
        select_map(maps, "dec-self", "m")
    with pytest.raises(ValueError, match="choose one of enc-self, dec-self, cross"):
        select_map(maps, "self", "m")
    with pytest.raises(ValueError, match="has 3 head"):
        select_map(maps, "cross", "m", head=3)
    square = AttentionRecord(torch.eye(4), list("abcd"), None)
    with pytest.raises(ValueError, match="two maps share a name"):
        page_data(cross.weights, cross.tgt_tokens, cross.src_tokens, more={"cross": square})
    with pytest.raises(ValueError, match="shown='dec-self' is not one of the maps"):
        page_data(torch.eye(4), list("abcd"), more={"x": square}, shown="dec-self")
    with pytest.raises(ValueError, match="3 query tokens but the weights have 4"):
        page_data(
            torch.eye(4), list("abcd"), more={"x": AttentionRecord(torch.eye(4), list("abc"), None)}
        )


def _cells(page) -> list[float]:
    return [float(x) for x in page.eval_on_selector_all(
        "#matrix td.cell", "es => es.map(e => e.dataset.weight)")]  # fmt: skip


def test_page_switches_between_kinds_in_a_browser(page, tmp_path) -> None:
    torch.manual_seed(0)
    cross = torch.softmax(torch.randn(2, 2, 3, 4), -1)  # (L, H, T, S)
    enc = torch.softmax(torch.randn(3, 2, 4, 4), -1)  # (L_enc = 3, H, S, S)
    dec = torch.softmax(
        torch.randn(2, 2, 3, 3).masked_fill(torch.ones(3, 3).triu(1).bool(), -1e9), -1
    )
    evil = "<img src=x onerror=alert(1)>"
    src, hyp = ["I", "go", evil, "<eos>"], ["나는", "간다", "<eos>"]
    more = {"enc-self": AttentionRecord(enc, src, None),
            "dec-self": AttentionRecord(dec, ["<bos>", "나는", evil], None)}  # fmt: skip
    path = write_attention_page(tmp_path / "kinds.html", cross, hyp, src, name="cross",
                                more=more, shown="enc-self", gold=[(0, 0)])  # fmt: skip
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    assert page.evaluate("document.body.dataset.map") == "enc-self"
    assert page.is_visible("#map-box") and page.locator("#map option").count() == 3
    assert page.input_value("#layer") == "2"  # the last of the encoder's 3 layers
    assert _cells(page) == pytest.approx(enc[2, 0].flatten().tolist(), abs=1e-6)
    assert page.locator(".gold-sure").count() == 0  # gold belongs to the cross map
    page.select_option("#head", "mean")
    page.select_option("#map", "2")  # dec-self: layer 2 does not exist there -> the last
    assert page.evaluate("document.body.dataset.map") == "dec-self"
    assert page.input_value("#layer") == "1" and page.input_value("#head") == "mean"
    assert _cells(page) == pytest.approx(dec[1].mean(0).flatten().tolist(), abs=1e-6)
    assert page.locator(".tok.query .t").all_text_contents() == ["<bos>", "나는", evil]
    page.hover(".tok.query[data-i='0']")
    weights = page.eval_on_selector_all(".tok.key", "es => es.map(e => +e.dataset.weight)")
    assert weights == pytest.approx([1.0, 0.0, 0.0], abs=1e-6)  # causal: <bos> sees itself
    page.select_option("#map", "0")
    page.select_option("#layer", "0")
    page.select_option("#head", "1")
    assert page.locator(".tok.key .t").all_text_contents() == src
    assert _cells(page) == pytest.approx(cross[0, 1].flatten().tolist(), abs=1e-6)
    assert page.locator(".gold-sure[data-i='0'][data-j='0']").count() == 1
    assert page.locator("img").count() == 0 and requests == [path.resolve().as_uri()]
