"""The forecaster: shapes, attention weights over the window, the no-attention baseline, and
an attention step that equals the equation written out by hand."""

import pytest
import torch

from attnkit.models import MODELS, build_model
from attnkit.models.forecaster import ForecasterConfig


def test_forecasts_and_weights_have_the_right_shapes_and_weights_sum_to_one():
    torch.manual_seed(0)
    for cell in ("gru", "lstm"):
        model = build_model("forecaster", preset="tiny", src_vocab=1, tgt_vocab=1, cell=cell)
        out = model(torch.randn(5, 20), 7)
        assert out.forecast.shape == (5, 7)
        assert out.weights is not None and out.weights.shape == (5, 7, 20)
        assert torch.allclose(out.weights.sum(-1), torch.ones(5, 7))
    plain = build_model("forecaster", preset="tiny", src_vocab=1, tgt_vocab=1, attention="none")
    out = plain(torch.randn(5, 20), 7)
    assert out.forecast.shape == (5, 7) and out.weights is None


@pytest.mark.parametrize("read", ["value", "state"])
def test_the_first_step_is_luong_general_attention_over_states_before_each_value(read):
    torch.manual_seed(1)
    model = build_model(
        "forecaster", preset="tiny", src_vocab=1, tgt_vocab=1, read=read, attention="general"
    )
    past = torch.randn(2, 6)  # (B, W)
    out = model(past, 1)
    states, _ = model.rnn(past[..., None])  # (B, W, H)
    keys = torch.cat([torch.zeros_like(states[:, :1]), states[:, :-1]], dim=1)  # h_0 .. h_{W-1}
    s = states[:, -1]  # s_1 = h_W
    e = torch.einsum("bh,hk,bwk->bw", s, model.score.weight, keys)  # s_1ᵀ W_a h_{j-1}
    a = e.softmax(-1)  # (B, W)
    v = past[..., None] if read == "value" else torch.cat([states, past[..., None]], dim=-1)
    c = torch.einsum("bw,bwd->bd", a, v)  # Σ_j α_j v_j
    y = model.out(torch.cat([s, c], dim=-1))[:, 0]
    assert torch.allclose(out.weights[:, 0], a, atol=1e-6)
    assert torch.allclose(out.forecast[:, 0], y, atol=1e-6)


def test_bad_configs_say_what_to_do():
    assert MODELS["forecaster"][0].family == "forecast"
    with pytest.raises(ValueError, match="cell='rnn'"):
        ForecasterConfig(cell="rnn")
    with pytest.raises(ValueError, match="hidden=0"):
        ForecasterConfig(hidden=0)
    with pytest.raises(ValueError, match="unknown score|bogus"):
        ForecasterConfig(attention="bogus")
    with pytest.raises(ValueError, match="read='x'"):
        ForecasterConfig(read="x")
    with pytest.raises(ValueError, match="location"):
        ForecasterConfig(attention="location")
