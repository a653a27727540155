"""AER and entropy against values computed by hand from Och & Ney (2003), eq. 22."""

import math

import pytest
import torch

from attnkit.eval.alignment import (
    aer,
    argmax_links,
    attention_entropy,
    corpus_aer,
    parse_pharaoh,
    threshold_links,
)


def test_parse_pharaoh_sure_and_possible() -> None:
    gold = parse_pharaoh("0-0 1-1 2?1 3p2")
    assert gold.sure == {(0, 0), (1, 1)}
    assert gold.possible == {(0, 0), (1, 1), (2, 1), (3, 2)}  # P contains S
    assert parse_pharaoh("").sure == frozenset()
    with pytest.raises(ValueError, match="src-tgt"):
        parse_pharaoh("0:1")
    with pytest.raises(ValueError, match="non-negative"):
        parse_pharaoh("a-1")


def test_aer_hand_computed_with_possible_links() -> None:
    gold = parse_pharaoh("0-0 1-1 2?1")
    pred = {(0, 0), (2, 1), (2, 2)}
    # |A∩S| = 1, |A∩P| = 2, |A| = 3, |S| = 2  ->  1 - 3/5
    assert aer(pred, gold) == pytest.approx(0.4)
    assert aer(pred, gold.sure, gold.possible) == pytest.approx(0.4)


def test_aer_single_gold_set_is_sure_and_possible() -> None:
    # A∩S = A∩P = {(0,0)}: 1 - 2/(2+3)
    assert aer({(0, 0), (1, 2)}, {(0, 0), (1, 1), (2, 2)}) == pytest.approx(0.6)
    assert aer({(0, 0)}, {(0, 0)}) == 0.0
    assert aer(set(), set()) == 0.0
    assert aer({(0, 1)}, {(0, 0)}) == 1.0


def test_corpus_aer_sums_counts_not_rates() -> None:
    preds = [{(0, 0), (2, 1), (2, 2)}, {(0, 0)}]
    golds = [parse_pharaoh("0-0 1-1 2?1"), parse_pharaoh("0-0")]
    # counts (1,2,3,2) + (1,1,1,1) = (2,3,4,3): 1 - 5/7 (the mean of rates would be 0.2)
    assert corpus_aer(preds, golds) == pytest.approx(2 / 7)
    with pytest.raises(ValueError, match="gold"):
        corpus_aer(preds, golds[:1])


def test_links_from_weights_rows_are_targets() -> None:
    w = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.0, 0.0, 0.0]])  # (Tq=3, Tk=3)
    assert argmax_links(w) == {(0, 0), (2, 1)}  # padded row 2 gives no link
    assert threshold_links(w, 0.25) == {(0, 0), (1, 1), (2, 1)}
    assert aer(argmax_links(w), parse_pharaoh("0-0 2-1")) == 0.0
    with pytest.raises(ValueError, match="threshold"):
        threshold_links(w, 0.0)
    with pytest.raises(ValueError, match="one"):
        argmax_links(torch.rand(2, 3, 3))


def test_entropy_hand_computed() -> None:
    w = torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.0, 0.0]])
    assert attention_entropy(w) == pytest.approx(math.log(2) / 2)  # zero row skipped
    assert attention_entropy(w, normalised=True) == pytest.approx(0.5)
    # rows that do not sum to one (local-p) are renormalised first
    assert attention_entropy(torch.tensor([[0.25, 0.25]])) == pytest.approx(math.log(2))
    uniform = torch.full((2, 3, 4, 5), 0.2)  # (L, H, Tq, Tk)
    assert attention_entropy(uniform, normalised=True) == pytest.approx(1.0)


def test_evaluate_alignments_corpus() -> None:
    from attnkit.eval.alignment import evaluate_alignments

    w1 = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])  # argmax links {(0,0), (2,1)}
    w2 = torch.tensor([[0.5, 0.5]])  # argmax {(0,0)}; threshold 0.5 -> {(0,0), (1,0)}
    scores = evaluate_alignments([w1, w2], ["0-0 1-1 2?1", "0-0"], threshold=0.5)
    # argmax: (1,2,2,2) + (1,1,1,1) = (2,3,3,3) -> 1 - 5/6
    assert scores.aer_argmax == pytest.approx(1 / 6)
    # threshold: {(0,0),(2,1)} -> (1,2,2,2); {(0,0),(1,0)} -> (1,1,2,1); sum (2,3,4,3) -> 1 - 5/7
    assert scores.aer_threshold == pytest.approx(2 / 7)
    assert scores.sentences == 2
    expected = (attention_entropy(w1) + math.log(2)) / 2
    assert scores.entropy == pytest.approx(expected)
    with pytest.raises(ValueError, match="outside the 2 source x 1 target"):
        evaluate_alignments([w2], ["0-1"])  # a swapped src-tgt link
