"""Alignment error rate against values computed by hand (Och & Ney 2003, with S = P)."""

import pytest
import torch

from attnkit.train.aer import alignment_error_rate, argmax_links


def test_aer_by_hand() -> None:
    gold = [[(0, 0), (1, 2), (3, 1)]]
    assert alignment_error_rate([{(0, 0), (1, 2), (3, 1)}], gold) == 0.0
    # 2 of 3 predicted links are right: 1 - 2*2 / (3 + 3) = 1/3
    assert alignment_error_rate([{(0, 0), (1, 2), (2, 1)}], gold) == pytest.approx(1 / 3)
    assert alignment_error_rate([set()], [[]]) == 0.0
    with pytest.raises(ValueError, match="gold"):
        alignment_error_rate([set()], [])


def test_argmax_links_read_rows_as_target_tokens() -> None:
    w = torch.tensor([[0.9, 0.1, 0.0], [0.0, 0.2, 0.8]])  # (T=2, S=3)
    assert argmax_links(w) == {(0, 0), (2, 1)}
