"""attnkit.hf on models whose config scales RoPE (``rope_scaling``: linear, YaRN, dynamic NTK):
HF rotates q and k itself (the model's rotary embedding, with YaRN's attention factor folded
into cos and sin) before it calls the attention function, so attnkit receives rotated q/k
and must give eager's logits. Tiny random Llama and Qwen2 configs built offline, their
trained length (8) shorter than the input (12), so that every scaling changes the logits.
Skipped when transformers >= 5 is not installed."""

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
from tests._hf_inputs import left_padded_batch, logits  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread_module")
V, T, TRAINED = 100, 12, 8  # vocab, input length, max_position_embeddings (< T)
SMALL = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, initializer_range=0.5,
             max_position_embeddings=TRAINED, pad_token_id=0, bos_token_id=1,
             eos_token_id=2)  # fmt: skip
SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": TRAINED},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
}
"""transformers' spelling of ``rope_scaling`` (Chen et al. 2023 position interpolation; Peng
et al. 2023 YaRN; dynamic NTK-aware scaling)."""


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    attnkit.hf.register()
    yield


def config(family: str, scaling: str | None) -> Any:
    kw: dict[str, Any] = dict(SMALL)
    if scaling is not None:
        kw["rope_scaling"] = copy.deepcopy(SCALINGS[scaling])
    return (transformers.LlamaConfig if family == "llama" else transformers.Qwen2Config)(**kw)


def pair(family: str, scaling: str | None) -> tuple[Any, Any]:
    """eager and attnkit models with the same weights, in eval mode."""
    torch.manual_seed(0)
    eager = AutoModelForCausalLM.from_config(config(family, scaling),
                                             attn_implementation="eager").eval()  # fmt: skip
    ours = AutoModelForCausalLM.from_config(config(family, scaling),
                                            attn_implementation="attnkit").eval()  # fmt: skip
    ours.load_state_dict(eager.state_dict())
    return eager, ours


@pytest.mark.parametrize("family, scaling", [("llama", "linear"), ("llama", "yarn"),
                                             ("llama", "dynamic"), ("qwen2", "linear"),
                                             ("qwen2", "yarn")])  # fmt: skip
def test_attnkit_gives_eager_logits_under_rope_scaling(family: str, scaling: str) -> None:
    eager, ours = pair(family, scaling)
    assert ours.config._attn_implementation == "attnkit"
    assert eager.model.rotary_emb.rope_type == scaling  # the config's scaling took effect
    ids, am = left_padded_batch(V, T)
    for mask in (None, am):
        real = torch.ones(2, T, dtype=torch.bool) if mask is None else mask.bool()
        want, got = logits(eager, ids, mask), logits(ours, ids, mask)
        torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)
    # the scaling changes the logits, so equal logits above are not the unscaled model's
    plain, _ = pair(family, None)
    assert (logits(plain, ids, None) - logits(eager, ids, None)).abs().max() > 1e-3


def test_yarn_attention_factor_reaches_attnkit_through_q_and_k() -> None:
    """YaRN multiplies cos and sin by its attention factor 0.1·ln(s) + 1 (Peng et al. 2023,
    eq. 22 as transformers writes it), so qᵀk grows by its square: attnkit sees it because it
    is handed the rotated q and k, not positions."""
    eager, ours = pair("llama", "yarn")
    factor = eager.model.rotary_emb.attention_scaling
    assert factor == pytest.approx(0.1 * torch.log(torch.tensor(4.0)).item() + 1.0)
    seen: list[torch.Tensor] = []
    real = attnkit.hf.hf_attend

    def spy(query: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        seen.append(query)
        return real(query, *args, **kwargs)

    ids, _ = left_padded_batch(V, T)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(attnkit.hf, "hf_attend", spy)
        logits(ours, ids, None)
    layer = ours.model.layers[0].self_attn
    with torch.no_grad():
        x = ours.model.layers[0].input_layernorm(ours.model.embed_tokens(ids))  # (B, T, D)
        q = layer.q_proj(x).view(2, T, -1, layer.head_dim).transpose(1, 2)  # (B, H, T, Dh)
    # the norm of a rotated vector is its norm times the factor (a rotation keeps norms)
    torch.testing.assert_close(seen[0].norm(dim=-1), q.norm(dim=-1) * factor, atol=1e-5,
                               rtol=1e-5)  # fmt: skip


def test_generate_with_kv_cache_under_dynamic_scaling() -> None:
    """Dynamic NTK scaling changes the frequencies once the sequence passes the trained
    length: greedy decoding with the cache gives eager's tokens."""
    eager, ours = pair("llama", "dynamic")
    ids, am = left_padded_batch(V, T)
    kw = dict(attention_mask=am, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(ours.generate(ids, **kw), eager.generate(ids, **kw))
