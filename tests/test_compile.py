"""torch.compile: the attention modules and the Transformer compile whole (``fullgraph=True``,
no graph break) and give the eager results, forward and gradients.

Compiling with inductor takes a minute per model on a shared CPU, so the equality tests use
the ``aot_eager`` backend: the same Dynamo capture and AOT-autograd graphs as inductor, run by
eager kernels (seconds). docs/performance.md measures inductor's speed-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch._dynamo as dynamo
from torch import nn

import attnkit
import attnkit.nn as ann
from attnkit.models import build_model
from attnkit.registry import (
    ALIGNMENTS,
    NORMALISERS,
    SCORES,
    STRIDED,
    build_alignment,
    build_normaliser,
)
from attnkit.registry import build_score as registry_score
from attnkit.train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from attnkit.train.runtime import compile_options

pytestmark = pytest.mark.usefixtures("one_thread_module")

D, H = 8, 2  # model width, heads: head width 4


def no_graph_break(module: nn.Module, *args: Any, **kwargs: Any) -> None:
    dynamo.reset()
    explained = dynamo.explain(module)(*args, **kwargs)
    reasons = [str(b.reason).splitlines()[0] for b in explained.break_reasons]
    assert explained.graph_break_count == 0 and explained.graph_count == 1, reasons


def compiled_equals_eager(module: nn.Module, *args: Any, **kwargs: Any) -> None:
    """Forward and parameter gradients of ``torch.compile(module, fullgraph=True)`` (which
    raises on any graph break) against eager, from the same random state."""
    dynamo.reset()
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    results = []
    for run in (module, compiled):
        module.zero_grad(set_to_none=True)
        torch.manual_seed(1)  # the same draws for dropout / Gumbel noise
        out = run(*args, **kwargs)
        first = out[0] if isinstance(out, tuple) else getattr(out, "context", None)
        first = out.logits if first is None else first
        first.square().sum().backward()
        grads = [p.grad.clone() for p in module.parameters() if p.grad is not None]
        results.append((first.detach(), grads))
    (eager, g_eager), (comp, g_comp) = results
    torch.testing.assert_close(comp, eager, rtol=1e-5, atol=1e-6)
    assert len(g_comp) == len(g_eager) > 0
    for a, b in zip(g_comp, g_eager, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x, mem = torch.randn(2, 6, D), torch.randn(2, 7, D)
    return x, mem, attnkit.padding_mask(torch.tensor([7, 3]), 7)  # mask (B, 1, S)


def head_score(name: str) -> attnkit.Score:
    return registry_score(name, D // H, D // H, hidden=4, max_keys=16)


@pytest.mark.parametrize("score", sorted(SCORES))
def test_cross_attention_with_every_score(score: str) -> None:
    x, mem, pad = inputs()
    module = attnkit.CrossAttention(D, H, score=head_score(score))
    compiled_equals_eager(module, x, mem, mask=pad)


@pytest.mark.parametrize("align", sorted(ALIGNMENTS))
def test_self_attention_with_every_alignment(align: str) -> None:
    x, _, _ = inputs()
    size = "stride" if align in STRIDED else "window"  # a pattern's l, a window's radius
    module = attnkit.SelfAttention(D, H, align=build_alignment(align, D // H, **{size: 2}))
    compiled_equals_eager(module, x)
    compiled_equals_eager(module, x, need_weights=False)  # the O(n·window) kernels


@pytest.mark.parametrize("normaliser", sorted(NORMALISERS))
def test_cross_attention_with_every_normaliser(normaliser: str) -> None:
    x, mem, pad = inputs()
    module = attnkit.CrossAttention(D, H, normaliser=build_normaliser(normaliser))
    compiled_equals_eager(module, x, mem, mask=pad)


@pytest.mark.slow  # suite: pytest -m slow (.ci/run runs it)
def test_torch_style_multihead_attention() -> None:
    x, mem, pad = inputs()
    module = ann.MultiheadAttention(D, H, batch_first=True, dropout=0.0)
    kpm = ~pad[:, 0]  # (B, S), True = ignore
    no_graph_break(module, x, mem, mem, key_padding_mask=kpm)
    compiled_equals_eager(module, x, mem, mem, key_padding_mask=kpm)
    compiled_equals_eager(module, x, mem, mem, key_padding_mask=kpm, need_weights=False)
    compiled_equals_eager(module, x, x, x, is_causal=True, attn_mask=None)


def transformer_batch() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = build_model("transformer", src_vocab=20, tgt_vocab=20, preset="tiny", dropout=0.1)
    src, tgt = torch.randint(3, 20, (3, 7)), torch.randint(3, 20, (3, 5))
    src_len = torch.tensor([7, 4, 1])
    src[1, 4:], src[2, 1:] = 0, 0
    return model, (src, src_len, tgt)


@pytest.mark.slow  # suite: pytest -m slow (.ci/run runs it)
def test_the_transformer_compiles_whole_and_trains_as_eager() -> None:
    model, batch = transformer_batch()
    no_graph_break(model.train(), *batch)
    compiled_equals_eager(model.train(), *batch)  # dropout on: same draws, same result
    compiled_equals_eager(model.eval(), *batch)


@pytest.mark.slow  # suite: pytest -m slow (.ci/run runs it)
def test_fit_compile_trains_the_compiled_forward(tmp_path: Path, monkeypatch) -> None:
    """``attnkit train --compile`` (FitConfig.compile): the model's forward is compiled in place
    (the checkpoint keys stay the model's own) and the run equals the eager run."""
    calls: list[nn.Module] = []
    options: list[Any] = []
    real = nn.Module.compile

    def spy(self: nn.Module, *args: Any, **kwargs: Any) -> None:
        calls.append(self)
        options.append(kwargs.pop("options", None))  # inductor's: aot_eager takes none
        real(self, *args, **{**kwargs, "backend": "aot_eager"})  # inductor: a minute a shape

    monkeypatch.setattr(nn.Module, "compile", spy)

    def run(name: str, compile: bool) -> Any:
        cfg = FitConfig(
            data=DataConfig(task="copy", train_size=8, valid_size=2, test_size=2, max_len=4),
            model=ModelConfig("transformer", "tiny"),
            train=TrainConfig(epochs=1, batch_size=8, progress=False, valid_decode=0),
            out=tmp_path / name,
            compile=compile,
        )
        return attnkit.fit(cfg, log=lambda s: None)

    eager = run("eager", False)
    assert calls == []
    compiled = run("compiled", True)
    assert len(calls) == 1 and calls[0]._compiled_call_impl is not None  # type: ignore[attr-defined]
    assert options == [compile_options("cpu")]
    assert compiled.history[0]["train_loss"] == pytest.approx(eager.history[0]["train_loss"])
    assert compiled.best_valid_loss == pytest.approx(eager.best_valid_loss)


def test_compile_options_per_device() -> None:
    assert compile_options("cpu") == {"cpp.simdlen": 0, "fallback_random": True}
    assert compile_options("cuda") == compile_options("cuda:1") == {}


@pytest.mark.slow  # suite: pytest -m slow (.ci/run runs it)
def test_inductor_with_the_cpu_options_gives_eager_results_and_dropout_draws() -> None:
    """The options of ``attnkit train --compile`` on a CPU (train/runtime.py): inductor's
    scalar kernels and ATen's random generator. A ReLU (its backward keeps a bool mask, the
    store that is slow when vectorised) and a dropout: forward and gradients equal eager's,
    dropout mask included (same seed, same draws: ``fallback_random``)."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, D)).train()
    x = torch.randn(6, D)
    dynamo.reset()
    compiled = torch.compile(net, options=compile_options("cpu"))
    results = []
    for run in (net, compiled):
        net.zero_grad(set_to_none=True)
        torch.manual_seed(1)
        out = run(x)  # (6, D)
        out.square().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in net.parameters()]))
    (eager, g_eager), (comp, g_comp) = results
    torch.testing.assert_close(comp, eager, rtol=1e-5, atol=1e-6)
    for a, b in zip(g_comp, g_eager, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
