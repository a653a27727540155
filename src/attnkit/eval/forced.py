"""Alignment quality of a model's attention, teacher-forced on the reference:
``attnkit evaluate --alignments`` (``alignment_report``) and the one number of training
reports (``attention_aer``).

A decoded hypothesis is not the reference, so gold links (over reference words) cannot be
compared with the attention of a decoded sentence. As in the literature (Luong, Pham & Manning
2015, §5.4: "force decode our models to produce the reference translations"), the model is
teacher-forced on the REFERENCE target and its attention weights at those steps are scored:

    a_t = attention of decoder step t, fed bos y_1 .. y_{t-1}, predicting y_t   (T x S)
    argmax links  A = {(argmax_s a_ts, t)}          (one source word per target word)
    threshold links A = {(s, t) : a_ts >= τ}
    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)      (Och & Ney 2003, eq. 22)

Only words are scored: the row of the step that predicts ``<eos>`` and the column of the
source ``<eos>`` are cut off (weights[:T, :S]; not renormalised, so a word row whose mass sits
on ``<eos>`` may fall below τ). The entropy is that of those rows renormalised over the
source words.

Which target word a row stands for (``row_shift``). By default (0) the row of the step that
predicts y_t is target word t. Luong et al. (2015, footnote 14) read the step that is fed
y_{t-1} and predicts y_t as the alignment of "(a) the predicted word in the location-based
alignment functions and (b) the input word in the content-based functions": for content-based
scores (dot, general, concat) target word t is the row of the step FED y_t, one row later.
``row_shift=1`` reads it so:

    row_shift 0:  target word t <- a_t      (the step predicting y_t; weights[0:T, :S])
    row_shift 1:  target word t <- a_{t+1}  (the step fed y_t; weights[1:T+1, :S], the last
                                             word's row being the step that predicts <eos>)

Links are (src, tgt), 0-based: Pharaoh ``"1-0"`` links source word 1 to target word 0 — the
order of ``Example.links`` in toy-ko and of ``attnkit.eval.alignment.parse_pharaoh``.

Legend: B batch, T target words, S source words.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..data.batching import batches
from ..data.example import Example
from ..data.vocab import Vocab
from ..models import Seq2Seq
from .alignment import AlignmentScores, GoldAlignment, evaluate_alignments, parse_pharaoh

TASK_GOLD = "task"


def _forced(
    model: Any,
    examples: Sequence[Example],
    src_vocab: Any,
    tgt_vocab: Any,
    batch_size: int,
    weights_of: Callable[[Any], Tensor],
    row_shift: int = 0,
) -> list[Tensor]:
    """Teacher-force each example's reference target; ``weights_of(batch)`` gives
    (B, ..., T+1, S+1) weights, cut here to the words: rows ``row_shift`` .. T_i - 1 +
    ``row_shift``, (..., T_i, S_i) per example, in the order of ``examples``."""
    if row_shift not in (0, 1):
        raise ValueError(
            f"row_shift={row_shift!r}; pass 0 (row t = the word the step predicts) or 1 (row "
            "t = the word the step is fed: Luong et al. 2015, footnote 14, content-based scores)"
        )
    device = next(model.parameters()).device
    out: list[Tensor] = [torch.empty(0)] * len(examples)
    model.eval()
    with torch.no_grad():
        for b in batches(list(examples), src_vocab, tgt_vocab, batch_size):
            weights = weights_of(b.to(device)).float()  # (B, ..., T+1, S+1)
            for j, i in enumerate(b.index):
                e = examples[i]
                rows = slice(row_shift, len(e.tgt) + row_shift)  # T_i rows
                out[i] = weights[j, ..., rows, : len(e.src)].cpu()  # (..., T_i, S_i)
    return out


def forced_attention(
    model: Any,
    examples: Sequence[Example],
    src_vocab: Any,
    tgt_vocab: Any,
    *,
    batch_size: int = 128,
    row_shift: int = 0,
) -> list[Tensor]:
    """The attention the model's forward returns while reading the reference: (T_i, S_i)
    per example; row t is target word t read as ``row_shift`` says (the module docstring:
    0 the word the step predicts, 1 the word it is fed, Luong 2015's footnote 14)."""

    def weights_of(b: Any) -> Tensor:
        weights = model(b.src, b.src_len, b.tgt_in).weights  # (B, T+1, S+1) | None
        if weights is None:
            raise ValueError(
                f"{type(model).__name__} has no attention weights to align; "
                "use a model with attention (rnnsearch, ...)"
            )
        return weights

    return _forced(model, examples, src_vocab, tgt_vocab, batch_size, weights_of, row_shift)


def forced_layer_attention(
    model: Any,
    examples: Sequence[Example],
    src_vocab: Any,
    tgt_vocab: Any,
    *,
    batch_size: int = 128,
) -> list[Tensor]:
    """Like ``forced_attention`` for a model with ``cross_attention`` (every layer and head,
    e.g. the Transformer): each layer's mean over heads, (L, T_i, S_i) per example."""

    def weights_of(b: Any) -> Tensor:
        weights = model.cross_attention(b.src, b.src_len, b.tgt_in)  # (B, L, H, T+1, S+1)
        return weights.float().mean(dim=2)  # (B, L, T+1, S+1)

    return _forced(model, examples, src_vocab, tgt_vocab, batch_size, weights_of)


def forced_head_attention(
    model: Any,
    examples: Sequence[Example],
    src_vocab: Any,
    tgt_vocab: Any,
    *,
    batch_size: int = 128,
) -> list[Tensor]:
    """Like ``forced_layer_attention`` but every head kept apart: (L, H, T_i, S_i) per
    example (to compare or draw the heads of a multi-head model)."""

    def weights_of(b: Any) -> Tensor:
        return model.cross_attention(b.src, b.src_len, b.tgt_in)  # (B, L, H, T+1, S+1)

    return _forced(model, examples, src_vocab, tgt_vocab, batch_size, weights_of)


def gold_from_examples(examples: Sequence[Example]) -> list[GoldAlignment]:
    """The task's own gold links (``Example.links``), all sure."""
    if not any(e.links for e in examples):
        raise ValueError(
            "these examples carry no gold alignments; pass --alignments FILE "
            "(Pharaoh format: one line of 0-based 'src-tgt' links per sentence)"
        )
    return [GoldAlignment(frozenset(e.links), frozenset(e.links)) for e in examples]


def attention_aer(
    model: Seq2Seq,
    examples: Sequence[Example],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    row_shift: int = 0,
) -> float | None:
    """Corpus AER of the argmax of the model's attention on the reference (sure = possible =
    gold links); None if it cannot be computed (no gold links, or a model without attention).
    ``row_shift=1`` scores the row of the step fed y_t as target word t, as Luong et al.
    (2015, footnote 14) do for content-based scores (the module docstring); 0, the default,
    the step that predicts it."""
    with_links = [e for e in examples if e.links]
    if not with_links:
        return None
    try:
        weights = forced_attention(model, with_links, src_vocab, tgt_vocab, row_shift=row_shift)
    except ValueError:  # the model has no attention
        return None
    return evaluate_alignments(weights, gold_from_examples(with_links)).aer_argmax


def read_gold_file(path: str | Path, examples: Sequence[Example]) -> list[GoldAlignment]:
    """One Pharaoh line per evaluated example, in order; ``s-t`` sure, ``s?t`` possible.
    Every error names the file and the line."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no alignment file {p}")
    lines = p.read_text(encoding="utf-8").splitlines()
    if len(lines) != len(examples):
        raise ValueError(
            f"{p} has {len(lines)} lines but {len(examples)} sentences are evaluated; write one "
            "line of links per sentence of the split, in order (--limit N evaluates the first N)"
        )
    gold = []
    for n, (line, e) in enumerate(zip(lines, examples, strict=True), start=1):
        try:
            g = parse_pharaoh(line)
        except ValueError as err:
            raise ValueError(f"{p} line {n}: {err}") from None
        for s, t in sorted(g.possible):
            if s >= len(e.src) or t >= len(e.tgt):
                raise ValueError(
                    f"{p} line {n}: link {s}-{t} is outside the {len(e.src)} source x "
                    f"{len(e.tgt)} target words of sentence {n}; links are 0-based src-tgt "
                    "(source index first)"
                )
        gold.append(g)
    return gold


@dataclass(frozen=True)
class AlignmentReport:
    """Scores of the force-decoded attention against ``gold`` ("task" or a file path)."""

    scores: AlignmentScores
    threshold: float
    gold: str
    by_layer: tuple[float, ...] | None = None  # AER argmax of each layer's mean of heads

    def to_json(self) -> dict[str, Any]:
        extra = {} if self.by_layer is None else {"aer_argmax_by_layer": list(self.by_layer)}
        return {**asdict(self.scores), "threshold": self.threshold, "gold": self.gold, **extra}


def alignment_report(
    loaded: Any, examples: Sequence[Example], gold_file: str | None, threshold: float
) -> AlignmentReport:
    """AER of argmax and of thresholded links, and entropy, of a loaded checkpoint's
    force-decoded attention; gold from ``gold_file`` or, when None/empty, the examples.
    Models with ``cross_attention`` also get the argmax AER of each layer's mean of heads
    (the weights their ``forward`` returns are one choice among them)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"--align-threshold {threshold}: pass a weight in (0, 1]")
    gold = read_gold_file(gold_file, examples) if gold_file else gold_from_examples(examples)
    weights = forced_attention(loaded.model, examples, loaded.src_vocab, loaded.tgt_vocab)
    scores = evaluate_alignments(weights, gold, threshold=threshold)
    by_layer = None
    if hasattr(loaded.model, "cross_attention"):
        layers = forced_layer_attention(
            loaded.model, examples, loaded.src_vocab, loaded.tgt_vocab
        )  # (L, T_i, S_i) each
        by_layer = tuple(
            evaluate_alignments([w[k] for w in layers], gold).aer_argmax
            for k in range(layers[0].shape[0])
        )
    return AlignmentReport(scores, threshold, gold_file or TASK_GOLD, by_layer)


def format_report(report: AlignmentReport) -> list[str]:
    s = report.scores
    gold = "the task's links" if report.gold == TASK_GOLD else report.gold
    lines = [
        "",
        f"  alignment of the attention (reference force-decoded; {s.sentences} sentences, "
        f"gold: {gold})",
        f"    AER argmax links        {100 * s.aer_argmax:5.1f}%",
        f"    AER links a >= {report.threshold:<4g}     {100 * (s.aer_threshold or 0.0):5.1f}%",
        f"    entropy                 {s.entropy:.3f} nats (normalised {s.entropy_normalised:.3f})",
    ]
    if report.by_layer is not None:
        layers = "  ".join(f"{k}: {100 * a:.1f}%" for k, a in enumerate(report.by_layer))
        lines.append(f"    AER argmax by layer     {layers}  (mean of heads)")
    return lines


__all__ = [
    "AlignmentReport",
    "alignment_report",
    "attention_aer",
    "forced_attention",
    "forced_head_attention",
    "forced_layer_attention",
    "format_report",
    "gold_from_examples",
    "read_gold_file",
]
