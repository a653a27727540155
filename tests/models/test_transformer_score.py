"""TransformerConfig.score: "scaled_dot" (default, qᵀk/√d_k) or "dot" (qᵀk) in every attention
module; the unscaled model equals the scaled one with its query projections multiplied by √d_k
(an independent way to get qᵀk from the scaled path)."""

import math

import pytest
import torch

from attnkit.models import build_model, parse_options
from attnkit.models.transformer import TransformerConfig
from attnkit.stages.scores import DotScore, ScaledDotScore

V = 17


def _model(score: str, heads: int = 2):
    torch.manual_seed(0)
    kw = {"src_vocab": V, "tgt_vocab": V, "preset": "tiny", "heads": heads}
    return build_model("transformer", score=score, **kw).eval()


def test_default_is_scaled_and_dot_reaches_every_attention_module() -> None:
    assert TransformerConfig(5, 5).score == "scaled_dot"
    for name, cls in (("scaled_dot", ScaledDotScore), ("dot", DotScore)):
        m = _model(name)
        attn = [mod for mod in m.modules() if hasattr(mod, "q_proj")]
        assert len(attn) == 3  # encoder self, decoder self, decoder cross (1 layer each)
        assert all(type(a.score) is cls for a in attn)
    assert parse_options("transformer", ["score=dot"]) == {"score": "dot"}


def test_dot_equals_scaled_with_queries_times_sqrt_dk() -> None:
    dot, scaled = _model("dot"), _model("scaled_dot")
    d_k = scaled.config.dim // scaled.config.heads
    with torch.no_grad():
        for mod in scaled.modules():
            if hasattr(mod, "q_proj"):
                mod.q_proj.weight.mul_(math.sqrt(d_k))
                mod.q_proj.bias.mul_(math.sqrt(d_k))
        g = torch.Generator().manual_seed(1)
        src = torch.randint(3, V, (2, 6), generator=g)  # (B, S)
        tgt = torch.randint(3, V, (2, 5), generator=g)  # (B, T)
        lens = torch.tensor([6, 4])
        a, b = dot(src, lens, tgt), scaled(src, lens, tgt)
    torch.testing.assert_close(a.logits, b.logits, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(a.logits, _model("scaled_dot")(src, lens, tgt).logits, atol=1e-3)


def test_bad_score_fails_clearly() -> None:
    with pytest.raises(ValueError, match="score='additive'; choose one of"):
        TransformerConfig(5, 5, score="additive")
