"""Attention of a trained checkpoint, ready for the viewers: ``attnkit view --checkpoint`` and
``attnkit translate --show/--save-attention``.

    loaded = checkpoint.load("runs/tf")
    hyp, maps = sentence_maps(loaded, "I am a student".split())
    record = select_map(maps, "enc-self", loaded.model_name)        # (L, H, S, S)
    show(record.weights, record.tgt_tokens, record.src_tokens, page_path="attn.html")

Kinds of attention (``KINDS``), each an AttentionRecord with weights (L, H, Tq, Tk):

    "cross"     rows: the hypothesis tokens and ``<eos>`` (the step that predicts each);
                columns: the source tokens and ``<eos>`` (the encoder reads one after the source)
    "enc-self"  rows and columns: the source tokens and ``<eos>``                    (S, S)
    "dec-self"  rows and columns: the decoder's inputs ``<bos> y_1 .. y_{T-1}``       (T, T)
                (causal: zero above the diagonal; row t is the step of cross row t)

A model with ``attention_maps(src, src_len, tgt_in)`` (the Transformer) offers all three, per
layer and head, teacher-forced on its own hypothesis; one with only ``cross_attention`` (every
layer's per-head cross-attention) offers "cross" per layer and head; any other model (the RNN
decoders) offers "cross": the (T, S) weights that its decoder returned while decoding.

Legend: L layers, H heads, T hypothesis length + 1 (eos), S source length + 1 (eos).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from .._checks import as_stack
from .terminal import terminal_heatmap
from .weights_file import AttentionRecord

EOS = "<eos>"


def source_tokens(src: Sequence[str], vocab: Any) -> list[str]:
    """Column labels: the source words (``word(unk)`` where the vocabulary lacks one) and
    ``<eos>``."""
    return [*(t if t in vocab.index else f"{t}(unk)" for t in src), EOS]


KINDS = ("enc-self", "dec-self", "cross")
BOS = "<bos>"


def _forced_inputs(
    model: Any, src_ids: Sequence[int], tgt_ids: Sequence[int], bos_id: int
) -> tuple[Tensor, Tensor, Tensor]:
    """One teacher-forced example as a batch of one: src (1, S), src_len (1,), tgt_in (1, T)."""
    device = next(model.parameters()).device
    src = torch.tensor([list(src_ids)], device=device)  # (1, S)
    src_len = torch.tensor([len(src_ids)], device=device)  # (1,)
    tgt_in = torch.tensor([[bos_id, *list(tgt_ids)[:-1]]], device=device)  # (1, T) bos y_1..
    return src, src_len, tgt_in


def per_head_attention(
    model: Any, src_ids: Sequence[int], tgt_ids: Sequence[int], *, bos_id: int
) -> Tensor:
    """Every layer's per-head cross-attention of one teacher-forced target, (L, H, T, S).
    src_ids: the source ids with eos; tgt_ids: the target ids without bos, with eos;
    bos_id: the target vocabulary's (``vocab.bos_id``)."""
    with torch.no_grad():
        weights = model.cross_attention(*_forced_inputs(model, src_ids, tgt_ids, bos_id))
    return weights[0].float().cpu()  # (L, H, T, S)


def model_attention_maps(
    model: Any, src_ids: Sequence[int], tgt_ids: Sequence[int], *, bos_id: int
) -> dict[str, Tensor]:
    """Every attention of one teacher-forced target, kind -> (L, H, Tq, Tk), for a model with
    ``attention_maps`` (see the module doc for the kinds); ids as in ``per_head_attention``."""
    with torch.no_grad():
        maps = model.attention_maps(*_forced_inputs(model, src_ids, tgt_ids, bos_id))
    return {kind: w[0].float().cpu() for kind, w in maps.items()}  # (L, H, Tq, Tk) each


def hypothesis_maps(
    loaded: Any, src: Sequence[str], hyp: Sequence[str], weights: Tensor | None
) -> dict[str, AttentionRecord]:
    """Every kind of attention the model offers for one translation ``hyp`` of ``src``;
    ``weights`` (T, S): what the decoder returned while decoding (used for models without
    ``attention_maps``/``cross_attention``). kind -> AttentionRecord (see the module doc)."""
    if weights is None:
        raise ValueError(
            f"{loaded.model_name} has no attention to show; use a model with attention "
            "(rnnsearch, ...)"
        )
    model, bos_id = loaded.model, loaded.tgt_vocab.bos_id
    src_ids, tgt_ids = loaded.src_vocab.encode(list(src)), loaded.tgt_vocab.encode(list(hyp))
    keys = source_tokens(src, loaded.src_vocab)
    if hasattr(model, "attention_maps"):
        maps = model_attention_maps(model, src_ids, tgt_ids, bos_id=bos_id)
        t = maps["cross"].shape[-2]  # T = len(hyp) + 1
        return {
            "enc-self": AttentionRecord(maps["enc-self"], keys, None),  # (L, H, S, S)
            "dec-self": AttentionRecord(maps["dec-self"], [BOS, *hyp][:t], None),  # (L, H, T, T)
            "cross": AttentionRecord(maps["cross"], [*hyp, EOS][:t], keys),  # (L, H, T, S)
        }
    if hasattr(model, "cross_attention"):
        weights = per_head_attention(model, src_ids, tgt_ids, bos_id=bos_id)  # (L, H, T, S)
    rows = weights.shape[-2]  # T; one less than the tokens when decoding hit max_len
    return {"cross": AttentionRecord(weights, [*hyp, EOS][:rows], keys)}


def sentence_maps(loaded: Any, src: Sequence[str]) -> tuple[list[str], dict[str, AttentionRecord]]:
    """Translate one tokenised sentence greedily with a loaded checkpoint; return the
    hypothesis and every kind of attention the model offers (``hypothesis_maps``)."""
    from ..data.example import Example
    from ..decode import translate

    if not src:
        raise ValueError("the sentence is empty: pass the words to translate")
    out = translate(loaded.model, [Example(list(src), [])], loaded.src_vocab, loaded.tgt_vocab)
    hyp = out.hyps[0]
    return hyp, hypothesis_maps(loaded, src, hyp, out.weights[0])


def sentence_attention(loaded: Any, src: Sequence[str]) -> tuple[list[str], AttentionRecord]:
    """``sentence_maps``' cross-attention: weights (T, S) or, for models with
    ``cross_attention``, (L, H, T, S)."""
    hyp, maps = sentence_maps(loaded, src)
    return hyp, maps["cross"]


def select_map(
    maps: Mapping[str, AttentionRecord],
    kind: str,
    model_name: str,
    *,
    layer: int = -1,
    head: int | str | None = None,
) -> AttentionRecord:
    """The map of one kind, after checking that the model has it and that ``layer`` and
    ``head`` (an index, "mean" or None) exist in it; every error names what there is."""
    if kind not in KINDS:
        raise ValueError(f"--kind {kind!r}: choose one of {', '.join(KINDS)}")
    if kind not in maps:
        raise ValueError(
            f"{model_name} has no {kind} attention; its kinds: {', '.join(maps)} "
            f"(pass --kind {' or --kind '.join(maps)})"
        )
    record = maps[kind]
    n_layers, n_heads = as_stack(record.weights).shape[:2]  # of (L, H, Tq, Tk)
    if not -n_layers <= layer < n_layers:
        raise ValueError(
            f"--layer {layer}: the {kind} attention of {model_name} has {n_layers} layer(s); "
            f"pass 0..{n_layers - 1} (or -1, the last)"
        )
    if isinstance(head, int) and not -n_heads <= head < n_heads:
        raise ValueError(
            f"--head {head}: the {kind} attention of {model_name} has {n_heads} head(s); "
            f"pass 0..{n_heads - 1} or 'mean'"
        )
    return record


def translation_heatmap(
    src: Sequence[str], hyp: Sequence[str], weights: Tensor | None, vocab: Any
) -> str:
    """The terminal heatmap of one translation, weights (T, S) as ``translate`` returns them;
    a note instead when the model has no attention."""
    if weights is None:
        return "(this model has no attention to show)"
    rows = weights.shape[-2]  # T; one less than the tokens when decoding hit max_len
    return terminal_heatmap(weights, [*hyp, EOS][:rows], source_tokens(src, vocab))


__all__ = [
    "KINDS",
    "hypothesis_maps",
    "model_attention_maps",
    "per_head_attention",
    "select_map",
    "sentence_attention",
    "sentence_maps",
    "source_tokens",
    "translation_heatmap",
]
