"""attnkit.hf on models that soft-cap their scores (Gemma 2) or give each head a sink logit
(gpt-oss), and on Qwen2's grouped heads: tiny random configs built offline, attnkit's logits
equal to eager's. Skipped when transformers >= 5 is not installed."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", minversion="5.0",
    reason="attnkit.hf needs the optional extra: pip install 'attnkit[hf]' (transformers>=5)",
)  # fmt: skip
from transformers import AutoModelForCausalLM  # noqa: E402

import attnkit.hf  # noqa: E402
from attnkit.interop.hf_attention import hf_attend  # noqa: E402
from tests._hf_inputs import left_padded_batch, logits  # noqa: E402
from tests._reference import sdpa_ref  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread_module")
V, T = 100, 12
SMALL = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=8, initializer_range=0.5,
             pad_token_id=0, bos_token_id=1, eos_token_id=2, sliding_window=4)  # fmt: skip
KINDS = ["sliding_attention", "full_attention"]


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    attnkit.hf.register()
    yield


def gemma2(cap: float | None = 2.0) -> Any:  # a small cap, so that capping changes the logits
    return transformers.Gemma2Config(attn_logit_softcapping=cap, final_logit_softcapping=None,
                                     layer_types=KINDS, query_pre_attn_scalar=8, **SMALL)


def gpt_oss() -> Any:
    return transformers.GptOssConfig(num_local_experts=2, num_experts_per_tok=1,
                                     layer_types=KINDS, **SMALL)  # fmt: skip


def qwen2() -> Any:
    return transformers.Qwen2Config(use_sliding_window=True, max_window_layers=1,
                                    **{k: v for k, v in SMALL.items() if k != "head_dim"})


CONFIGS = {"gemma2": gemma2, "gpt-oss": gpt_oss, "qwen2": qwen2}


def pair(config: Any, impl: str) -> tuple[Any, Any]:
    torch.manual_seed(0)
    eager = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="eager")
    ours = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation=impl)
    ours.load_state_dict(eager.state_dict())
    return eager.eval(), ours.eval()


@pytest.mark.parametrize("impl", ["attnkit", "attnkit_sliding"])
@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_logits_equal_eager(family: str, impl: str) -> None:
    eager, ours = pair(CONFIGS[family](), impl)
    ids, am = left_padded_batch(V, T)
    for mask in (None, am):
        real = torch.ones(2, T, dtype=torch.bool) if mask is None else mask.bool()
        a, b = logits(eager, ids, mask), logits(ours, ids, mask)
        torch.testing.assert_close(b[real], a[real], atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        gen = dict(max_new_tokens=5, do_sample=False, pad_token_id=0)
        assert torch.equal(ours.generate(ids, attention_mask=am, **gen),
                           eager.generate(ids, attention_mask=am, **gen))  # fmt: skip


def test_the_cap_and_the_sinks_change_the_logits() -> None:
    """The comparisons above could not pass with the cap or the sinks ignored."""
    ids, _ = left_padded_batch(V, T)
    capped, _ = pair(gemma2(2.0), "attnkit")
    uncapped, _ = pair(gemma2(None), "attnkit")
    assert (logits(capped, ids, None) - logits(uncapped, ids, None)).abs().max() > 1e-2
    eager, _ = pair(gpt_oss(), "eager")
    before = logits(eager, ids, None)
    with torch.no_grad():
        for layer in eager.model.layers:
            layer.self_attn.sinks.fill_(-1e4)  # exp(-1e4) = 0: no sink
    assert (logits(eager, ids, None) - before).abs().max() > 1e-2


def test_hf_attend_with_sinks_and_a_cap_equals_the_float64_formula() -> None:
    """a_ij = exp(e_ij) / (exp(s_h) + Σ_k exp(e_ik)), e = cap·tanh(s·qkᵀ / cap): as a softmax
    over the keys and one extra key of score s_h and value 0 (written here with sdpa_ref)."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 5, 3, generator=g, dtype=torch.float64) * 3
    k = torch.randn(2, 2, 5, 3, generator=g, dtype=torch.float64) * 3
    v = torch.randn(2, 2, 5, 3, generator=g, dtype=torch.float64)
    sinks = torch.randn(4, generator=g, dtype=torch.float64)
    cap, scaling = 1.5, 0.7
    out, w = hf_attend(q, k, v, None, scaling=scaling, softcap=cap, sinks=sinks,
                       need_weights=True)  # fmt: skip
    pick = torch.tensor([0, 0, 1, 1])
    kr, vr = k[:, pick], v[:, pick]  # (B, H, Tk, D)
    e = cap * torch.tanh(scaling * (q @ kr.transpose(-2, -1)) / cap)  # (B, H, Tq, Tk)
    e = torch.cat([e, sinks[:, None, None].expand(2, 4, 5, 1)], dim=-1)  # the sink key
    allowed = torch.ones(5, 6, dtype=torch.bool).tril().logical_or(
        torch.arange(6) == 5)  # causal over the keys, the sink always
    # sdpa_ref scales by 1/√D: hand it e·√D as q·kᵀ with an identity key basis
    eye = torch.eye(6, dtype=torch.float64).expand(2, 4, 6, 6)
    ctx, ref_w = sdpa_ref(e * 6**0.5, eye, torch.cat([vr, torch.zeros(2, 4, 1, 3,
                          dtype=torch.float64)], dim=2), allowed)  # fmt: skip
    torch.testing.assert_close(out.transpose(1, 2), ctx, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(w, ref_w[..., :5], rtol=1e-10, atol=1e-12)


def test_sinks_with_sparsemax_are_refused() -> None:
    fn = attnkit.hf.attention_function(attnkit.hf.VARIANTS["attnkit_sparsemax"][0])
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match="attn_implementation='attnkit'"):
        fn(torch.nn.Module(), q, q, q, None, s_aux=torch.zeros(2))
