"""Translation scores on hand-made hypotheses: exact match and the by-length buckets by hand,
BLEU and chrF against sacrebleu called directly on the joined strings."""

import pytest
import sacrebleu

from attnkit.data.example import Example
from attnkit.eval.text import exact_match, score


def test_exact_match_counts_whole_sequences() -> None:
    assert exact_match([["a", "b"], ["c"], ["d"]], [["a", "b"], ["c", "x"], ["d"]]) == 2 / 3
    assert exact_match([], []) == 0.0
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        exact_match([["a"], ["b"]], [["a"]])


def test_score_buckets_by_source_length() -> None:
    # source lengths 2, 5, 6, 12; buckets (5, 10): 1-5, 6-10, >10
    examples = [
        Example(["s"] * 2, ["a", "b", "c", "d"]),
        Example(["s"] * 5, ["e", "f", "g", "h"]),
        Example(["s"] * 6, ["i", "j", "k", "l"]),
        Example(["s"] * 12, ["m", "n", "o", "p"]),
    ]
    hyps = [["a", "b", "c", "d"], ["e", "f", "x", "h"], ["i", "j", "k", "l"], ["z"]]
    s = score(hyps, examples, buckets=(5, 10))
    assert s.n == 4 and s.exact_match == 2 / 4
    assert [(r["src_len"], r["n"], r["exact_match"]) for r in s.by_length] == [
        ("1-5", 2, 1 / 2),
        ("6-10", 1, 1.0),
        (">10", 1, 0.0),
    ]
    h = [" ".join(x) for x in hyps]
    r = [" ".join(e.tgt) for e in examples]
    assert s.bleu == pytest.approx(sacrebleu.corpus_bleu(h, [r], tokenize="none").score)
    assert s.chrf == pytest.approx(sacrebleu.corpus_chrf(h, [r]).score)
    assert s.by_length[1]["bleu"] == pytest.approx(100.0)


def test_characters_are_joined_without_spaces() -> None:
    examples = [Example(list("ab"), list("2015-01-02"))]
    s = score([list("2015-01-03")], examples, join="")
    expected = sacrebleu.corpus_chrf(["2015-01-03"], [["2015-01-02"]]).score
    assert s.chrf == pytest.approx(expected)
    assert s.exact_match == 0.0
