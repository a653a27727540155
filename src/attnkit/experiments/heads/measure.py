"""What the heads experiment measures on one Transformer trained to a validation plateau (its
``best`` checkpoint): greedy BLEU of the test set (the paper's metric; with each sentence's
statistics for the bootstrap, bleu.py), test and valid perplexity (the paper's other column),
AER of the cross-attention against gold links, and how different the heads are (mean
pairwise Jensen–Shannon divergence of the last layer's heads).

    JS(P ‖ Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M),   M = ½ (P + Q)        (Lin 1991, eq. 4.1)
    KL(P ‖ M) = Σ_s P(s) log (P(s) / M(s)),   0 log 0 = 0           in nats, 0 <= JS <= ln 2

For one sentence and one target position t, the heads' rows a^(h)_t of the last decoder
layer's cross-attention (teacher-forced on the reference, cut to the source words and
renormalised over them, as ``attention_entropy`` does) give the mean over head pairs h < g of
JS(a^(h)_t ‖ a^(g)_t); every (sentence, position) row of the test set counts once. One head
has no pair: NaN.

Legend: L layers, H heads, T target words, S source words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ...data.example import Example
from ..pool import history, plateau


def js_divergence(p: Tensor, q: Tensor) -> Tensor:
    """Jensen–Shannon divergence in nats between distributions over the last dim (see the
    module doc). p, q (..., S), each row summing to one -> (...)."""
    m = (p + q) / 2  # (..., S); m > 0 wherever p > 0 or q > 0
    return (_kl(p, m) + _kl(q, m)) / 2


def _kl(p: Tensor, m: Tensor) -> Tensor:
    terms = torch.where(p > 0, p * torch.log(p / torch.where(p > 0, m, 1.0)), 0.0)  # (..., S)
    return terms.sum(dim=-1)  # (...)


def pairwise_js(weights: Tensor) -> Tensor:
    """Mean JS over the pairs of heads, per query row: weights (H, T, S) -> (T,). Rows are
    renormalised first; H = 1 gives NaN (no pair)."""
    w = weights.double()
    w = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-300)  # (H, T, S)
    n = w.shape[0]
    if n < 2:
        return torch.full(w.shape[1:2], math.nan, dtype=torch.float64)  # (T,)
    i, j = torch.triu_indices(n, n, offset=1)  # (P,), (P,): every pair h < g once
    return js_divergence(w[i], w[j]).mean(dim=0)  # (P, T) -> (T,)


def mean_pairwise_js(weights: Sequence[Tensor]) -> float:
    """Mean over every (sentence, target position) row of ``pairwise_js``; weights: one
    (H, T_i, S_i) per sentence."""
    rows = torch.cat([pairwise_js(w) for w in weights])  # (Σ T_i,)
    return float(rows.mean()) if rows.numel() else math.nan


def example_index(examples: Sequence[Example], first: int = 50) -> int:
    """The sentence drawn head by head: the one with the most gold links (then the longest
    source) among the first ``first`` test sentences."""
    pool = range(min(first, len(examples)))
    return max(pool, key=lambda i: (len(examples[i].links), len(examples[i].src), -i))


def bleu_tokens(
    hyps: Sequence[Sequence[str]], examples: Sequence[Example], detok: Any | None
) -> list[tuple[list[str], list[str]]]:
    """Each (hypothesis, reference) as the tokens ``eval.text.score`` counts n-grams over:
    the words as they are (sacrebleu tokenize="none"), or with ``detok`` (subwords) the
    detokenised text against the raw reference under sacrebleu's 13a tokeniser."""
    if detok is None:
        return [
            (" ".join(h).split(), " ".join(e.tgt).split())
            for h, e in zip(hyps, examples, strict=True)
        ]
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    tok = Tokenizer13a()
    return [
        (tok(detok(h)).split(), tok(e.ref or detok(e.tgt)).split())
        for h, e in zip(hyps, examples, strict=True)
    ]


def measure(run: Path, patience: int, example: int | None = None) -> dict[str, Any]:
    """Score the early-stopped model ``run/best`` (lowest valid loss) on its own test split
    (rebuilt from the data spec stored in it): greedy BLEU (and each sentence's BLEU
    statistics, for the bootstrap), exact match, test perplexity exp(mean cross-entropy per
    target token), the best valid perplexity, whether training ended on a plateau of
    ``patience`` epochs, AER of the last layer's mean of heads (None without gold links) and
    of its best single head, the mean pairwise JS of its heads, and one sentence's maps."""

    from ...data.source import load_spec, tokenisers_for
    from ...decode import translate
    from ...eval.alignment import evaluate_alignments
    from ...eval.forced import forced_head_attention, gold_from_examples
    from ...eval.text import score
    from ...tasks.translate import TRANSLATE
    from ...train import checkpoint
    from ...train.loop import valid_loss
    from .bleu import sentence_stats

    ck = checkpoint.load(run / "best")
    rows = history(run)
    test = load_spec(ck.meta, quiet=True).test
    tgt_tok = tokenisers_for(ck.meta)[1]
    hyps = translate(ck.model, test, ck.src_vocab, ck.tgt_vocab).hyps
    detok = tgt_tok.decode if tgt_tok.name == "spm" else None
    s = score(hyps, test, detok=detok)
    stats = [sentence_stats(h, r) for h, r in bleu_tokens(hyps, test, detok)]
    batches = TRANSLATE.batches(test, ck.src_vocab, ck.tgt_vocab, 64, None)
    test_ppl = math.exp(valid_loss(ck.model, batches))
    heads = [w[-1] for w in forced_head_attention(ck.model, test, ck.src_vocab, ck.tgt_vocab)]
    aer = aer_best = None  # (H, T_i, S_i) per sentence above
    if all(e.links for e in test):
        gold = gold_from_examples(test)
        aer = evaluate_alignments([w.mean(dim=0) for w in heads], gold).aer_argmax
        n_heads = heads[0].shape[0]
        aer_best = min(
            evaluate_alignments([w[h] for w in heads], gold).aer_argmax for h in range(n_heads)
        )
    k = example_index(test) if example is None else example
    e = test[k]
    return {
        "bleu": round(s.bleu, 2),
        "bleu_stats": stats,
        "exact": round(100 * s.exact_match, 2),
        "test_ppl": round(test_ppl, 4),
        "valid_ppl": round(math.exp(ck.meta["valid_loss"]), 4),
        "epochs": len(rows),
        "best_epoch": int(ck.meta["epoch"]),
        "plateau": plateau(len(rows), int(ck.meta["epoch"]), patience),
        "aer": None if aer is None else round(100 * aer, 2),
        "aer_best_head": None if aer_best is None else round(100 * aer_best, 2),
        "js": round(mean_pairwise_js(heads), 4),
        "parameters": sum(p.numel() for p in ck.model.parameters()),
        "example": {
            "index": k,
            "src": e.src,
            "tgt": e.tgt,
            "links": [list(x) for x in e.links],
            "weights": [[[round(float(x), 4) for x in row] for row in mat] for mat in heads[k]],
        },
    }


__all__ = [
    "bleu_tokens",
    "example_index",
    "js_divergence",
    "mean_pairwise_js",
    "measure",
    "pairwise_js",
    "plateau",
]
