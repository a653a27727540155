"""An encoder-decoder forecaster, with or without attention over its input window.

Legend: B batch, W past values (keys), K forecast steps, H hidden width.

One recurrent cell (GRU or LSTM) reads the normalised window x_1..x_W into states
h_1..h_W, then goes on over its own forecasts (no teacher forcing, so training and
forecasting run the same way): the decoder is the encoder continued,

    s_1 = h_W,   s_{k+1} = Cell(ŷ_k, s_k)
    with attention:    α_kj = softmax_j score(s_k, h_{j−1}),  c_k = Σ_j α_kj v_j
                       ŷ_k = w_oᵀ [s_k; c_k] + b_o
    without attention: ŷ_k = w_oᵀ s_k + b_o                 (the last state carries it all)
    seasonal input:    ŷ_k = w_oᵀ [s_k; x_{W+k−m⌈k/m⌉}] + b_o  (told the value one season back)

This is Luong et al. (2015)'s global attention, over time. Key j is the state *before* x_j
(h_0 = 0), and the value v_j is x_j itself (``read="value"``, the default): a step whose
history matches the history before x_j reads x_j, so the value one season ago (the
seasonal-naive forecast), or an average of several seasons ago, is one attention away, and
the weights say exactly which past values the forecast was made of. ``read="state"`` reads
v_j = [h_j; x_j] instead: the context can then carry what the state h_j remembers of the
values before x_j, so the weight may sit a few steps away from the value it uses. The score
is any of the registry's (``dot`` by default: s_kᵀ h, a similarity of two states of one
recurrence; ``general``: s_kᵀ W_a h, ...); ``attention="none"`` is the
same model without attention. ``attention="seasonal"`` is the fair baseline of ``attnkit
experiment series``: no attention, but its output reads the seasonal-naive value of step k,
x_{W+k−m⌈k/m⌉} for the window's period m (given to ``forward``), where attention reads
c_k: a one-hot weight fixed at the seasonal lag instead of a learnt one, with the same
parameters as the ``dot`` model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_ranges
from ..core import attend
from ..registry import build_score, canonical
from .base import dropped
from .registry import MODELS, ModelEntry

CELLS = ("gru", "lstm")
READS = ("value", "state")


@dataclass
class ForecasterConfig:
    src_vocab: int = 1  # forecasts read numbers, not tokens: the sizes are unused
    tgt_vocab: int = 1
    hidden: int = 32
    cell: str = "gru"
    attention: str = "dot"  # a registry score (dot, general, additive, ...), "none", "seasonal"
    read: str = "value"  # what attention reads: the past value x_j, or "state": [h_j; x_j]
    dropout: float = 0.0  # on the encoder states and the decoder state before the output

    def __post_init__(self) -> None:
        check_ranges(self, positive=("src_vocab", "tgt_vocab", "hidden"))
        if self.read not in READS:
            raise ValueError(f"read={self.read!r}; choose one of {READS}")
        if self.cell not in CELLS:
            raise ValueError(f"cell={self.cell!r}; choose one of {CELLS}")
        if self.attention not in ("none", "seasonal"):
            canonical("score", self.attention)  # a ValueError naming the known scores
            if canonical("score", self.attention) == "location":
                raise ValueError("attention='location' scores positions, not the window; pick "
                                 "additive, general or dot")  # fmt: skip


PRESETS = {"tiny": {"hidden": 8}, "small": {}, "base": {"hidden": 64}}


def seasonal_value(past: Tensor, period: Tensor, step: int) -> Tensor:
    """The seasonal-naive value of forecast step ``step`` (1-based): x_{W+k−m⌈k/m⌉}, the last
    observed value of the same season (as ``attnkit.eval.forecast.seasonal_naive``).
    past (B, W), period (B,) integers in 1..W -> (B, 1)."""
    w = past.shape[1]
    if int(period.min()) < 1 or int(period.max()) > w:
        raise ValueError(f"periods {sorted(set(period.tolist()))} must be in 1..W (W = {w})")
    back = period * torch.div(step + period - 1, period, rounding_mode="floor")  # (B,) m⌈k/m⌉
    idx = (w - 1 + step - back).long()  # (B,)
    return past.gather(1, idx[:, None])  # (B, 1)


@dataclass
class ForecastOutput:
    """forecast (B, K), normalised as the input; weights (B, K, W), or None without attention."""

    forecast: Tensor
    weights: Tensor | None


class Forecaster(nn.Module):
    """forward(past (B, W) normalised, horizon K, period (B,) or None) -> ForecastOutput (see
    the module docstring; only ``attention="seasonal"`` needs the period)."""

    family = "forecast"

    def __init__(self, config: ForecasterConfig) -> None:
        super().__init__()
        self.config = config
        h = config.hidden
        self.rnn = (nn.GRU if config.cell == "gru" else nn.LSTM)(1, h, batch_first=True)
        attends = config.attention not in ("none", "seasonal")
        self.score = build_score(config.attention, h, h) if attends else None
        read = 1 if config.read == "value" else h + 1  # the width of c_k
        extra = read if attends else 1 if config.attention == "seasonal" else 0
        self.out = nn.Linear(h + extra, 1)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, past: Tensor, horizon: int, period: Tensor | None = None) -> ForecastOutput:
        seasonal = self.config.attention == "seasonal"
        if seasonal and period is None:
            raise ValueError("attention='seasonal' reads the value one season back: pass "
                             "period (B,), each window's seasonal period")  # fmt: skip
        x = past.unsqueeze(-1)  # (B, W, 1)
        states, state = self.rnn(x)  # (B, W, H); GRU (1, B, H) | LSTM ((1, B, H), (1, B, H))
        states = dropped(self.drop, states)
        keys = F.pad(states[:, :-1], (0, 0, 1, 0))  # (B, W, H): h_0 = 0, h_1 .. h_{W-1}
        both = torch.cat([states, x], dim=-1)  # (B, W, H + 1)
        values = x if self.config.read == "value" else both  # (B, W, 1 | H + 1)
        preds: list[Tensor] = []
        weights: list[Tensor] = []
        for k in range(horizon):
            if k:
                _, state = self.rnn(preds[-1][:, None], state)  # reads ŷ_k
            s = dropped(self.drop, (state if isinstance(state, Tensor) else state[0])[0])  # (B, H)
            if seasonal:
                assert period is not None
                lag = seasonal_value(past, period, k + 1)  # (B, 1)
                preds.append(self.out(torch.cat([s, lag], dim=-1)))  # (B, 1)
                continue
            if self.score is None:
                preds.append(self.out(s))  # (B, 1)
                continue
            r = attend(s[:, None], keys, values, score=self.score, check_finite=False)
            assert r.weights is not None
            weights.append(r.weights[:, 0])  # (B, W)
            preds.append(self.out(torch.cat([s, r.context[:, 0]], dim=-1)))  # (B, 1)
        forecast = torch.cat(preds, dim=-1)  # (B, K)
        return ForecastOutput(forecast, torch.stack(weights, dim=1) if weights else None)


MODELS.register(ModelEntry("forecaster", Forecaster, ForecasterConfig, PRESETS))

__all__ = [
    "CELLS",
    "PRESETS",
    "READS",
    "ForecastOutput",
    "Forecaster",
    "ForecasterConfig",
    "seasonal_value",
]
