"""Transformer ``position``: the sinusoidal default is unchanged; each position stage of
attnkit.stages.position reaches every self-attention module (never the cross-attention), the
embeddings then carry no PE, step-by-step decoding equals the teacher-forced pass, a tiny
model trains with each, checkpoints round-trip, and ``--position`` works from the CLI."""

import pytest
import torch
from _seq2seq import reloads_to_the_same_logits, steps_equal_forward, train_toy_ko

from attnkit.models import build_model
from attnkit.models.transformer import TransformerConfig

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
    steps_equal_forward(m, src, src_len, tgt, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_tiny_model_trains_with_each_position(name, tmp_path) -> None:
    """Two epochs on toy-ko lower the validation loss by a fifth; the checkpoint reloads to
    the same logits."""
    run = train_toy_ko("transformer", tmp_path, epochs=2, lr=3e-3, train_size=160,
                       valid_size=24, position=name)  # fmt: skip
    after = run.result.history[-1]["valid_loss"]
    assert after < 0.8 * run.before, (run.before, after)
    assert reloads_to_the_same_logits(run, tmp_path).model.config.position == name


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
