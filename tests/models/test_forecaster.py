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
    assert MODELS["forecaster"].model.family == "forecast"
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


def test_seasonal_value_is_the_seasonal_naive_forecast():
    """seasonal_value against attnkit.eval.forecast.seasonal_naive's numpy indexing, for
    periods shorter and longer than the horizon."""
    import numpy as np

    from attnkit.eval.forecast import seasonal_naive
    from attnkit.models.forecaster import seasonal_value

    past = torch.randn(4, 10, dtype=torch.float64)  # (B, W)
    period = torch.tensor([1, 3, 7, 10])
    got = torch.cat([seasonal_value(past, period, k) for k in range(1, 13)], dim=1)  # (B, K)
    want = seasonal_naive(past.numpy(), period.numpy(), 12)
    assert np.array_equal(got.numpy(), want)
    assert got[1, 0] == past[1, 7] and got[1, 3] == past[1, 7]  # m = 3: x_{W-3}, again at k=4
    with pytest.raises(ValueError, match="must be in 1..W"):
        seasonal_value(past, torch.tensor([1, 3, 7, 11]), 1)


def test_the_seasonal_baseline_reads_the_value_one_season_back_without_attention():
    """ŷ_k = w_oᵀ [s_k; x_{W+k−m⌈k/m⌉}] + b_o, written out by hand in float64 over two steps
    (the second step's state reads ŷ_1); the same parameter count as the dot model; a
    float64 gradcheck; and a clear error without the period."""
    torch.manual_seed(2)
    model = build_model("forecaster", preset="tiny", src_vocab=1, tgt_vocab=1,
                        attention="seasonal").double()  # fmt: skip
    dot = build_model("forecaster", preset="tiny", src_vocab=1, tgt_vocab=1)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in dot.parameters())
    past = torch.randn(2, 8, dtype=torch.float64)  # (B, W)
    period = torch.tensor([3, 5])
    out = model(past, 2, period)
    assert out.weights is None
    with torch.no_grad():
        _, h = model.rnn(past[..., None])  # (1, B, H)
        w, b = model.out.weight[0], model.out.bias[0]
        y1 = [float(w @ torch.cat([h[0, i], past[i, 8 - int(period[i])][None]]) + b)
              for i in range(2)]  # fmt: skip
        _, h2 = model.rnn(torch.tensor(y1, dtype=torch.float64)[:, None, None], h)
        y2 = [float(w @ torch.cat([h2[0, i], past[i, 9 - int(period[i])][None]]) + b)
              for i in range(2)]  # fmt: skip
    torch.testing.assert_close(out.forecast.detach(),
                               torch.tensor([y1, y2], dtype=torch.float64).T)  # fmt: skip
    x = past.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p: model(p, 4, period).forecast, (x,))
    with pytest.raises(ValueError, match="pass period"):
        model(past, 2)
