"""attnkit.hf: attnkit's attention inside real Hugging Face models, built offline from tiny
random configs (no hub download). Skipped when transformers >= 5 is not installed."""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", minversion="5.0",
    reason="attnkit.hf needs the optional extra: pip install 'attnkit[hf]' (transformers>=5)",
)  # fmt: skip
from transformers import (  # noqa: E402
    AutoModel,
    AutoModelForCausalLM,
    BertConfig,
    GPT2Config,
    LlamaConfig,
    MistralConfig,
)

import attnkit.hf  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread_module")
V, T = 100, 12


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    attnkit.hf.register()
    yield
    attnkit.hf.register()  # undo a test's register(sliding_window=...)


def llama(**kw: Any) -> LlamaConfig:  # GQA: 4 query heads, 2 key/value heads
    return LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, initializer_range=0.5,
                       pad_token_id=0, bos_token_id=1, eos_token_id=2, **kw)  # fmt: skip


def gpt2(**kw: Any) -> GPT2Config:
    return GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                      initializer_range=0.5, bos_token_id=1, eos_token_id=2, **kw)  # fmt: skip


def bert(**kw: Any) -> BertConfig:
    return BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, initializer_range=0.5, **kw)  # fmt: skip


def mistral(**kw: Any) -> MistralConfig:
    return MistralConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, initializer_range=0.5,
                         sliding_window=3, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                         **kw)  # fmt: skip


CONFIGS = {"llama": (llama, AutoModelForCausalLM), "gpt2": (gpt2, AutoModelForCausalLM),
           "bert": (bert, AutoModel), "mistral": (mistral, AutoModelForCausalLM)}  # fmt: skip


def models(name: str, *impls: str) -> list[Any]:
    """One model per attention implementation, same weights (a config each: from_config writes
    the implementation into the config it is given), in eval mode."""
    make, cls = CONFIGS[name]
    torch.manual_seed(0)
    first = cls.from_config(copy.deepcopy(make()), attn_implementation=impls[0]).eval()
    out = [first]
    for impl in impls[1:]:
        m = cls.from_config(copy.deepcopy(make()), attn_implementation=impl).eval()
        m.load_state_dict(first.state_dict())
        out.append(m)
    return out


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """ids (2, T) and a padding mask: sample 1 is left-padded by 3."""
    ids = torch.randint(3, V, (2, T), generator=torch.Generator().manual_seed(0))
    am = torch.ones(2, T, dtype=torch.long)
    am[1, :3] = 0
    return ids, am


def output(model: Any, ids: torch.Tensor, am: torch.Tensor | None, **kw: Any) -> Any:
    with torch.no_grad():
        return model(ids, attention_mask=am, **kw)


def main_tensor(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_attnkit_gives_the_sdpa_model(name: str) -> None:
    sdpa, ours = models(name, "sdpa", "attnkit")
    assert ours.config._attn_implementation == "attnkit"
    ids, am = batch()
    for mask in (None, am):
        real = torch.ones(2, T, dtype=torch.bool) if mask is None else mask.bool()
        a, b = main_tensor(output(sdpa, ids, mask)), main_tensor(output(ours, ids, mask))
        torch.testing.assert_close(b[real], a[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_weights_returned_when_asked_equal_eager(name: str) -> None:
    """GPT-2 passes no output_attentions keyword: HF's output collector is asked instead."""
    eager, ours = models(name, "eager", "attnkit")
    ids, am = batch()
    want = output(eager, ids, am, output_attentions=True).attentions
    got = output(ours, ids, am, output_attentions=True).attentions
    assert len(got) == 2 and all(w is not None for w in got)
    for e, g in zip(want, got, strict=True):  # sample 1's 3 padded queries: eager is uniform
        torch.testing.assert_close(g[0], e[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(g[1, :, 3:], e[1, :, 3:], atol=1e-5, rtol=1e-5)
    assert output(ours, ids, am).attentions is None


def test_sparsemax_and_entmax_weights_are_sparse_distributions() -> None:
    ids, am = batch()
    for impl in ("attnkit_sparsemax", "attnkit_entmax15"):
        (m,) = models("llama", impl)
        for w in output(m, ids, am, output_attentions=True).attentions:  # (B, H, T, T)
            live = w[0]
            torch.testing.assert_close(live.sum(-1), torch.ones(4, T))
            causal_zero = live[:, ~torch.ones(T, T, dtype=torch.bool).tril()]
            assert bool((causal_zero == 0).all())
            allowed = live[:, torch.ones(T, T, dtype=torch.bool).tril()]
            assert float((allowed == 0).float().mean()) > 0.1  # exact zeros inside the causal part


@pytest.mark.parametrize("name, impl", [("llama", "attnkit_sparsemax"),
                                        ("gpt2", "attnkit_entmax15"), ("bert", "attnkit")])
def test_training_a_few_steps(name: str, impl: str) -> None:
    (m,) = models(name, impl)
    m.train()  # GPT-2 and BERT pass their attention dropout (0.1) while training
    ids, am = batch()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(6):
        out = m(ids, attention_mask=am, **({"labels": ids} if name != "bert" else {}))
        loss = out.loss if name != "bert" else out.last_hidden_state.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in m.parameters() if p.grad is not None)
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0]


def greedy(model: Any, ids: torch.Tensor, am: torch.Tensor, **kw: Any) -> torch.Tensor:
    return model.generate(ids, attention_mask=am, max_new_tokens=6, do_sample=False,
                          pad_token_id=0, **kw)  # fmt: skip


def test_generate_with_kv_cache() -> None:
    sdpa, ours, sparse = models("llama", "sdpa", "attnkit", "attnkit_sparsemax")
    ids, am = batch()
    assert torch.equal(greedy(ours, ids, am), greedy(sdpa, ids, am))
    # sparsemax: the cached decoding steps give what recomputing the whole prefix gives
    assert torch.equal(greedy(sparse, ids, am), greedy(sparse, ids, am, use_cache=False))


def test_sliding_equals_eager_mistral_with_its_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mistral's config.sliding_window = 3 (it wins over the registered 6): eager uses HF's
    sliding mask, attnkit_sliding the O(n·r) kernel, which gets no (T, T) mask without
    padding; the windowed cache keeps only W - 1 past keys while generating."""
    attnkit.hf.register(sliding_window=6)
    eager, ours = models("mistral", "eager", "attnkit_sliding")
    masks: list[Any] = []
    real_attend = attnkit.hf.hf_attend

    def spy(*args: Any, **kwargs: Any) -> Any:
        masks.append(args[3])
        return real_attend(*args, **kwargs)

    monkeypatch.setattr(attnkit.hf, "hf_attend", spy)
    ids, am = batch()
    for mask in (None, am):
        real = torch.ones(2, T, dtype=torch.bool) if mask is None else mask.bool()
        a, b = main_tensor(output(eager, ids, mask)), main_tensor(output(ours, ids, mask))
        torch.testing.assert_close(b[real], a[real], atol=1e-5, rtol=1e-5)
    assert masks[0] is None and masks[-1] is not None  # no padding: HF's mask skipped
    assert torch.equal(greedy(ours, ids, am), greedy(eager, ids, am))


def band(window: int, causal: bool) -> torch.Tensor:
    """HF's sliding masks as an additive float mask (1, 1, T, T) for the eager model."""
    q, k = torch.arange(T)[:, None], torch.arange(T)[None, :]
    ok = (k > q - window) & (k <= q) if causal else (q - k).abs() <= window
    return torch.where(ok, 0.0, torch.finfo(torch.float32).min)[None, None]


@pytest.mark.parametrize("name, causal", [("llama", True), ("bert", False)])
def test_sliding_window_keyword_equals_eager_band_mask(name: str, causal: bool) -> None:
    attnkit.hf.register(sliding_window=3)
    eager, ours = models(name, "eager", "attnkit_sliding")
    ids, _ = batch()
    want = main_tensor(output(eager, ids, band(3, causal)))
    torch.testing.assert_close(main_tensor(output(ours, ids, None)), want, atol=1e-5, rtol=1e-5)


def test_sliding_generate_follows_the_band() -> None:
    """Keyword window on Llama: cached decoding equals recomputing the prefix each step."""
    attnkit.hf.register(sliding_window=3)
    (ours,) = models("llama", "attnkit_sliding")
    ids, am = batch()
    assert torch.equal(greedy(ours, ids, am), greedy(ours, ids, am, use_cache=False))


def test_missing_window_and_unsupported_arguments_are_clear_errors() -> None:
    (m,) = models("llama", "attnkit_sliding")
    ids, _ = batch()
    with pytest.raises(ValueError, match="register\\(sliding_window=W\\)"):
        output(m, ids, None)
    fn = attnkit.hf.attention_function()
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match="cache"):
        fn(torch.nn.Module(), q, q, q, None, cache=object())


def test_example_swaps_sparsemax_into_gpt2(tmp_path: Path) -> None:
    path = Path(__file__).parents[2] / "examples" / "hf_sparsemax.py"
    spec = importlib.util.spec_from_file_location("hf_sparsemax_example", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    result = example.main(["--steps", "3", "--batch", "4", "--out", str(tmp_path)])
    from attnkit.viz import load_attention

    for label in ("softmax", "sparsemax"):
        record = load_attention(tmp_path / f"{label}.safetensors")
        assert tuple(record.weights.shape) == (2, 2, 17, 17)
        assert record.tgt_tokens is not None and record.tgt_tokens[8] == "|"
        assert record.src_tokens is None  # self-attention: one token list
    assert result["softmax"]["zeros"] == 0.0
    assert result["sparsemax"]["zeros"] > 0.0


def _mixed(family: str) -> Any:
    """A tiny offline config whose layers mix full and sliding attention (window 3)."""
    small = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                 num_attention_heads=4, num_key_value_heads=2, initializer_range=0.5,
                 pad_token_id=0, bos_token_id=1, eos_token_id=2, sliding_window=3)  # fmt: skip
    if family == "qwen2":  # its own switch: layers >= max_window_layers slide
        return transformers.Qwen2Config(use_sliding_window=True, max_window_layers=1, **small)
    kinds = ["full_attention", "sliding_attention", "full_attention"]
    if family == "qwen3":
        return transformers.Qwen3Config(head_dim=8, use_sliding_window=True, layer_types=kinds,
                                         **small)
    return transformers.Olmo3Config(layer_types=kinds, **small)


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "olmo3"])
def test_sliding_follows_the_models_choice_of_layers(family: str) -> None:
    """attnkit_sliding windows only the layers the config makes sliding: logits and greedy
    generation equal eager's, and the full layers reach keys beyond the window."""
    config = _mixed(family)
    kinds = config.layer_types
    assert "full_attention" in kinds and "sliding_attention" in kinds, kinds
    attnkit.hf.register(sliding_window=6)  # the model's own choice wins
    torch.manual_seed(0)
    eager = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="eager")
    ours = AutoModelForCausalLM.from_config(copy.deepcopy(config),
                                            attn_implementation="attnkit_sliding")  # fmt: skip
    ours.load_state_dict(eager.state_dict())
    eager.eval(), ours.eval()
    ids, am = batch()
    for mask in (None, am):
        real = torch.ones(2, T, dtype=torch.bool) if mask is None else mask.bool()
        a, b = main_tensor(output(eager, ids, mask)), main_tensor(output(ours, ids, mask))
        torch.testing.assert_close(b[real], a[real], atol=1e-5, rtol=1e-5)
    weights = output(ours, ids, None, output_attentions=True).attentions
    for kind, w in zip(kinds, weights, strict=True):
        reaches_far = bool((w[..., -1, : T - 3] > 0).any())  # last query, keys beyond W = 3
        assert reaches_far is (kind == "full_attention"), kind
    assert torch.equal(greedy(ours, ids, am), greedy(eager, ids, am))
