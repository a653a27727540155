"""``attnkit view --hf``: tiny BERT-, GPT-2- and T5-like models and a word-level tokenizer built
offline from configs and saved with save_pretrained; the page's weights must be the model's
own ``output_attentions``, recomputed here from the in-memory model. Skipped without
transformers >= 5."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", minversion="5.0",
    reason="view --hf needs the optional extra: pip install 'attnkit[hf]' (transformers>=5)",
)  # fmt: skip
from tokenizers import Tokenizer, models, pre_tokenizers, processors  # noqa: E402
from transformers import (  # noqa: E402
    AutoModel,
    AutoModelForSeq2SeqLM,
    BertConfig,
    GPT2Config,
    PreTrainedTokenizerFast,
    T5Config,
)

from attnkit.cli import main  # noqa: E402
from attnkit.viz.hf_view import model_maps  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread_module")

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "</s>", "the", "cat", "sat", "on", "mat",
         "</script>", "<b>", "a", "dog", "ran"]  # fmt: skip
TEXT = "the cat </script> sat on <b> mat"
SPECIALS = {"bert": "[CLS] $A [SEP]", "gpt2": None, "t5": "$A </s>"}


def tokenizer(kind: str) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over WORDS; BERT's adds [CLS]/[SEP], T5's a closing </s>."""
    vocab = {w: i for i, w in enumerate(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    template = SPECIALS[kind]
    if template is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=template, special_tokens=[(w, vocab[w]) for w in ("[CLS]", "[SEP]", "</s>")]
        )
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   eos_token="</s>")  # fmt: skip


def build(kind: str) -> Any:
    """A tiny random model (2 layers, 2 heads, hidden 16) with eager attention; large initial
    weights so that its attention is far from uniform."""
    torch.manual_seed({"bert": 0, "gpt2": 1, "t5": 2}[kind])
    v = len(WORDS)
    if kind == "bert":
        cfg: Any = BertConfig(vocab_size=v, hidden_size=16, num_hidden_layers=2,
                              num_attention_heads=2, intermediate_size=32, initializer_range=1.0)
        return AutoModel.from_config(cfg, attn_implementation="eager").eval()
    if kind == "gpt2":
        cfg = GPT2Config(vocab_size=v, n_embd=16, n_layer=2, n_head=2, n_positions=12,
                         initializer_range=1.0, bos_token_id=2, eos_token_id=4)
        return AutoModel.from_config(cfg, attn_implementation="eager").eval()
    cfg = T5Config(vocab_size=v, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2,
                   initializer_factor=8.0, decoder_start_token_id=0, pad_token_id=0,
                   eos_token_id=4)  # fmt: skip
    return AutoModelForSeq2SeqLM.from_config(cfg, attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any, Any]]:
    """kind -> (folder, in-memory model, tokenizer)."""
    out = {}
    for kind in ("bert", "gpt2", "t5"):
        folder = tmp_path_factory.mktemp(kind)
        model, tok = build(kind), tokenizer(kind)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        out[kind] = (folder, model, tok)
    return out


def page_sections(page: Path) -> dict[str, dict[str, Any]]:
    html = page.read_text(encoding="utf-8")
    data = json.loads(html.split('id="attn-data">')[1].split("</script>")[0])
    return {s["name"]: s for s in data["sections"]}


def stacked(attentions: Any) -> torch.Tensor:
    return torch.stack([a[0] for a in attentions]).double()  # (L, H, Tq, Tk)


def reference(kind: str, model: Any, tok: Any, target: str | None = None) -> dict[str, Any]:
    """name -> (weights (L, H, Tq, Tk), queries, keys) straight from the model."""
    enc = tok(TEXT, return_tensors="pt")
    words = tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    with torch.no_grad():
        if kind != "t5":
            att = stacked(model(**enc, output_attentions=True).attentions)
            return {"enc-self" if kind == "bert" else "dec-self": (att, words, words)}
        if target is None:
            seq = model.generate(**enc, max_new_tokens=40, do_sample=False, num_beams=1)[0]
        else:
            seq = torch.tensor([0, *tok(target)["input_ids"]])  # decoder start, then the target
        out = model(**enc, decoder_input_ids=seq[None, :-1], output_attentions=True)
    dec, produced = (tok.convert_ids_to_tokens(s.tolist()) for s in (seq[:-1], seq[1:]))
    return {
        "enc-self": (stacked(out.encoder_attentions), words, words),
        "dec-self": (stacked(out.decoder_attentions), dec, dec),
        "cross": (stacked(out.cross_attentions), produced, words),
    }


def check_page(page: Path, expected: dict[str, Any]) -> None:
    sections = page_sections(page)
    assert list(sections) == list(expected)
    for name, (weights, queries, keys) in expected.items():
        sec = sections[name]
        assert sec["queries"] == queries and sec["keys"] == keys
        got = torch.tensor(sec["weights"], dtype=torch.float64)  # (L, H, Tq, Tk)
        assert got.shape == weights.shape and got.shape[:2] == (2, 2)
        assert torch.allclose(got, weights, atol=1e-5), name
        # a map far from uniform, and layers and heads that differ: a swapped axis would show
        assert weights.max() > 0.6
        assert not torch.allclose(weights[0], weights[1], atol=1e-2)
        assert not torch.allclose(weights[:, 0], weights[:, 1], atol=1e-2)


@pytest.mark.parametrize("kind", ["bert", "gpt2", "t5"])
def test_page_holds_the_models_own_attention(kind, saved, tmp_path, capsys) -> None:
    folder, model, tok = saved[kind]
    page = tmp_path / "page.html"
    assert main(["view", "--hf", str(folder), TEXT, "--out", str(page)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {page}" in out
    assert ("output: " in out) == (kind == "t5")
    expected = reference(kind, model, tok)
    check_page(page, expected)
    if kind == "bert":
        assert expected["enc-self"][1][0] == "[CLS]" and "</script>" in expected["enc-self"][1]
    if kind == "gpt2":  # causal: nothing above the diagonal
        weights = expected["dec-self"][0]  # (L, H, T, T)
        assert torch.equal(torch.triu(weights, 1), torch.zeros_like(weights))


def test_t5_teacher_forced_target(saved, tmp_path) -> None:
    folder, model, tok = saved["t5"]
    page = tmp_path / "page.html"
    argv = ["view", "--hf", str(folder), TEXT, "--target", "a dog ran", "--out", str(page)]
    assert main(argv) == 0
    expected = reference("t5", model, tok, target="a dog ran")
    assert expected["cross"][1] == ["a", "dog", "ran", "</s>"]  # rows: the tokens produced
    assert expected["dec-self"][1] == ["[PAD]", "a", "dog", "ran"]  # the decoder's input
    check_page(page, expected)


def test_png_grid_single_map_and_through(saved, tmp_path, capsys) -> None:
    folder, model, tok = saved["t5"]
    png, single = tmp_path / "grid.png", tmp_path / "one.html"
    assert main(["view", "--hf", str(folder), TEXT, "--png", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    argv = ["view", "--hf", str(folder), TEXT, "--kind", "enc-self", "--layer", "1",
            "--head", "0", "--out", str(single), "--terminal"]  # fmt: skip
    assert main(argv) == 0
    assert "layer 1, head 0" in capsys.readouterr().out
    html = single.read_text(encoding="utf-8")
    data = json.loads(html.split('id="attn-data">')[1].split("</script>")[0])
    assert data["name"] == "enc-self" and [m["name"] for m in data["more"]] == ["dec-self",
                                                                                  "cross"]
    weights = reference("t5", model, tok)["enc-self"][0]
    assert torch.allclose(torch.tensor(data["weights"], dtype=torch.float64), weights, atol=1e-5)
    argv = ["view", "--hf", str(folder), TEXT, "--kind", "cross", "--through", "rollout"]
    assert main(argv) == 2
    assert "cross-attention" in capsys.readouterr().err


def test_unknown_name_offline_is_one_line(monkeypatch, tmp_path, capsys) -> None:
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # read once when huggingface_hub is imported, which this process has done already
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    argv = ["view", "--hf", "no-such-org/no-such-model", "hello", "--out", str(tmp_path / "p")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnkit view: error: ")
    assert "pass a local folder saved with save_pretrained" in err[0]
    assert not (tmp_path / "p").exists()
    assert main(["view", "--hf", "./no/such/folder", "hello"]) == 2
    assert "no folder" in capsys.readouterr().err


def test_pickle_only_folder_is_refused(saved, tmp_path, capsys) -> None:
    _, model, tok = saved["gpt2"]
    folder = tmp_path / "bin-only"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    (folder / "model.safetensors").unlink()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    capsys.readouterr()  # save_pretrained's progress bars
    assert main(["view", "--hf", str(folder), TEXT, "--out", str(tmp_path / "p.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pytorch_model.bin" in err[0] and "safetensors only" in err[0]
    assert not (tmp_path / "p.html").exists()


def test_remote_code_in_the_folder_never_runs(saved, tmp_path) -> None:
    _, model, tok = saved["gpt2"]
    folder = tmp_path / "remote"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    marker = tmp_path / "ran"
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["auto_map"] = {"AutoConfig": "evil.Config", "AutoModel": "evil.Model"}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    main(["view", "--hf", str(folder), TEXT, "--out", str(tmp_path / "p.html")])
    assert not marker.exists()


def test_long_text_is_refused_or_cut(saved, capsys) -> None:
    folder, model, tok = saved["gpt2"]  # a position table of 12
    long = " ".join(["the cat sat"] * 5)  # 15 tokens
    assert main(["view", "--hf", str(folder), long, "--terminal"]) == 2
    assert "over the limit of 12" in capsys.readouterr().err
    assert main(["view", "--hf", str(folder), long, "--terminal", "--truncate"]) == 0
    assert "cut by 3 token(s)" in capsys.readouterr().err
    maps = model_maps(model, tok, long, max_input_len=4, truncate=True)
    assert maps.cut == 11 and maps.maps["dec-self"].tgt_tokens == ["the", "cat", "sat", "the"]
    with pytest.raises(ValueError, match="encoder-decoder"):
        model_maps(model, tok, "the cat", target="a dog")
