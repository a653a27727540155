"""attnkit's attention inside any Hugging Face ``transformers`` (>= 5) model.

    import attnkit.interop.hf
    attnkit.hf.register()                       # once per process
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="attnkit_sparsemax")

``register`` adds to HF's ``AttentionInterface`` (and to ``AttentionMaskInterface``, with
HF's own SDPA mask builder, so padding and causal masks reach the function as they reach
``"sdpa"``):

  ``attnkit``            softmax(qkᵀ/√d) v, = ``"sdpa"`` (Vaswani et al. 2017)
  ``attnkit_sliding``    the same restricted to a sliding window, O(n·r) kernel
                         (``attnkit.local``); the window W is the model's ``sliding_window``
                         (argument or config), else ``register(sliding_window=W)``; a model
                         whose ``layer_types`` mix full and sliding layers keeps its full
                         layers global, as HF's sdpa does
  ``attnkit_sparsemax``  sparsemax weights, exact zeros (Martins & Astudillo 2016)
  ``attnkit_entmax15``   1.5-entmax weights (Peters et al. 2019)

Models that soft-cap their scores (Gemma 2: ``softcap``) or give each head a sink logit
(gpt-oss: ``s_aux``) run with ``attnkit`` and ``attnkit_sliding`` (sinks with the softmax
variants only): ``attnkit.stages.softcap``, ``attnkit.stages.sinks``.

The computation on tensors is ``attnkit.interop.hf_attention.hf_attend``; this module only reads the
module and keyword arguments HF passes. It needs the optional extra ``pip install
'attnkit[hf]'``; nothing else in attnkit imports ``transformers``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor, nn

from ..core import NormaliseFn
from ..stages.normalisers import Entmax15, Sparsemax, softmax
from .hf_attention import hf_attend

try:
    import transformers
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "attnkit.hf needs Hugging Face transformers >= 5: pip install 'attnkit[hf]'"
    ) from err

if int(transformers.__version__.split(".")[0]) < 5:  # pragma: no cover
    raise ImportError(
        f"attnkit.hf needs transformers >= 5 (its AttentionInterface), found "
        f"{transformers.__version__}: pip install -U 'attnkit[hf]'"
    )

HFAttention = Callable[..., tuple[Tensor, "Tensor | None"]]

# name -> (normaliser, sliding window or not)
VARIANTS: dict[str, tuple[NormaliseFn, bool]] = {
    "attnkit": (softmax, False),
    "attnkit_sliding": (softmax, True),
    "attnkit_sparsemax": (Sparsemax(), False),
    "attnkit_entmax15": (Entmax15(), False),
}
"""``attn_implementation`` name -> (its normaliser, whether it is the sliding-window one)."""
# keyword arguments that change the computation and that attnkit does not implement
UNSUPPORTED = ("cache",)
"""Keyword arguments HF may pass that change the computation and attnkit does not implement:
a ValueError when one is set."""


def attention_function(
    normaliser: NormaliseFn = softmax, *, sliding: bool = False, sliding_window: int | None = None
) -> HFAttention:
    """An HF attention function (``AttentionInterface`` signature) computing attnkit's
    attention with ``normaliser``; with ``sliding`` restricted to a window of
    ``sliding_window`` keys (None: the model's own ``sliding_window``)."""

    def attention(
        module: nn.Module,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attention_mask: Tensor | None,
        scaling: float | None = None,
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:
        """query (B, H, Tq, D), key/value (B, Hkv, Tk, .) -> (B, Tq, H, Dv), weights."""
        given = [k for k in UNSUPPORTED if kwargs.get(k) is not None]
        if given:
            raise ValueError(
                f"attnkit attention does not implement {', '.join(given)} (passed by "
                f"{type(module).__name__}); use attn_implementation='eager' for this model"
            )
        causal = kwargs.get("is_causal")
        if causal is None:
            causal = getattr(module, "is_causal", True)
        window = _window(module, kwargs, sliding_window) if sliding else None
        return hf_attend(
            query, key, value, attention_mask, scaling=scaling, dropout=dropout,
            causal=bool(causal), normaliser=normaliser, sliding_window=window,
            position_bias=kwargs.get("position_bias"), need_weights=_wants_weights(kwargs),
            softcap=kwargs.get("softcap"), sinks=_sinks(kwargs),
        )  # fmt: skip

    return attention


def register(*, sliding_window: int | None = None) -> list[str]:
    """Register attnkit's variants (``VARIANTS``) with transformers, so that
    ``attn_implementation="attnkit_sparsemax"`` (etc.) works for every model that supports
    custom attention. ``sliding_window``: the window of ``attnkit_sliding`` in models that
    have none of their own (Llama, GPT-2, BERT). Returns the names registered; calling again
    re-registers."""
    for name, (normaliser, sliding) in VARIANTS.items():
        window = sliding_window if sliding else None
        AttentionInterface.register(name, attention_function(normaliser, sliding=sliding,
                                                             sliding_window=window))
        AttentionMaskInterface.register(name, _sliding_mask if sliding else sdpa_mask)
    return list(VARIANTS)


def _sliding_mask(**kwargs: Any) -> Tensor | None:
    """HF's SDPA mask for ``attnkit_sliding``, allowed to be skipped (None) for a sliding
    window too: without padding the kernel applies the causal band itself, in O(n·r), instead
    of reading a materialised (B, 1, T, T) band mask. The band is the same one: the model's
    ``sliding_window``, from which HF would have built the mask."""
    kwargs["local_size"] = None
    return sdpa_mask(**kwargs)


def _window(module: nn.Module, kwargs: dict[str, Any], registered: int | None) -> int | None:
    """The sliding window of this layer, or None for a layer of full attention.

    A model whose config says which layers slide (``layer_types``, e.g. Qwen2 with
    ``use_sliding_window`` and ``max_window_layers``, Qwen3, Gemma 3) is followed layer by
    layer, as HF's own sdpa and flex paths do: its full-attention layers stay global. A sliding
    layer's window is the model's own (its attention's argument, else its config: HF builds
    its masks from it too), else the one given to ``register``, which is also the window of
    every layer of a model with no per-layer choice (Llama, GPT-2, BERT)."""
    config = getattr(module, "config", None)
    kind = _layer_type(module, config)
    if kind is not None and kind != "sliding_attention":
        return None
    own = getattr(config, "sliding_window", None)
    for window in (kwargs.get("sliding_window"), own, registered):
        if window is not None:
            return int(window)
    raise ValueError(
        f"attnkit_sliding: {type(module).__name__} has no sliding_window in its config; "
        "call attnkit.hf.register(sliding_window=W) or set config.sliding_window = W"
    )


def _layer_type(module: nn.Module, config: Any) -> str | None:
    """This attention layer's entry of ``config.layer_types`` ("full_attention",
    "sliding_attention", ...), or None when the model makes no per-layer choice."""
    types = getattr(config, "layer_types", None)
    if not types:
        return None
    kind = getattr(module, "layer_type", None)
    if kind is None and isinstance(getattr(module, "layer_idx", None), int):
        kind = types[module.layer_idx]
    return None if kind is None else str(kind)


def _sinks(kwargs: dict[str, Any]) -> Tensor | None:
    """The per-head sink logits (H,) a model passes (gpt-oss: ``s_aux``; ``sinks``)."""
    sinks = kwargs.get("s_aux")
    return kwargs.get("sinks") if sinks is None else sinks


def _wants_weights(kwargs: dict[str, Any]) -> bool:
    """The model asked for the attention weights: ``output_attentions`` in the call, or HF's
    output collector (``capture_outputs``) is recording attentions in this forward pass."""
    if kwargs.get("output_attentions"):
        return True
    try:
        from transformers.utils.output_capturing import _active_collector
    except ImportError:  # pragma: no cover - an older layout: only the keyword counts
        return False
    collected = _active_collector.get()
    return bool(collected) and ("attentions" in collected or "cross_attentions" in collected)


__all__ = ["UNSUPPORTED", "VARIANTS", "attention_function", "register"]
