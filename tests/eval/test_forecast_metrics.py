"""MAE, RMSE, MASE (Hyndman & Koehler 2006) and the seasonal-naive forecast against values
computed by hand."""

import math

import numpy as np
import pytest

from attnkit.eval.forecast import mae, mase, naive_scale, rmse, scores, seasonal_naive


def test_mae_and_rmse_by_hand():
    actual, forecast = [[1.0, 2.0, 3.0]], [[2.0, 2.0, 5.0]]
    assert mae(actual, forecast) == pytest.approx(1.0)  # (1 + 0 + 2) / 3
    assert rmse(actual, forecast) == pytest.approx(math.sqrt(5 / 3))  # (1 + 0 + 4) / 3


def test_mase_scales_each_window_by_its_in_sample_seasonal_naive_error():
    past = [[1.0, 3.0, 2.0, 4.0], [0.0, 0.0, 2.0, 2.0]]
    actual = [[1.0, 2.0], [1.0, 1.0]]
    forecast = [[2.0, 4.0], [2.0, 3.0]]  # MAE 1.5 in both windows
    # period 2: |2-1|, |4-3| -> scale 1 ; |2-0|, |2-0| -> scale 2
    assert list(naive_scale(past, 2)) == [1.0, 2.0]
    assert mase(actual, forecast, past, 2) == pytest.approx((1.5 / 1 + 1.5 / 2) / 2)
    # per-window periods: window 2 with m = 1: |0-0|, |2-0|, |2-2| -> scale 2/3
    assert mase(actual, forecast, past, np.array([2, 1])) == pytest.approx((1.5 + 2.25) / 2)


def test_mase_leaves_out_windows_with_a_zero_scale_and_is_nan_without_any():
    past = [[1.0, 3.0, 2.0, 4.0], [5.0, 5.0, 5.0, 5.0]]
    actual, forecast = [[1.0, 2.0], [1.0, 1.0]], [[2.0, 4.0], [9.0, 9.0]]
    assert mase(actual, forecast, past, 2) == pytest.approx(1.5)
    assert math.isnan(mase([[1.0]], [[2.0]], [[5.0, 5.0, 5.0]], 1))


def test_seasonal_naive_repeats_the_last_season():
    past = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    # y_{T+h} = y_{T+h-4*ceil(h/4)}, T = index 5
    assert list(seasonal_naive(past, 4, 6)) == [12.0, 13.0, 14.0, 15.0, 12.0, 13.0]
    got = seasonal_naive([past, past], np.array([4, 1]), 3)
    assert got.tolist() == [[12.0, 13.0, 14.0], [15.0, 15.0, 15.0]]


def test_a_perfectly_seasonal_series_is_forecast_exactly_by_seasonal_naive():
    season = [3.0, -1.0, 0.5]
    y = np.array(season * 6)
    past, future = y[:12], y[12:]
    forecast = seasonal_naive(past, 3, 6)
    assert np.array_equal(forecast, future)
    got = scores(future[None], forecast[None], past[None], np.array([3]))
    assert got["mae"] == 0.0 and got["rmse"] == 0.0
    assert math.isnan(got["mase"])  # its in-sample scale is 0 too: MASE is undefined


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match="share one non-empty shape"):
        mae([[1.0, 2.0]], [[1.0]])
    with pytest.raises(ValueError, match="periods"):
        naive_scale([[1.0, 2.0, 3.0]], 3)
    with pytest.raises(ValueError, match="2 forecasts but 1 past"):
        mase([[1.0], [2.0]], [[1.0], [2.0]], [[1.0, 2.0, 3.0]], 1)
