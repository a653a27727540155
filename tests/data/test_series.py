"""The forecasting task: generated seasonal series, a CSV series, windows split by time,
and per-window normalisation."""

import numpy as np
import pytest

from attnkit.data import series
from attnkit.data.tasks import load_task, task_family


def test_generated_series_follow_their_period_up_to_trend_and_noise():
    xs = series.generate(n=6, length=240, seed=3, periods=(12, 16, 24))
    assert [s.period for s in xs] == [12, 16, 24, 12, 16, 24]
    for s in xs:
        p = s.period
        # the seasonal difference removes the profile (slope·p and noise are left); half a
        # season does not
        season, half = (s.values[k:] - s.values[:-k] for k in (p, p // 2))
        assert season.std() < 0.6 * half.std()
    assert np.array_equal(series.generate(2, 50, 1)[1].values, series.generate(2, 50, 1)[1].values)


def test_windows_are_consecutive_values_and_splits_are_by_time():
    xs = series.generate(n=3, length=200, seed=0)
    sp = series.split(xs, (None, None, None), 1, width=20, horizon=5)
    for w in sp.train[:5] + sp.test[-5:]:
        v = w.series.values
        assert np.array_equal(np.concatenate([w.past, w.future]), v[w.start : w.start + 25])
    end = lambda w: w.start + w.width  # noqa: E731  first target
    assert max(end(w) + w.horizon for w in sp.train) <= 140  # targets in the first 70 %
    assert min(end(w) for w in sp.valid) >= 140 and max(end(w) + 5 for w in sp.valid) <= 170
    assert min(end(w) for w in sp.test) >= 170 and max(end(w) + 5 for w in sp.test) <= 200
    # 3 series: train targets in [0, 140) -> starts 0..115
    assert len(sp.train) == 3 * 116


def test_the_task_draws_the_sizes_asked_for_and_refuses_more_than_there_are():
    sp = load_task("series", seed=0, train_size=50, valid_size=7, test_size=9)
    assert (len(sp.train), len(sp.valid), len(sp.test)) == (50, 7, 9)
    again = load_task("series", seed=0, train_size=50, valid_size=7, test_size=9)
    assert [(w.series.id, w.start) for w in sp.test] == [(w.series.id, w.start) for w in again.test]
    assert task_family("series") == "forecast"
    with pytest.raises(ValueError, match="hold only .* ask for fewer"):
        load_task("series", seed=0, train_size=10**6, valid_size=1, test_size=1)


def test_normalise_uses_the_past_alone():
    past, future = np.array([1.0, 3.0, 5.0, 7.0]), np.array([9.0, 11.0])
    zp, zf, mu, sd = series.normalise(past, future)
    assert mu == 4.0 and sd == pytest.approx(np.sqrt(5.0))
    assert zp.mean() == pytest.approx(0.0) and zp.std() == pytest.approx(1.0)
    assert np.allclose(zf * sd + mu, future)
    assert series.normalise(np.ones(3), np.ones(2))[3] == 1.0  # a constant past: σ = 1


def test_read_csv_by_name_index_or_last_column(tmp_path):
    f = tmp_path / "s.csv"
    f.write_text("date,sales,temp\n2020-01,5,1.5\n2020-02,,2\n2020-03,7,2.5\n")
    assert series.read_csv(f, "sales", 2).values.tolist() == [5.0, 7.0]  # empty cell skipped
    assert series.read_csv(f, "1", 2).values.tolist() == [5.0, 7.0]
    assert series.read_csv(f, "", 2).values.tolist() == [1.5, 2.0, 2.5]
    with pytest.raises(ValueError, match="no column 'x'"):
        series.read_csv(f, "x", 2)
    with pytest.raises(ValueError, match="period"):
        series.read_csv(f, "sales", 0)
    f.write_text("a\n1\noops\n")
    with pytest.raises(ValueError, match=r"s.csv:3: 'oops'"):
        series.read_csv(f, "a", 2)
