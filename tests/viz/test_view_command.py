"""``attnkit view`` on a user-supplied safetensors file, and the file format round trip."""

import json

import pytest
import torch

from attnkit.cli import main
from attnkit.viz.weights_file import load_attention, save_attention

TGT, SRC = ["나는", "학교에", "간다", "."], ["I", "go", "to", "school", "."]


@pytest.fixture
def weights_file(tmp_path):
    torch.manual_seed(0)
    w = torch.softmax(torch.randn(2, 3, 4, 5), -1)  # (L, H, Tq, Tk)
    return save_attention(tmp_path / "attn.safetensors", w, TGT, SRC), w


def test_round_trip(weights_file) -> None:
    path, w = weights_file
    rec = load_attention(path)
    assert torch.equal(rec.weights, w)
    assert rec.tgt_tokens == TGT and rec.src_tokens == SRC
    with pytest.raises(ValueError, match="pass --name"):
        load_attention(path, name="attn")


def test_view_writes_page_png_and_prints(weights_file, tmp_path, capsys) -> None:
    path, w = weights_file
    page, png = tmp_path / "attn.html", tmp_path / "attn.png"
    argv = ["view", "--weights", str(path), "--out", str(page), "--png", str(png)]
    assert main([*argv, "--head", "1", "--layer", "0", "--gold", "0-0 3-1", "--terminal"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {page}" in out and "layer 0, head 1" in out and "학교에" in out
    html = page.read_text(encoding="utf-8")
    data = json.loads(html.split('id="attn-data">')[1].split("</script>")[0])
    assert data["queries"] == TGT and data["keys"] == SRC and data["kind"] == "cross"
    assert torch.allclose(torch.tensor(data["weights"], dtype=torch.float64), w.double(), atol=1e-6)
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_tokens_from_flags_and_json_override_metadata(tmp_path, capsys) -> None:
    path = save_attention(tmp_path / "self.safetensors", torch.eye(3))  # no tokens inside
    assert main(["view", "--weights", str(path)]) == 2
    assert "no target tokens" in capsys.readouterr().err
    assert main(["view", "--weights", str(path), "--tgt-tokens", "a b c"]) == 0
    assert "a" in capsys.readouterr().out
    spec = tmp_path / "tokens.json"
    spec.write_text(json.dumps({"tgt": ["x", "y", "z"]}))
    assert main(["view", "--weights", str(path), "--tokens", str(spec)]) == 0
    assert "│██    │ x 1.00" in capsys.readouterr().out
    assert main(["view", "--weights", str(tmp_path / "missing.safetensors")]) == 2
    assert main(["view", "--weights", str(path), "--tgt-tokens", "a b"]) == 2
    assert "2 query tokens but the weights have 3 queries" in capsys.readouterr().err


def test_view_checkpoint_prints_a_char_task_without_spaces(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The dates task is tokenised by characters: its translation is printed joined with ""
    (the tokeniser comes from the task, as in ``translate``; the checkpoint's meta names the
    task, not a "tokenise" key)."""
    from attnkit.data.tasks import load_task
    from attnkit.data.vocab import Vocab
    from attnkit.models import build_model
    from attnkit.train import checkpoint
    from attnkit.viz.from_checkpoint import sentence_attention

    splits = load_task("dates", seed=0, train_size=30, valid_size=2, test_size=2)
    sv = Vocab.build(e.src for e in splits.train)
    tv = Vocab.build(e.tgt for e in splits.train)
    torch.manual_seed(0)
    model = build_model("rnnsearch", preset="tiny", src_vocab=len(sv), tgt_vocab=len(tv))
    meta = {"task": "dates", "task_seed": 0}
    checkpoint.save(tmp_path / "ck", model, "rnnsearch", sv, tv, meta=meta)
    sentence = "".join(splits.test[0].src)
    hyp, _ = sentence_attention(checkpoint.load(tmp_path / "ck"), list(sentence))
    assert len(hyp) > 1
    assert main(["view", "--checkpoint", str(tmp_path / "ck"), sentence, "--terminal"]) == 0
    assert f"translation: {''.join(hyp)}\n" in capsys.readouterr().out


def test_self_attention_saved_with_its_tokens_twice_is_shown_as_self_attention(
    tmp_path, capsys
) -> None:
    """A Hugging Face model's output_attentions saved as save_attention(path, w, tokens, tokens)
    (examples/hf_sparsemax.py did so): the page labels it self-attention, one token list, not
    "cross-attention (target → source)" with the tokens repeated as source and target."""
    from safetensors.torch import save_file

    torch.manual_seed(0)
    w = torch.softmax(torch.randn(2, 2, 3, 3), -1)  # (L, H, T, T)
    tokens = ["s3", "|", "s3"]
    new = save_attention(tmp_path / "hf.safetensors", w, tokens, tokens)
    old = tmp_path / "old.safetensors"  # written before files had a "kind"
    save_file({"weights": w}, str(old), metadata={"tgt_tokens": json.dumps(tokens),
                                                  "src_tokens": json.dumps(tokens)})  # fmt: skip
    for path in (new, old):
        rec = load_attention(path)
        assert rec.tgt_tokens == tokens and rec.src_tokens is None
        page = tmp_path / f"{path.stem}.html"
        assert main(["view", "--weights", str(path), "--out", str(page)]) == 0
        html = page.read_text(encoding="utf-8")
        data = json.loads(html.split('id="attn-data">')[1].split("</script>")[0])
        assert data["kind"] == "self" and data["label"] == "self"
        assert data["queries"] == tokens and data["keys"] == tokens
    capsys.readouterr()
    # a cross-attention whose two lists are the same says so; contradictions are errors
    cross = save_attention(tmp_path / "c.safetensors", w, tokens, tokens, kind="cross")
    assert load_attention(cross).src_tokens == tokens
    assert load_attention(save_attention(tmp_path / "s.safetensors", w, tokens)).src_tokens is None
    with pytest.raises(ValueError, match="pass kind='cross'"):
        save_attention(tmp_path / "x.safetensors", w, tokens, ["a", "b", "c"], kind="self")
    with pytest.raises(ValueError, match="pass one of self, cross"):
        save_attention(tmp_path / "x.safetensors", w, tokens, kind="enc-self")
    with pytest.raises(ValueError, match="kind='cross' needs src_tokens"):
        save_attention(tmp_path / "x.safetensors", w, tokens, kind="cross")
    bad = tmp_path / "bad.safetensors"
    save_file({"weights": w}, str(bad), metadata={"kind": "self", "tgt_tokens": '["a","b","c"]',
                                                  "src_tokens": '["x","y","z"]'})  # fmt: skip
    with pytest.raises(ValueError, match="bad.safetensors: metadata kind='self'"):
        load_attention(bad)
