"""Transformer ``position``: the sinusoidal default is unchanged; each position stage of
attnkit.stages.position reaches every self-attention module (never the cross-attention), the
embeddings then carry no PE, step-by-step decoding equals the teacher-forced pass, a tiny
model trains with each, checkpoints round-trip, and ``--position`` works from the CLI."""

import pytest
import torch

from attnkit.data.batching import batches
from attnkit.data.tasks import load_task
from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.models.transformer import TransformerConfig
from attnkit.train import checkpoint
from attnkit.train.loop import TrainConfig, train, valid_loss

pytestmark = pytest.mark.usefixtures("one_thread_module")

NAMES = ("learned", "shaw", "t5", "alibi", "rope", "xl")


def model(position: str, **kw):
    torch.manual_seed(0)
    kw = {"src_vocab": 11, "tgt_vocab": 13, "preset": "tiny", "heads": 2, **kw}
    return build_model("transformer", position=position, **kw).eval()


def test_default_is_sinusoidal_and_adds_pe() -> None:
    assert TransformerConfig(5, 5).position == "sinusoidal"
    m = model("sinusoidal")
    assert all(layer.attn.position is None for layer in m.enc)
    assert all(layer.self_attn.position is None for layer in m.dec)
    with torch.no_grad():  # E·√d + PE: positions differ for equal tokens
        x = m.embed(m.tgt_emb, torch.tensor([[3, 3]]))
    assert not torch.equal(x[0, 0], x[0, 1])


@pytest.mark.parametrize("name", NAMES)
def test_stage_in_every_self_attention_and_step_equals_forward(name) -> None:
    m = model(name, dec_layers=2)
    for layer in m.enc:
        assert layer.attn.position is not None and layer.attn.position.name == name
    for layer in m.dec:
        assert layer.self_attn.position is not None and layer.cross_attn.position is None
    with torch.no_grad():
        x = m.embed(m.tgt_emb, torch.tensor([[3, 3]]))  # no PE: equal tokens, equal rows
        assert torch.equal(x[0, 0], x[0, 1])
        g = torch.Generator().manual_seed(1)
        src = torch.randint(3, 11, (3, 6), generator=g)
        src_len = torch.tensor([6, 4, 2])
        src[torch.arange(6)[None, :] >= src_len[:, None]] = 0
        tgt = torch.randint(3, 13, (3, 5), generator=g)
        out = m(src, src_len, tgt)
        memory = m.encode(src, src_len)
        state = m.init_state(memory)
        for t in range(tgt.shape[1]):
            logits, w, state = m.step(tgt[:, t], state, memory)
            torch.testing.assert_close(logits, out.logits[:, t], rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(w, out.weights[:, t], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_tiny_model_trains_with_each_position(name, tmp_path) -> None:
    """Two epochs on toy-ko lower the validation loss by a fifth; the checkpoint reloads to
    the same logits."""
    sp = load_task("toy-ko", seed=0, train_size=160, valid_size=24, test_size=0)
    sv, tv = Vocab.build(e.src for e in sp.train), Vocab.build(e.tgt for e in sp.train)
    torch.manual_seed(0)
    m = build_model("transformer", src_vocab=len(sv), tgt_vocab=len(tv), preset="tiny",
                    position=name)  # fmt: skip
    before = valid_loss(m, batches(sp.valid, sv, tv, 16))
    cfg = TrainConfig(epochs=2, batch_size=16, lr=3e-3, progress=False, patience=0)
    result = train(m, "transformer", sp.train, sp.valid, sv, tv, cfg, tmp_path, log=lambda s: None)
    after = result.history[-1]["valid_loss"]
    assert after < 0.8 * before, (before, after)
    loaded = checkpoint.load(tmp_path / "last")
    assert loaded.model.config.position == name
    src, src_len, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4]), torch.tensor([[1, 5]])
    m.eval()
    with torch.no_grad():
        expect = m(src, src_len, tgt).logits
        torch.testing.assert_close(loaded.model(src, src_len, tgt).logits, expect)


def test_bad_position_fails_clearly() -> None:
    with pytest.raises(ValueError, match=r"position='sinus'.*'sinusoidal'.*alibi.*xl"):
        TransformerConfig(5, 5, position="sinus")
    with pytest.raises(ValueError, match="odd"):
        TransformerConfig(5, 5, dim=6, heads=2, position="rope")
    assert TransformerConfig(5, 5, position="rotary").position == "rope"  # an alias


def test_cli_position_flag(tmp_path, capsys) -> None:
    from attnkit.cli import main

    out = str(tmp_path / "run")
    args = ["train", "--task", "toy-ko", "--model", "transformer", "--preset", "tiny"]
    args += ["--epochs", "1", "--train-size", "32", "--valid-size", "8", "--test-size", "8"]
    args += ["--no-progress", "--position", "alibi", "--out", out]
    assert main(args) == 0
    assert '"position": "alibi"' in (tmp_path / "run" / "best" / "config.json").read_text()
    capsys.readouterr()
    assert main(["translate", "--checkpoint", out, "--beam", "2", "I am a student"]) == 0
    assert capsys.readouterr().out.strip()
    bad = [a if a != "alibi" else "nope" for a in args[:-1]] + [str(tmp_path / "bad")]
    assert main(bad) != 0
    assert "choose 'sinusoidal'" in capsys.readouterr().err
