"""Boolean masks, True = may attend, against loop-built expectations."""

import pytest
import torch
from _reference import band_ref

import attnkit
from attnkit.masks import and_masks, causal_mask, describe, from_key_padding_mask, or_masks

pytestmark = pytest.mark.usefixtures("one_thread")


def test_padding_mask() -> None:
    m = attnkit.padding_mask(torch.tensor([3, 1, 0]), 4)
    assert m.shape == (3, 1, 4) and m.dtype == torch.bool
    expected = [[j < n for j in range(4)] for n in (3, 1, 0)]
    assert m[:, 0].tolist() == expected
    assert attnkit.padding_mask(torch.tensor([2, 3])).shape == (2, 1, 3)  # max_len = max


def test_causal_mask_is_top_left_like_sdpa() -> None:
    m = causal_mask(3, 5)
    assert m.tolist() == [[j <= i for j in range(5)] for i in range(3)]
    assert causal_mask(4).shape == (4, 4)


def test_band_mask_matches_loops() -> None:
    for tq, tk, r in ((5, 5, 0), (5, 7, 2), (6, 4, 1)):
        for causal in (False, True):
            assert torch.equal(
                attnkit.band_mask(tq, tk, r, causal=causal), band_ref(tq, tk, r, causal)
            )


def test_and_or_masks() -> None:
    a = torch.tensor([True, True, False, False])
    b = torch.tensor([True, False, True, False])
    assert and_masks(a, b).tolist() == [True, False, False, False]
    assert or_masks(a, b).tolist() == [True, True, True, False]
    assert and_masks(None, a) is a and and_masks() is None
    assert or_masks(a, None) is None


def test_from_key_padding_mask_flips_polarity() -> None:
    kpm = torch.tensor([[False, True, False]])  # torch: True = ignore
    assert from_key_padding_mask(kpm).tolist() == [[[True, False, True]]]


def test_describe_draws_the_mask() -> None:
    assert describe(causal_mask(2)) == "#.\n##"
    assert describe(None) == "<all keys allowed>"


def test_window_mask_at_any_positions_matches_loops() -> None:
    from attnkit.masks import window_mask

    at = torch.tensor([[3, 0, 7], [1, 5, 5]])  # (B, Tq)
    for radius in (None, 0, 2):
        for causal in (False, True):
            got = window_mask(at, 6, radius, causal=causal)  # (B, Tq, Tk)
            expect = [
                [
                    [
                        (p - j >= 0 if causal else True)
                        and (radius is None or abs(p - j) <= radius)
                        for j in range(6)
                    ]
                    for p in row
                ]
                for row in at.tolist()
            ]
            assert got.tolist() == expect
    keys = torch.tensor([[2, 3, 4]])  # gathered key indices (Tq, W) for one query at 2.5
    assert window_mask(torch.tensor([2.5]), keys, 1).tolist() == [[True, True, False]]
    with pytest.raises(ValueError, match="radius"):
        window_mask(at, 6, -1)
