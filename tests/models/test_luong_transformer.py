"""Luong 2015 (every score x alignment) and the Transformer: shapes, masks, windows, and the
Transformer's stepwise decoding equal to its parallel forward."""

import pytest
import torch
from _seq2seq import random_sources

from attnkit.models import build_model
from attnkit.models.luong import LuongConfig
from attnkit.models.transformer import TransformerConfig, sinusoids
from attnkit.modules import CrossAttention, SelfAttention

pytestmark = pytest.mark.usefixtures("one_thread_module")


def inputs() -> tuple[torch.Tensor, ...]:
    return random_sources([9, 5, 2], tgt_len=6)


@pytest.mark.parametrize("score", ["dot", "general", "concat", "location"])
@pytest.mark.parametrize("align", ["global", "local-m", "local-p"])
def test_luong_every_score_and_alignment(score: str, align: str) -> None:
    cell = "gru" if score == "general" else "lstm"
    model = build_model(
        "luong",
        src_vocab=20,
        tgt_vocab=15,
        preset="tiny",
        cell=cell,
        score=score,
        align=align,
        window=2,
    )
    src, src_len, tgt = inputs()
    out = model(src, src_len, tgt)
    assert out.logits.shape == (3, 6, 15) and out.weights is not None
    w = out.weights  # (B, T, S)
    assert (w[1, :, 5:] == 0).all() and (w[2, :, 2:] == 0).all()  # padding never attended
    if align == "global":
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 6))
    if align == "local-m":  # step t attends |s - t| <= D only
        s = torch.arange(9)
        for t in range(6):
            assert (w[0, t, (s - t).abs() > 2] == 0).all()
    out.logits.sum().backward()


def test_luong_config_errors() -> None:
    with pytest.raises(ValueError, match="score"):
        LuongConfig(src_vocab=5, tgt_vocab=5, score="cosine-ish")
    with pytest.raises(ValueError, match="align"):
        LuongConfig(src_vocab=5, tgt_vocab=5, align="sliding")
    with pytest.raises(ValueError, match="cell"):
        LuongConfig(src_vocab=5, tgt_vocab=5, cell="rnn")


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_transformer_stepwise_equals_parallel(norm: str) -> None:
    model = build_model("transformer", src_vocab=20, tgt_vocab=15, preset="tiny", norm=norm).eval()
    assert any(isinstance(m, CrossAttention) for m in model.modules())
    assert any(isinstance(m, SelfAttention) for m in model.modules())
    src, src_len, tgt = inputs()
    out = model(src, src_len, tgt)
    assert out.weights is not None and out.weights.shape == (3, 6, 9)
    assert (out.weights[1, :, 5:] == 0).all()
    memory = model.encode(src, src_len)
    state = model.init_state(memory)
    for t in range(6):
        logits, w, state = model.step(tgt[:, t], state, memory)
        torch.testing.assert_close(logits, out.logits[:, t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(w, out.weights[:, t], atol=1e-5, rtol=1e-5)


def test_future_target_tokens_do_not_leak() -> None:
    model = build_model("transformer", src_vocab=20, tgt_vocab=15, preset="tiny").eval()
    src, src_len, tgt = inputs()
    other = tgt.clone()
    other[:, 3:] = 4
    a, b = model(src, src_len, tgt).logits, model(src, src_len, other).logits
    torch.testing.assert_close(a[:, :3], b[:, :3])


def test_sinusoidal_positions_match_the_formula() -> None:
    pe = sinusoids(50, 8).double()
    pos, i = 37, 2
    assert abs(pe[pos, 2 * i] - torch.sin(torch.tensor(pos / 10000 ** (2 * i / 8)))) < 1e-5
    assert abs(pe[pos, 2 * i + 1] - torch.cos(torch.tensor(pos / 10000 ** (2 * i / 8)))) < 1e-5


def test_transformer_config_errors() -> None:
    with pytest.raises(ValueError, match="does not divide"):
        TransformerConfig(src_vocab=5, tgt_vocab=5, dim=30, heads=4)
