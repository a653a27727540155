"""Attention of a trained checkpoint, ready for the viewers: ``attnkit view --checkpoint`` and
``attnkit translate --show``.

    loaded = checkpoint.load("runs/rs")
    record = sentence_attention(loaded, "I am a student".split())
    show(record.weights, record.tgt_tokens, record.src_tokens, out="attn.html")

Rows are the hypothesis tokens and ``<eos>``, columns the source tokens and ``<eos>`` (the
encoder reads an ``<eos>`` after the source, and the decoder attends to it too). A model that
offers ``cross_attention(src, src_len, tgt_in) -> (B, L, H, T, S)`` (every layer and head, e.g.
the Transformer) is shown per layer and head; any other model shows the (T, S) weights that
its decoder returned while decoding.

Legend: L layers, H heads, T hypothesis length + 1 (eos), S source length + 1 (eos).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from .terminal import terminal_heatmap
from .weights_file import AttentionRecord

EOS = "<eos>"


def source_tokens(src: Sequence[str], vocab: Any) -> list[str]:
    """Column labels: the source words (``word(unk)`` where the vocabulary lacks one) and
    ``<eos>``."""
    return [*(t if t in vocab.index else f"{t}(unk)" for t in src), EOS]


def per_head_attention(
    model: Any, src_ids: Sequence[int], tgt_ids: Sequence[int], *, bos_id: int
) -> Tensor:
    """Every layer's per-head cross-attention of one teacher-forced target, (L, H, T, S).
    src_ids: the source ids with eos; tgt_ids: the target ids without bos, with eos;
    bos_id: the target vocabulary's (``vocab.bos_id``)."""
    device = next(model.parameters()).device
    src = torch.tensor([list(src_ids)], device=device)  # (1, S)
    src_len = torch.tensor([len(src_ids)], device=device)  # (1,)
    tgt_in = torch.tensor([[bos_id, *list(tgt_ids)[:-1]]], device=device)  # (1, T) bos y_1..
    with torch.no_grad():
        weights = model.cross_attention(src, src_len, tgt_in)  # (1, L, H, T, S)
    return weights[0].float().cpu()  # (L, H, T, S)


def sentence_attention(loaded: Any, src: Sequence[str]) -> tuple[list[str], AttentionRecord]:
    """Translate one tokenised sentence greedily with a loaded checkpoint; return the
    hypothesis and an AttentionRecord: weights (T, S) or, for models with
    ``cross_attention``, (L, H, T, S)."""
    from ..data.example import Example
    from ..decode import translate

    if not src:
        raise ValueError("the sentence is empty: pass the words to translate")
    out = translate(loaded.model, [Example(list(src), [])], loaded.src_vocab, loaded.tgt_vocab)
    hyp, weights = out.hyps[0], out.weights[0]
    if weights is None:
        raise ValueError(
            f"{loaded.model_name} has no attention to show; use a model with attention "
            "(rnnsearch, ...)"
        )
    if hasattr(loaded.model, "cross_attention"):
        weights = per_head_attention(
            loaded.model,
            loaded.src_vocab.encode(list(src)),
            loaded.tgt_vocab.encode(hyp),
            bos_id=loaded.tgt_vocab.bos_id,
        )  # (L, H, T, S)
    rows = weights.shape[-2]  # T; one less than the tokens when decoding hit max_len
    record = AttentionRecord(weights, [*hyp, EOS][:rows], source_tokens(src, loaded.src_vocab))
    return hyp, record


def translation_heatmap(
    src: Sequence[str], hyp: Sequence[str], weights: Tensor | None, vocab: Any
) -> str:
    """The terminal heatmap of one translation, weights (T, S) as ``translate`` returns them;
    a note instead when the model has no attention."""
    if weights is None:
        return "(this model has no attention to show)"
    rows = weights.shape[-2]  # T; one less than the tokens when decoding hit max_len
    return terminal_heatmap(weights, [*hyp, EOS][:rows], source_tokens(src, vocab))


__all__ = ["per_head_attention", "sentence_attention", "source_tokens", "translation_heatmap"]
