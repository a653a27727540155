"""Lags of the forecast attention view: the period's multiples it marks, and peak lags."""

import numpy as np

from attnkit.viz.forecast import lag, peak_lags, period_links


def test_lags_count_back_from_each_forecast_step():
    # W = 4 past values t-3..t; step 1 is t+1: key 3 (= t) is 1 back, key 0 is 4 back
    assert [lag(4, 1, j) for j in range(4)] == [4, 3, 2, 1]
    assert [lag(4, 3, j) for j in range(4)] == [6, 5, 4, 3]


def test_period_links_box_the_cells_one_or_more_seasons_back():
    # W = 6, K = 2, period 3: step 1 lags 6..1 -> keys 0 (lag 6) and 3 (lag 3);
    # step 2 lags 7..2 -> keys 1 (6) and 4 (3)
    assert sorted(period_links(6, 2, 3)) == [(0, 0), (1, 1), (3, 0), (4, 1)]


def test_peak_lags_of_hand_made_weights():
    w = np.zeros((2, 5))  # K = 2, W = 5
    w[0, 1] = 1.0  # step 1, key 1: lag 5 - 1 + 1 - 1 = 4
    w[1, 4] = 1.0  # step 2, key 4: lag 5 - 1 + 2 - 4 = 2
    assert peak_lags(w).tolist() == [4, 2]
    assert peak_lags(np.stack([w, w])).shape == (2, 2)
