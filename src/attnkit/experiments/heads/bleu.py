"""Corpus BLEU from per-sentence statistics, and its paired bootstrap over seeds × sentences
(Koehn 2004, "Statistical significance tests for machine translation evaluation").

Corpus BLEU (Papineni et al. 2002, eq. 1-2; sacrebleu's defaults: 4-grams, "exp" smoothing):

    BLEU = BP · exp( ¼ Σ_{n=1..4} log p_n ),   p_n = Σ_s m_{s,n} / Σ_s t_{s,n}
    BP   = min(1, exp(1 - r / c)),             c = Σ_s |hyp_s|,  r = Σ_s |ref_s|

m_{s,n}: sentence s's clipped n-gram matches, t_{s,n}: its hypothesis n-grams. A p_n with no
match is smoothed to 1 / (2^k · Σ_s t_{s,n}) for the k-th such n (sacrebleu "exp"); no match of
any order gives 0. Corpus BLEU
is not a mean over sentences, so the bootstrap resamples sentences and recomputes it from the
summed statistics of each resample.

One row of statistics per sentence: STATS = (c, r, m_1..m_4, t_1..t_4).

Legend: N sentences, R resamples, S seeds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..evidence import Interval

ORDER = 4
WIDTH = 2 + 2 * ORDER  # c, r, m_1..m_4, t_1..t_4
CHUNK = 500  # sentence resamples gathered at once


def sentence_stats(hyp: Sequence[str], ref: Sequence[str]) -> list[int]:
    """The BLEU statistics of one tokenised hypothesis against one reference:
    [c, r, m_1..m_4, t_1..t_4] (see the module doc)."""
    matches, totals = [], []
    for n in range(1, ORDER + 1):
        h = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
        r = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
        matches.append(sum(min(k, r[g]) for g, k in h.items()))
        totals.append(max(len(hyp) - n + 1, 0))
    return [len(hyp), len(ref), *matches, *totals]


def corpus_bleu(sums: np.ndarray) -> np.ndarray:
    """Corpus BLEU (0..100) from summed statistics: sums (..., WIDTH) -> (...)."""
    sums = np.asarray(sums, dtype=np.float64)
    c, r = sums[..., 0], sums[..., 1]  # (...)
    m, t = sums[..., 2 : 2 + ORDER], sums[..., 2 + ORDER :]  # (..., 4) each
    zero = (m == 0) & (t > 0)  # (..., 4): smoothed orders
    k = np.cumsum(zero, axis=-1)  # (..., 4): the k-th smoothed order gets 1 / 2^k
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(zero, 1.0 / (2.0**k * t), m / t)  # (..., 4)
        p = np.where(t > 0, p, 0.0)
        logs = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), -np.inf)  # (..., 4)
        bp = np.where(c >= r, 1.0, np.exp(1 - r / np.where(c > 0, c, 1.0)))  # (...)
    bleu = 100 * bp * np.exp(logs.mean(axis=-1))  # (...)
    return np.where((c > 0) & (m.sum(axis=-1) > 0), bleu, 0.0)  # no match at all: 0


def paired_bleu_bootstrap(
    a: Sequence[np.ndarray],
    b: Sequence[np.ndarray],
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """The gap BLEU(a) - BLEU(b), averaged over seeds, with a percentile interval: each
    resample draws S seeds with replacement and, within each drawn seed, its N test sentences
    with replacement, the same draw for both arms (paired), and recomputes each arm's corpus
    BLEU on it. ``a[s]``: arm a's statistics (N_s, WIDTH) on seed s's test set."""
    if len(a) != len(b) or not a:
        raise ValueError(f"{len(a)} and {len(b)} seeds: both arms need the same seeds, >= 1")
    shapes = [(np.shape(x), np.shape(y)) for x, y in zip(a, b, strict=True)]
    if any(sa != sb or len(sa) != 2 or sa[1] != WIDTH or sa[0] == 0 for sa, sb in shapes):
        raise ValueError(f"each seed needs (N, {WIDTH}) statistics for both arms: {shapes}")
    rng = np.random.default_rng(seed)
    S = len(a)
    point = float(
        np.mean([corpus_bleu(x.sum(0)) - corpus_bleu(y.sum(0)) for x, y in zip(a, b, strict=True)])
    )
    # gaps[s, j]: the gap on sentence resample j of seed s; S·R of them, so that a seed drawn
    # twice in one resample gets two independent sentence draws
    gaps = np.empty((S, S * resamples))
    for s, (x, y) in enumerate(zip(a, b, strict=True)):
        for start in range(0, S * resamples, CHUNK):  # chunks keep (C, N, WIDTH) small
            n = min(CHUNK, S * resamples - start)
            idx = rng.integers(0, len(x), size=(n, len(x)))  # (C, N)
            gaps[s, start : start + n] = corpus_bleu(x[idx].sum(1)) - corpus_bleu(y[idx].sum(1))
    seeds = rng.integers(0, S, size=(resamples, S))  # (R, S)
    cols = np.arange(resamples * S).reshape(resamples, S)  # (R, S)
    stats = np.sort(gaps[seeds, cols].mean(axis=1))  # (R,)
    lo = float(stats[int(np.floor((1 - level) / 2 * (resamples - 1)))])
    hi = float(stats[int(np.ceil((1 + level) / 2 * (resamples - 1)))])
    return Interval(point, min(lo, point), max(hi, point), S, level)


__all__ = ["ORDER", "WIDTH", "corpus_bleu", "paired_bleu_bootstrap", "sentence_stats"]
