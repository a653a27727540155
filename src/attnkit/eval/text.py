"""Scores of translations against references: exact match, BLEU and chrF (sacrebleu), and
BLEU by source-length bucket."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..data.example import Example


def exact_match(hyps: Sequence[Sequence[str]], refs: Sequence[Sequence[str]]) -> float:
    """Fraction in [0, 1] of hypotheses equal to their reference, token for token."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    return sum(list(h) == list(r) for h, r in zip(hyps, refs, strict=True)) / max(len(refs), 1)


@dataclass
class Scores:
    """Corpus scores of ``n`` hypotheses: exact match (a fraction in [0, 1]), sacrebleu BLEU
    and chrF (0..100), and the same by source-length bucket in ``by_length``."""

    n: int
    exact_match: float  # fraction in [0, 1]
    bleu: float  # sacrebleu corpus BLEU, 0..100
    chrf: float  # sacrebleu chrF, 0..100
    by_length: list[dict[str, float | int | str]] = field(default_factory=list)


def _bleu(hyps: list[str], refs: list[str], tokenize: str = "none") -> float:
    import sacrebleu

    return float(sacrebleu.corpus_bleu(hyps, [refs], tokenize=tokenize).score) if hyps else 0.0


def score(
    hyps: Sequence[Sequence[str]],
    examples: Sequence[Example],
    *,
    join: str = " ",
    detok: Callable[[Sequence[str]], str] | None = None,
    buckets: Sequence[int] = (5, 10, 20, 40),
) -> Scores:
    """Corpus scores. Without ``detok``, tokens are joined with ``join`` (" " for words, ""
    for characters) and BLEU uses those tokens as they are (sacrebleu tokenize="none"). With
    ``detok`` (subwords), hypotheses are detokenised and scored against the raw reference
    text with sacrebleu's standard 13a tokenisation: the usual, comparable sacreBLEU."""
    import sacrebleu

    if detok is None:
        h = [join.join(x) for x in hyps]
        r = [join.join(e.tgt) for e in examples]
        tokenize = "none"
    else:
        h = [detok(x) for x in hyps]
        r = [e.ref or detok(e.tgt) for e in examples]
        tokenize = "13a"
    chrf = float(sacrebleu.corpus_chrf(h, [r]).score) if h else 0.0
    rows: list[dict[str, float | int | str]] = []
    lo = 0
    for hi in [*buckets, 10**9]:
        idx = [i for i, e in enumerate(examples) if lo < len(e.src) <= hi]
        if idx:
            rows.append(
                {
                    "src_len": f"{lo + 1}-{hi}" if hi < 10**9 else f">{lo}",
                    "n": len(idx),
                    "bleu": _bleu([h[i] for i in idx], [r[i] for i in idx], tokenize),
                    "exact_match": exact_match(
                        [hyps[i] for i in idx], [examples[i].tgt for i in idx]
                    ),
                }
            )
        lo = hi
    return Scores(
        len(examples),
        exact_match(hyps, [e.tgt for e in examples]),
        _bleu(h, r, tokenize),
        chrf,
        rows,
    )


__all__ = ["Scores", "exact_match", "score"]
