"""How well attention weights match word alignments: AER and entropy.

Links are (src, tgt) pairs, as in the Pharaoh format ``"0-0 1-2"`` (source index first).
Attention weights are (Tq, Tk) = (target, source): weights[t, s] is the link (s, t).

Alignment error rate (Och & Ney 2003, "A Systematic Comparison of Various Statistical
Alignment Models", eq. 22), with sure links S ⊆ possible links P and predicted links A:

    AER(S, P; A) = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

When one gold set is given it is both sure and possible (S = P = gold).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import as_stack

Link = tuple[int, int]  # (src, tgt)


@dataclass(frozen=True)
class GoldAlignment:
    """sure S and possible P links of one sentence pair; P contains S."""

    sure: frozenset[Link]
    possible: frozenset[Link]


def parse_pharaoh(text: str) -> GoldAlignment:
    """``"0-0 1-2 2?3 3p3"`` -> sure {(0,0), (1,2)}, possible {(0,0), (1,2), (2,3), (3,3)}.

    ``s-t`` is a sure link from source word s to target word t; ``s?t`` and ``s pt`` (``3p3``)
    are possible links (the Hansards/EPPS convention).
    """
    sure: set[Link] = set()
    possible: set[Link] = set()
    for item in text.split():
        sep = next((c for c in "-?p" if c in item), None)
        if sep is None:
            raise ValueError(f"bad alignment link {item!r}: write 'src-tgt' (sure) or 'src?tgt'")
        left, _, right = item.partition(sep)
        if not (left.isdigit() and right.isdigit()):
            raise ValueError(f"bad alignment link {item!r}: indices must be non-negative ints")
        (sure if sep == "-" else possible).add((int(left), int(right)))
    return GoldAlignment(frozenset(sure), frozenset(possible | sure))


def read_pharaoh(lines: Iterable[str]) -> list[GoldAlignment]:
    """One GoldAlignment per line of a Pharaoh-format file (an empty line = no links)."""
    return [parse_pharaoh(line) for line in lines]


def _gold(sure: Iterable[Link] | GoldAlignment, possible: Iterable[Link] | None) -> GoldAlignment:
    if isinstance(sure, GoldAlignment):
        return sure
    s = frozenset((int(a), int(b)) for a, b in sure)
    p = s if possible is None else frozenset((int(a), int(b)) for a, b in possible) | s
    return GoldAlignment(s, p)


def split_gold(
    gold: Iterable[Link] | GoldAlignment | None, tq: int, tk: int
) -> tuple[set[Link], set[Link]]:
    """(sure, possible-only) links to draw, checked against a (Tq, Tk) matrix; plain (src, tgt)
    pairs are all sure."""
    if gold is None:
        return set(), set()
    if isinstance(gold, GoldAlignment):
        sure, maybe = set(gold.sure), set(gold.possible - gold.sure)
    else:
        sure, maybe = {(int(s), int(t)) for s, t in gold}, set()
    for s, t in sure | maybe:
        if not (0 <= s < tk and 0 <= t < tq):
            raise ValueError(
                f"gold link ({s}, {t}) outside the {tk} source x {tq} target tokens; "
                "links are (src, tgt), as in Pharaoh '0-0 1-2'"
            )
    return sure, maybe


def _matrix(weights: Any) -> np.ndarray:
    stack = as_stack(weights)
    if stack.shape[:2] != (1, 1):
        raise ValueError("pass one (Tq, Tk) matrix: pick a layer and head, or average heads")
    return stack[0, 0]  # (Tq, Tk)


def argmax_links(weights: Any) -> set[Link]:
    """Each target word t links to its most-attended source word: {(argmax_s a_ts, t)}.
    Rows with no weight at all (padding) give no link. weights (Tq, Tk)."""
    mat = _matrix(weights)
    return {(int(np.argmax(row)), t) for t, row in enumerate(mat) if row.max() > 0}


def threshold_links(weights: Any, threshold: float) -> set[Link]:
    """Every (s, t) with a_ts >= threshold. weights (Tq, Tk)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1]; got {threshold}")
    mat = _matrix(weights)
    t_idx, s_idx = np.nonzero(mat >= threshold)
    return {(int(s), int(t)) for s, t in zip(s_idx, t_idx, strict=True)}


def _counts(pred: Iterable[Link], gold: GoldAlignment) -> tuple[int, int, int, int]:
    a = set(pred)
    return len(a & gold.sure), len(a & gold.possible), len(a), len(gold.sure)


def aer(
    predicted: Iterable[Link],
    sure: Iterable[Link] | GoldAlignment,
    possible: Iterable[Link] | None = None,
) -> float:
    """AER of one sentence pair (Och & Ney 2003). ``sure`` may be a GoldAlignment; with no
    ``possible`` set, S = P = sure. Returns 0.0 when both A and S are empty."""
    a_s, a_p, n_a, n_s = _counts(predicted, _gold(sure, possible))
    return 0.0 if n_a + n_s == 0 else 1.0 - (a_s + a_p) / (n_a + n_s)


def corpus_aer(predicted: Sequence[Iterable[Link]], gold: Sequence[GoldAlignment]) -> float:
    """AER over a corpus: the counts are summed over sentences before dividing (as the
    standard ``aer.pl`` scorer does), not the per-sentence rates averaged."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions but {len(gold)} gold alignments")
    tot = np.zeros(4, dtype=np.int64)
    for p, g in zip(predicted, gold, strict=True):
        tot += np.array(_counts(p, g))
    a_s, a_p, n_a, n_s = (int(x) for x in tot)
    return 0.0 if n_a + n_s == 0 else 1.0 - (a_s + a_p) / (n_a + n_s)


def attention_entropy(weights: Any, *, normalised: bool = False) -> float:
    """Mean over query rows of H(a_t) = -Σ_s a_ts log a_ts (nats), rows renormalised to sum
    to one first (local-p weights do not) and all-zero rows (padding) skipped.
    ``normalised=True`` divides by log Tk, giving 1 for uniform attention over all keys (cut
    padded keys off first: weights[..., :tgt_len, :src_len]). weights (Tq, Tk), (H, Tq, Tk)
    or (L, H, Tq, Tk): every row of every head and layer counts once."""
    stack = as_stack(weights)
    rows = stack.reshape(-1, stack.shape[-1])  # (L*H*Tq, Tk)
    rows = rows[rows.sum(axis=1) > 0]
    if rows.shape[0] == 0:
        raise ValueError("every row of the weights is zero; nothing to measure")
    p = rows / rows.sum(axis=1, keepdims=True)  # (N, Tk)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)  # (N,)
    if normalised:
        ent = ent / np.log(p.shape[1]) if p.shape[1] > 1 else np.zeros_like(ent)
    return float(ent.mean())


@dataclass(frozen=True)
class AlignmentScores:
    """Corpus-level alignment quality of attention: AER of argmax links, AER of thresholded
    links (None without a threshold), mean entropy in nats and normalised to [0, 1]."""

    aer_argmax: float
    aer_threshold: float | None
    entropy: float
    entropy_normalised: float
    sentences: int


def _check_links(gold: GoldAlignment, tq: int, tk: int, k: int) -> None:
    for s, t in gold.possible:
        if not (0 <= s < tk and 0 <= t < tq):
            raise ValueError(
                f"sentence {k}: gold link {s}-{t} is outside the {tk} source x {tq} target "
                "tokens of its weights; Pharaoh links are src-tgt (swap with a reversed corpus)"
            )


def evaluate_alignments(
    weights: Sequence[Any],
    gold: Sequence[GoldAlignment | str],
    *,
    threshold: float | None = None,
) -> AlignmentScores:
    """Score a corpus of attention matrices against gold alignments.

    weights: one (Tq, Tk) matrix per sentence (target rows, source columns), cut to the real
    lengths (average or pick heads first); gold: a GoldAlignment or a Pharaoh line each.
    """
    if len(weights) != len(gold):
        raise ValueError(f"{len(weights)} weight matrices but {len(gold)} gold alignments")
    golds = [parse_pharaoh(g) if isinstance(g, str) else g for g in gold]
    mats = [_matrix(w) for w in weights]
    for k, (m, g) in enumerate(zip(mats, golds, strict=True)):
        _check_links(g, m.shape[0], m.shape[1], k)
    entropies = [attention_entropy(m) for m in mats if m.sum() > 0]
    normalised = [attention_entropy(m, normalised=True) for m in mats if m.sum() > 0]
    return AlignmentScores(
        aer_argmax=corpus_aer([argmax_links(m) for m in mats], golds),
        aer_threshold=None
        if threshold is None
        else corpus_aer([threshold_links(m, threshold) for m in mats], golds),
        entropy=float(np.mean(entropies)) if entropies else 0.0,
        entropy_normalised=float(np.mean(normalised)) if normalised else 0.0,
        sentences=len(mats),
    )


__all__ = [
    "AlignmentScores",
    "GoldAlignment",
    "aer",
    "argmax_links",
    "attention_entropy",
    "corpus_aer",
    "evaluate_alignments",
    "parse_pharaoh",
    "read_pharaoh",
    "split_gold",
    "threshold_links",
]
